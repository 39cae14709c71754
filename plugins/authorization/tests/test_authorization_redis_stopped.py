"""Decisions with Redis stopped (SIGSTOP, a real redis-server of the test's own): the database is the source
of truth, so lists, gets, sharing, checks and creates under access answer exactly, never a 500."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

import pytest
import requests

from trellis.testing.plugin import TEST_MASTER_KEY
from trellis.testing.ports import free_port
from trellis_authentication.testing import create_user_over_http

pytestmark = pytest.mark.live
ADMIN = {"masterkey": TEST_MASTER_KEY}


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
def test_access_decisions_stay_exact_with_redis_stopped(live_server_factory):
    port = free_port()
    redis = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.5)
        server = live_server_factory(TRELLIS_REDIS_URL=f"redis://127.0.0.1:{port}/0")
        options = {"conduit": {"authorization": {"enabled": True}}}
        body = {"name": "Memo", "fields": {"text": "String"}, "modelOptions": options}
        assert requests.post(f"{server.url}/admin/database/schemas", json=body, headers=ADMIN, timeout=30).ok
        alice, bob = create_user_over_http(server.url), create_user_over_http(server.url)
        memo = requests.post(f"{server.url}/database/Memo", json={"text": "m"}, headers=alice.headers, timeout=30)
        memo_url = f"{server.url}/database/Memo/{memo.json()['_id']}"
        os.kill(redis.pid, signal.SIGSTOP)
        calls = [
            ("GET", f"{server.url}/database/Memo", alice, {}),
            ("GET", memo_url, bob, {}),
            ("POST", f"{memo_url}/grants", alice, {"json": {"subject": f"User:{bob.id}", "relation": "reader"}}),
            ("GET", memo_url, bob, {}),
            ("POST", f"{server.url}/database/Memo", bob, {"json": {"text": "b"}}),
        ]
        answers = [
            requests.request(m, url, headers=who.headers, timeout=60, **kw).status_code for m, url, who, kw in calls
        ]
        assert answers == [200, 404, 201, 200, 201]
        check = {"action": "read", "resource": f"Memo:{memo.json()['_id']}"}
        allowed = requests.get(f"{server.url}/authorization/check", params=check, headers=bob.headers, timeout=60)
        assert allowed.status_code == 200 and allowed.json() == {"allowed": True}
    finally:
        os.kill(redis.pid, signal.SIGCONT)
        redis.terminate()
        redis.wait(timeout=10)
