"""A first run as ``make run`` does it (``flask trellis init`` then ``python wsgi.py``) is quiet: the
generated secrets, the first admin with a reset-password hint that names the admin, the address; no
warnings (eventlet's deprecation notice is filtered at the entry point)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from trellis.testing.plugin import free_port

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.live
@pytest.mark.long
def test_first_run_is_quiet_and_the_hint_names_the_admin(tmp_path):
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("TRELLIS_")}
    env.update(
        TRELLIS_INSTANCE_PATH=str(tmp_path / "instance"),
        TRELLIS_ADMIN_USERNAME="owner",
        TRELLIS_PASSWORD_PROFILE="test",
        PORT=str(port),
        PYTHONWARNINGS="default",
    )
    init = subprocess.run(
        [sys.executable, "-m", "flask", "--app", "wsgi", "trellis", "init"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert init.returncode == 0, init.stdout + init.stderr
    assert "reset-password owner" in init.stdout
    assert "created the first administrator 'owner'" in init.stdout

    log = tmp_path / "server.log"
    with open(log, "w") as out:
        server = subprocess.Popen([sys.executable, "wsgi.py"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and server.poll() is None:
                try:
                    if requests.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                        break
                except requests.RequestException:
                    time.sleep(0.2)
            assert requests.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200, log.read_text()
        finally:
            server.terminate()
            server.wait(10)
    output = (init.stdout + init.stderr + log.read_text()).lower()
    assert "warning" not in output and "deprecat" not in output, output
    assert len(output.strip().splitlines()) <= 8, output
    assert f"trellis serving on http://127.0.0.1:{port}" in output
