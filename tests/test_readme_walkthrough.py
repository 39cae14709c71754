"""The README's curl walk-through, run as written against a live server: sign in, create a schema, create
and list documents with an operator (curl -g), GraphQL over GET, sign up, upload and download a file,
open a socket."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from trellis.testing.plugin import TEST_ADMIN, TEST_MASTER_KEY

README = Path(__file__).resolve().parents[1] / "README.md"


def walkthrough() -> str:
    match = re.search(r"<!-- walkthrough -->\s*```sh\n(.*?)```\s*<!-- /walkthrough -->", README.read_text(), re.DOTALL)
    assert match, "README.md has no walk-through block"
    return match.group(1)


@pytest.mark.live
@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_readme_walkthrough_runs(live_server, tmp_path):
    env = {**os.environ, "URL": live_server.url, "KEY": TEST_MASTER_KEY, "ADMIN_PASSWORD": TEST_ADMIN[1]}
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", walkthrough()],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    schema = json.loads(lines[0])
    assert schema["name"] == "Product" and "price" in schema["fields"]
    listed = json.loads(lines[1])
    assert [(d["title"], d["price"]) for d in listed["documents"]] == [("Pen", 2), ("Lamp", 9.5)]
    assert listed["count"] == 2
    assert json.loads(lines[2]) == {"data": {"Product": [{"title": "Pen"}, {"title": "Lamp"}]}}
    assert lines[3] == "hello from curl"
    assert lines[4] == "OK"  # the namespace connect packet was accepted
    assert lines[5].startswith('40/chat/,{"sid"'), lines[5]
