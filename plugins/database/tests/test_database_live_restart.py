"""PostgreSQL restarted under a live subscriber of a schema under access control: every committed change
reaches the subscriber, or the subscriber is told to resume (``subscriptionError`` with ``since`` on
Socket.IO, the stream's end on SSE, after which ``Last-Event-ID`` resumes it) — never silently dropped.
A throwaway cluster (initdb) on its own port, never the shared server."""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from trellis.testing.plugin import TEST_MASTER_KEY, LiveServer, database_kind
from trellis_authentication.testing import create_user_over_http

from .test_database_live_commit_order import Stream
from .test_database_subscription_faults import serving
from .test_database_subscriptions import Watcher

ADMIN = {"masterkey": TEST_MASTER_KEY}
WAIT = 15.0
ROUNDS = 3
pytestmark = [
    pytest.mark.live,
    pytest.mark.long,
    pytest.mark.skipif(database_kind() != "postgresql", reason="a PostgreSQL restart is a PostgreSQL fault"),
]


@pytest.fixture()
def server(app_config, pg_cluster, tmp_path) -> Iterator[LiveServer]:
    with serving(app_config, pg_cluster, tmp_path) as served:
        yield served


def _until_acknowledged(method: str, url: str, **kwargs: Any) -> requests.Response:
    """A request sent again after each 503 (the database restarting), as a client would."""
    deadline = time.monotonic() + WAIT
    while True:
        try:
            answer = requests.request(method, url, timeout=WAIT, **kwargs)
        except requests.ConnectionError:
            answer = None
        if answer is not None and answer.status_code != 503:
            return answer
        assert time.monotonic() < deadline, "the server did not come back"
        time.sleep(0.2)


class Resuming:
    """A Socket.IO subscriber that subscribes again from ``since`` whenever it is told to."""

    def __init__(self, url: str, token: str, schema: str) -> None:
        self.watcher = Watcher(url, {"token": token})
        self.errors: queue.Queue = queue.Queue()
        self.watcher.client.on("subscriptionError", self.errors.put, namespace="/database/")
        self.schema = schema
        self.ids: list[str] = []
        self.watcher.subscribe(schema=schema)

    def collect(self, wanted: set[str]) -> set[str]:
        deadline = time.monotonic() + WAIT * 2
        while not wanted <= set(self.ids) and time.monotonic() < deadline:
            try:
                told = self.errors.get_nowait()
            except queue.Empty:
                told = None
            if told is not None:
                assert told["since"] >= 0 and told["error"]["status"] == 503, told
                self.watcher.subscribe(schema=self.schema, since=told["since"])
            try:
                change = self.watcher.changes.get(timeout=0.2)
            except queue.Empty:
                continue
            self.ids.append(change["document"]["_id"])
        return set(self.ids)


def test_a_restart_never_drops_a_live_event_under_access_control(server, pg_cluster):
    schema = "Watched"
    created = _until_acknowledged(
        "POST",
        f"{server.url}/admin/database/schemas",
        headers=ADMIN,
        json={
            "name": schema,
            "fields": {"n": "Number"},
            "modelOptions": {"conduit": {"authorization": {"enabled": True}}},
        },
    )
    assert created.status_code == 201, created.text
    alice = create_user_over_http(server.url)
    socket = Resuming(server.url, alice.access_token, schema)
    stream = Stream(f"{server.url}/database/{schema}/changes", alice.headers)
    written: set[str] = set()
    try:
        for round_ in range(ROUNDS):
            for n in range(3):
                answer = _until_acknowledged(
                    "POST", f"{server.url}/database/{schema}", headers=alice.headers, json={"n": round_ * 10 + n}
                )
                assert answer.status_code == 201, answer.text
                written.add(answer.json()["_id"])
            pg_cluster.pg_ctl("restart")  # every pooled connection of the server is dead now
            answer = _until_acknowledged(
                "POST", f"{server.url}/database/{schema}", headers=alice.headers, json={"n": round_ * 10 + 9}
            )
            assert answer.status_code == 201, answer.text
            written.add(answer.json()["_id"])
            assert socket.collect(written) >= written
        # SSE: the events of a stream that ended are resumed with Last-Event-ID
        seen = {event["data"]["_id"] for event in stream.events}
        if not written <= seen:
            last = stream.events[-1]["id"] if stream.events else "0"
            with requests.get(
                f"{server.url}/database/{schema}/changes",
                headers={**alice.headers, "Last-Event-ID": last},
                stream=True,
                timeout=WAIT,
            ) as resumed:
                for line in resumed.iter_lines(decode_unicode=True):
                    if line.startswith("data: "):
                        seen.add(line.split('"_id":"', 1)[1].split('"', 1)[0])
                    if written <= seen:
                        break
        assert written <= seen
    finally:
        stream.close()
        socket.watcher.close()
    log = server.log_path.read_text()
    assert "Traceback" not in log, log
