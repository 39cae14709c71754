"""The official JavaScript clients against a live server: socket.io-client (connect, a chat message with its
acknowledgement and the pushed event) and Apollo Client (a mutation, a query, an error, and a query through its
persisted-query link, which falls back to sending the query). Their versions are
declared in ``tests/node/package.json`` and installed with npm into a cache folder. Skipped only where Node
is not installed."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import requests

from trellis.testing import node
from trellis.testing.plugin import TEST_MASTER_KEY
from trellis_authentication.testing import create_user_over_http

NODE_FILES = Path(__file__).parent / "node"

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(node.node_missing(), reason="Node is not installed"),
]


def node_project() -> Path:
    """``tests/node`` installed into a cache folder keyed by its package.json (installed once per version)."""
    return node.node_project(NODE_FILES / "package.json")


def test_socketio_client_and_apollo_client(live_server):
    url = live_server.url
    master = {"masterkey": TEST_MASTER_KEY}
    created = requests.post(
        f"{url}/admin/database/schemas",
        headers=master,
        timeout=10,
        json={"name": "Note", "fields": {"title": {"type": "String", "required": True}, "stars": "Number"}},
    )
    assert created.status_code == 201, created.text
    requests.post(f"{url}/database/Note", headers=master, timeout=10, json={"title": "already there", "stars": 5})
    user = create_user_over_http(url)
    room = requests.post(f"{url}/chat/rooms", headers=user.headers, timeout=10, json={"roomName": "node", "users": []})
    assert room.status_code == 201, room.text
    room_id = room.json()["roomId"]

    folder = node_project()
    env = {
        **os.environ,
        "TRELLIS_URL": url,
        "TRELLIS_USER_TOKEN": user.access_token,
        "TRELLIS_ROOM_ID": room_id,
        "TRELLIS_MASTER_KEY": TEST_MASTER_KEY,
    }
    result = subprocess.run(
        ["node", "clients.mjs"], cwd=folder, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])

    ack, pushed = seen["socket"]["ack"], seen["socket"]["pushed"]
    assert ack["message"] == "hello from node" and ack["room"] == room_id and ack["_id"]
    assert pushed == ack  # the event every participant gets is the stored message the sender was acknowledged
    apollo = seen["apollo"]
    assert apollo["created"]["title"] == "from apollo" and apollo["created"]["stars"] == 4
    assert [n["title"] for n in apollo["listed"]] == ["already there", "from apollo"]
    assert apollo["failure"]["codes"] == ["GRAPHQL_VALIDATION_FAILED"], apollo["failure"]
    # Apollo's persisted-query link: the hash alone is not found, so the link sends the query with it.
    persisted = seen["persisted"]
    assert [n["title"] for n in persisted["listed"]] == ["already there", "from apollo"]
    assert persisted["sent"] == [{"query": False, "hash": True}, {"query": True, "hash": True}]


def test_tus_js_client_resumes_an_upload(live_server, tmp_path):
    """tus-js-client (unmodified) against ``/storage/uploads``: two 1 MiB chunks, an abort, then a new Upload
    resuming from the URL: it finds the stored offset with HEAD and sends only the rest."""
    user = create_user_over_http(live_server.url)
    content = os.urandom(3 * 1024 * 1024 + 4321)
    source = tmp_path / "upload.bin"
    source.write_bytes(content)
    folder = node_project()
    env = {
        **os.environ,
        "TRELLIS_URL": live_server.url,
        "TRELLIS_USER_TOKEN": user.access_token,
        "TUS_FILE": str(source),
    }
    seen = run_node(folder, "tus_upload.mjs", env)
    mib = 1024 * 1024
    assert seen["url"] == seen["firstUrl"] and seen["url"].startswith(f"{live_server.url}/storage/uploads/")
    assert seen["resumedFrom"] == 2 * mib  # what the aborted upload had stored
    assert seen["patches"] == [2 * mib, 3 * mib]  # only the rest was sent
    record = requests.get(f"{live_server.url}/storage/file/{seen['fileId']}", headers=user.headers, timeout=10)
    assert record.status_code == 200, record.text
    assert record.json()["displayName"] == "from-tus-js-client.bin" and record.json()["size"] == len(content)
    download = requests.get(f"{live_server.url}/storage/download/{seen['fileId']}", headers=user.headers, timeout=30)
    assert download.content == content


def test_tus_js_client_parallel_uploads_make_one_file(live_server, app_config, tmp_path):
    """tus-js-client with ``parallelUploads: 2``: each half goes up as a partial upload (``Upload-Concat:
    partial``), then the final upload concatenates them. One file, named as the whole, with every byte; the partial
    uploads' bytes are gone from the storage directory."""
    user = create_user_over_http(live_server.url)
    content = os.urandom(3 * 1024 * 1024 + 4321)
    source = tmp_path / "upload.bin"
    source.write_bytes(content)
    folder = node_project()
    store = Path(app_config["STORAGE_PATH"])
    before = {p for p in store.rglob("*") if p.is_file()}
    env = {
        **os.environ,
        "TRELLIS_URL": live_server.url,
        "TRELLIS_USER_TOKEN": user.access_token,
        "TUS_FILE": str(source),
    }
    seen = run_node(folder, "tus_parallel.mjs", env)
    assert seen["ok"] is True, seen
    posts = [r["concat"] for r in seen["requests"] if r["method"] == "POST"]
    assert posts.count("partial") == 2 and posts[-1].startswith("final;"), posts
    assert seen["url"].endswith(seen["fileId"])
    admin = {"masterkey": TEST_MASTER_KEY}
    files = requests.get(f"{live_server.url}/admin/storage/files", params={"owner": user.id}, headers=admin, timeout=10)
    assert files.status_code == 200 and files.json()["count"] == 1, files.text
    record = files.json()["files"][0]
    assert record["_id"] == seen["fileId"] and record["displayName"] == "parallel.bin"
    assert record["size"] == len(content)
    download = requests.get(f"{live_server.url}/storage/download/{seen['fileId']}", headers=user.headers, timeout=30)
    assert download.content == content
    added = {p for p in store.rglob("*") if p.is_file()} - before
    assert [p.name for p in added] == [seen["fileId"]]  # the file's blob, and no partial upload's bytes


def test_tus_js_client_resumes_an_upload_after_a_restore(live_server, tmp_path):
    """tus-js-client sends two 1 MiB chunks and stops; the server is backed up; the upload is finished; the
    backup is restored (through the admin routes of the running server). Resuming the same URL, tus-js-client
    finds the archive's offset with HEAD, sends only the rest, and the file has every byte."""
    user = create_user_over_http(live_server.url)
    content = os.urandom(3 * 1024 * 1024 + 4321)
    source = tmp_path / "upload.bin"
    source.write_bytes(content)
    folder = node_project()
    env = {
        **os.environ,
        "TRELLIS_URL": live_server.url,
        "TRELLIS_USER_TOKEN": user.access_token,
        "TUS_FILE": str(source),
    }

    def run(**step: str) -> dict:
        return run_node(folder, "tus_upload.mjs", {**env, **step})

    admin = {"masterkey": TEST_MASTER_KEY}
    url = run(TUS_STEP="start")["url"]
    name = requests.post(f"{live_server.url}/admin/backups", headers=admin, timeout=30).json()["name"]
    _wait_for(lambda: requests.get(f"{live_server.url}/admin/backups", headers=admin, timeout=10).json(), "backups")
    first = run(TUS_STEP="resume", TUS_URL=url)  # finished after the backup
    assert first["fileId"] and first["resumedFrom"] == 2 * 1024 * 1024
    restoring = requests.post(f"{live_server.url}/admin/backups/{name}/restore", headers=admin, timeout=30)
    assert restoring.status_code == 202, restoring.text
    _wait_for(lambda: requests.get(f"{live_server.url}/admin/backups", headers=admin, timeout=10).json(), "restore")
    seen = run(TUS_STEP="resume", TUS_URL=url)
    mib = 1024 * 1024
    assert seen["url"] == url and seen["resumedFrom"] == 2 * mib  # the archive's offset
    assert seen["patches"] == [2 * mib, 3 * mib]  # only the rest was sent
    download = requests.get(f"{live_server.url}/storage/download/{seen['fileId']}", headers=user.headers, timeout=30)
    assert download.content == content


def run_node(folder: Any, script: str, env: dict[str, str]) -> dict:
    """Run a Node script of ``tests/node``; its last output line is the JSON the test asserts on."""
    result = subprocess.run(
        ["node", script], cwd=folder, env=env, capture_output=True, text=True, timeout=90, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def _wait_for(listing: Any, what: str) -> None:
    """Until the newest backup (``what="backups"``) or the restore is done; a failure fails the test."""
    from trellis.testing.waiting import wait_until

    def state() -> dict | None:
        shown = listing()
        current = shown["backups"][0] if what == "backups" else shown.get("restore") or {}
        return current if current.get("status") in ("done", "failed") else None

    assert wait_until(state, f"the {what} finished", timeout=120)["status"] == "done"
