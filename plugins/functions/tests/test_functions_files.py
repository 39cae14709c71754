"""The functions folder: files imported in name order, a broken file reported with its line while the others
work, a file that never finishes importing time-boxed, changes taken within 2 s on every process without a
restart, and a production start stopped by a broken file, naming it."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from .conftest import Api, eventually

pytestmark = pytest.mark.live

GREETING = """
    from trellis_functions import function

    @function("greet", auth="anyone")
    def greet(ctx, params):
        return "{word}"
"""


def _greeting(api: Api) -> str | None:
    response = api.call("POST", "/functions/greet", headers={})
    return response.json()["result"] if response.status_code == 200 else None


def test_a_broken_file_is_reported_with_its_line_and_the_others_work(start, folder):
    folder.write("a_syntax.py", "x = 1\ndef broken(:\n")
    folder.write("b_raises.py", "import json\n\nraise RuntimeError('no config')\n")
    folder.write("c_greet.py", GREETING.format(word="hello"))
    folder.write("d_uses_sibling.py", "from c_greet import greet\nfrom helpers_missing import nothing\n")
    api = Api(start().url)
    files = {f["name"]: f for f in api.call("GET", "/admin/functions", 200).json()["files"]}
    assert files["a_syntax.py"]["loaded"] is False and files["a_syntax.py"]["line"] == 2
    assert files["a_syntax.py"]["error"].startswith("SyntaxError")
    assert files["b_raises.py"] == {
        **files["b_raises.py"],
        "loaded": False,
        "line": 3,
        "error": "RuntimeError: no config",
    }
    assert files["c_greet.py"]["loaded"] is True and "error" not in files["c_greet.py"]
    assert files["d_uses_sibling.py"]["loaded"] is False and "helpers_missing" in files["d_uses_sibling.py"]["error"]
    assert _greeting(api) == "hello"


def test_a_file_that_never_finishes_importing_is_time_boxed(start, folder):
    folder.write("a_loops.py", "while True:\n    pass\n")
    folder.write("b_greet.py", GREETING.format(word="still here"))
    began = time.monotonic()
    api = Api(start(TRELLIS_FUNCTIONS_TIME_LIMIT_SECONDS="1").url)
    assert time.monotonic() - began < 60
    files = {f["name"]: f for f in api.call("GET", "/admin/functions", 200).json()["files"]}
    assert (
        files["a_loops.py"]["loaded"] is False and "did not finish importing within 1 s" in files["a_loops.py"]["error"]
    )
    assert _greeting(api) == "still here"


def test_changes_take_effect_on_every_process_without_a_restart(start, folder):
    folder.write("greet.py", GREETING.format(word="one"))
    servers = [start(), start()]
    apis = [Api(server.url) for server in servers]
    assert [_greeting(api) for api in apis] == ["one", "one"]
    folder.write("greet.py", GREETING.format(word="two"))
    changed = time.monotonic()
    for api in apis:
        eventually(lambda api=api: _greeting(api) == "two", seconds=2.5)
    assert time.monotonic() - changed < 2.5
    folder.write("broken.py", "raise ValueError('oops')\n")  # added, broken: the others keep working
    for api in apis:
        eventually(lambda api=api: len(api.call("GET", "/admin/functions", 200).json()["files"]) == 2, seconds=2.5)
        assert _greeting(api) == "two"
    folder.remove("greet.py")
    for api in apis:
        eventually(lambda api=api: _greeting(api) is None, seconds=2.5)
        assert api.call("POST", "/functions/greet", 404, headers={}).json()["name"] == "NOT_FOUND"


def test_a_production_start_stops_at_a_broken_file_naming_it(folder, app_config, tmp_path):
    folder.write("fine.py", GREETING.format(word="fine"))
    folder.write("broken.py", "\n\nraise ValueError('bad')\n")
    env = {
        **os.environ,
        "TRELLIS_ENV": "production",
        "TRELLIS_DATABASE_URL": app_config["DATABASE_URL"],
        "TRELLIS_MASTER_KEY": app_config["MASTER_KEY"],
        "TRELLIS_SECRET_KEY": app_config["SECRET_KEY"],
        "TRELLIS_INSTANCE_PATH": str(tmp_path / "instance"),
        "TRELLIS_FUNCTIONS_PATH": str(folder.path),
    }
    code = "from trellis import create_app; create_app()"
    ended = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert ended.returncode != 0
    assert f"{folder.path / 'broken.py'}, line 3" in ended.stderr and "ValueError: bad" in ended.stderr
    assert "Traceback" in ended.stderr or "FunctionsStartError" in ended.stderr
