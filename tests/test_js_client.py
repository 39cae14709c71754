"""The TypeScript/JavaScript client SDK (``clients/js``, npm package ``trellis-client``) against a live server.

The package is built as its users build it (``tests/js_sdk.py``), which must print nothing. Then each of its
Node test files (``clients/js/test/*.test.mjs``, node:test) runs against one live server, and the README's quick
start runs as written. Where a claim is about the server, this side checks it in the database: 20 calls in
flight when the access token was refused rotate the session's refresh token exactly once."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from trellis.testing.plugin import TEST_MASTER_KEY, TEST_SECRET_KEY, LiveServer, running_servers

from .js_sdk import CLIENT, IN_CI, Built, needs_node, sdk  # noqa: F401  (sdk: the fixture)

pytestmark = [pytest.mark.live, pytest.mark.long, needs_node]

# The server's functions folder: what functions.test.mjs and errors.test.mjs call.
FUNCTIONS = """
from trellis_functions import Reject, function


@function("add")
def add(ctx, params):
    return {"sum": params["a"] + params["b"], "user": ctx.user["_id"]}


@function("hello", auth="anyone")
def hello(ctx, params):
    return "hello, anyone"


@function("refuse", auth="anyone")
def refuse(ctx, params):
    raise Reject(f"closed on {params['day']}", status=422, errors={"day": ["closed"]})
"""


@pytest.fixture(scope="module")
def server(app, app_config, tmp_path_factory) -> Iterator[LiveServer]:
    """One live server for the module, with the functions folder above."""
    folder = tmp_path_factory.mktemp("js-client-server")
    functions = folder / "functions"
    functions.mkdir()
    (functions / "sdk_calls.py").write_text(FUNCTIONS)
    with running_servers(app, app_config, folder) as start:
        yield start(TRELLIS_FUNCTIONS_PATH=str(functions))


def node_env(server: LiveServer, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "TRELLIS_URL": server.url,
        "TRELLIS_MASTER_KEY": TEST_MASTER_KEY,
        "TRELLIS_SECRET_KEY": TEST_SECRET_KEY,  # refresh.test.mjs signs expired tokens as the server would
        **extra,
    }


def run_tests(sdk: Built, server: LiveServer, name: str, tmp_path: Path, **extra: str) -> list[dict]:
    """Run ``clients/js/test/<name>.test.mjs``; every test in it must pass. Answers the facts it reported."""
    report = tmp_path / f"{name}.jsonl"
    result = subprocess.run(
        ["node", "--test", "--test-force-exit", "--test-reporter=spec", f"test/{name}.test.mjs"],
        cwd=sdk.folder,
        env=node_env(server, TRELLIS_TEST_REPORT=str(report), **extra),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    passed = re.search(r"^\S* ?pass (\d+)$", output, re.MULTILINE)
    assert passed and int(passed.group(1)) > 0 and re.search(r"^\S* ?fail 0$", output, re.MULTILINE), output
    return [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []


def test_the_build_prints_nothing_and_makes_the_package(sdk):
    assert sdk.output == ""  # no warning from npm, tsc or esbuild
    dist = sdk.folder / "dist"
    for name in ("index.js", "index.d.ts", "client.d.ts", "trellis.browser.js"):
        assert (dist / name).is_file(), name
    manifest = json.loads((CLIENT / "package.json").read_text())
    assert manifest["name"] == "trellis-client" and manifest["type"] == "module"
    assert sorted(manifest["dependencies"]) == ["socket.io-client", "tus-js-client"]
    pinned = {**manifest["dependencies"], **manifest["devDependencies"]}
    assert all(re.fullmatch(r"\d+\.\d+\.\d+", version) for version in pinned.values()), pinned
    # The browser bundle is one ES module with both dependencies inside: no import left to resolve.
    bundle = (dist / "trellis.browser.js").read_text()
    assert not re.search(r"""^\s*import\b|\bfrom\s*["']|require\(["']""", bundle, re.MULTILINE)
    assert re.search(r"export\s*\{[^}]*\bTrellis\b", bundle)
    # Strict types: nothing in the published declarations is `any`.
    declarations = "".join(path.read_text() for path in dist.glob("*.d.ts"))
    code = re.sub(r"/\*.*?\*/|//[^\n]*", "", declarations, flags=re.DOTALL)
    assert not re.search(r"\bany\b", code)


def test_calls_are_typed_by_the_schema_interface(sdk):
    """``test/types.ts`` compiles against the built declarations, and each misuse it marks fails to compile."""
    result = subprocess.run(
        ["npm", "run", "typecheck", "--silent"],
        cwd=sdk.folder,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0 and result.stdout + result.stderr == "", result.stdout + result.stderr


def test_auth(sdk, server, tmp_path):
    run_tests(sdk, server, "auth", tmp_path)


def test_twenty_calls_in_flight_renew_the_session_once(sdk, server, app, tmp_path):
    """The Node side counts one renew call per scenario; here, each session's refresh token was rotated
    exactly once (a rotation writes one ``auth_rotated_tokens`` row) and the session was not revoked: two
    renews with the same refresh token would have revoked it as reused, two in sequence would have left two
    rows."""
    from trellis_authentication.models import RotatedToken, Session

    facts = run_tests(sdk, server, "refresh", tmp_path)
    sessions = [fact["value"] for fact in facts if fact["key"] == "renewedOnce"]
    assert len(sessions) == 3, facts
    with app.app_context():
        with app.extensions["trellis"].engine.connect() as connection:
            for session_id in sessions:
                rotations = connection.execute(
                    select(func.count()).select_from(RotatedToken).where(RotatedToken.session_id == session_id)
                ).scalar_one()
                revoked = connection.execute(select(Session.revoked).where(Session.id == session_id)).scalar_one()
                assert (rotations, revoked) == (1, False), session_id


def test_collections(sdk, server, tmp_path):
    run_tests(sdk, server, "collection", tmp_path)


def test_live_data(sdk, server, tmp_path):
    run_tests(sdk, server, "subscribe", tmp_path)


def test_a_dropped_socket_during_200_writes_delivers_each_change_once_in_order(sdk, server, tmp_path):
    run_tests(sdk, server, "reconnect", tmp_path)


def test_storage(sdk, server, tmp_path):
    from PIL import Image

    image = tmp_path / "photo.png"
    Image.new("RGB", (64, 48), (200, 30, 30)).save(image)
    run_tests(sdk, server, "storage", tmp_path, TRELLIS_TEST_IMAGE=str(image))


def test_teams(sdk, server, tmp_path):
    run_tests(sdk, server, "teams", tmp_path)


def test_functions_and_graphql(sdk, server, tmp_path):
    run_tests(sdk, server, "functions", tmp_path)


def test_every_failure_is_a_trellis_error_with_the_servers_fields(sdk, server, tmp_path):
    run_tests(sdk, server, "errors", tmp_path)


def quick_start() -> tuple[str, str]:
    """The README's quick start: its shell block (the administrator's part) and its JavaScript block."""
    text = (CLIENT / "README.md").read_text()
    match = re.search(
        r"<!-- quick start -->\s*```sh\n(.*?)```\s*(?:.*?)```js\n(.*?)```\s*<!-- /quick start -->", text, re.DOTALL
    )
    assert match, "clients/js/README.md has no quick start block"
    return match.group(1), match.group(2)


@pytest.mark.skipif(shutil.which("curl") is None and not IN_CI, reason="curl is not installed")
def test_the_readme_quick_start_runs_as_written(sdk, server, tmp_path):
    shell, script = quick_start()
    env = node_env(server, TRELLIS_URL=server.url)
    admin = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", shell], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert admin.returncode == 0, admin.stdout + admin.stderr
    # Inside the package's folder, `import … from "trellis-client"` is the package itself (self-reference).
    (sdk.folder / "quick-start.mjs").write_text(script)
    result = subprocess.run(
        ["node", "quick-start.mjs"], cwd=sdk.folder, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("signed up as ") and lines[0].endswith("@example.com"), lines
    assert lines[1] == "open tasks: 2 (Try Trellis, Write the README)", lines
    assert lines[2].startswith("live: create Subscribe to changes"), lines
    assert re.fullmatch(r"uploaded notes\.txt \(\d+ bytes\): http://127\.0\.0\.1:\d+/storage/signed/\S+", lines[3]), (
        lines
    )
