"""Against real servers (eventlet, own processes): the HTTP helper, blocking, and limits shared via Redis."""

from __future__ import annotations

import os

import pytest
import requests

from trellis.testing.plugin import TEST_MASTER_KEY
from trellis_authentication.testing import create_user_over_http

pytestmark = pytest.mark.live

REDIS_URL = os.environ.get("TRELLIS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
ADMIN = {"masterkey": TEST_MASTER_KEY}


def redis_available() -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_timeout=2).ping())
    except redis.RedisError:
        return False


def test_two_workers_share_users_sessions_and_login_limits(live_server_factory):
    if not redis_available():
        pytest.skip(f"Redis at {REDIS_URL} is unreachable")
    first = live_server_factory(TRELLIS_REDIS_URL=REDIS_URL)
    second = live_server_factory(TRELLIS_REDIS_URL=REDIS_URL)

    account = create_user_over_http(first.url)
    me = requests.get(f"{second.url}/authentication/user", headers=account.headers, timeout=10)
    assert me.status_code == 200 and me.json()["_id"] == account.id
    renewed = requests.post(
        f"{second.url}/authentication/renew", json={"refreshToken": account.refresh_token}, timeout=10
    )
    assert renewed.status_code == 200
    reused = requests.post(
        f"{first.url}/authentication/renew", json={"refreshToken": account.refresh_token}, timeout=10
    )
    assert reused.status_code == 401  # rotation is seen by the other worker

    # Per-email limit counted in Redis: attempts on either worker add up.
    limit = requests.put(
        f"{first.url}/config/authentication",
        json={"rateLimits": {"loginPerEmail": "3/minute"}},
        headers=ADMIN,
        timeout=10,
    )
    assert limit.status_code == 200
    body = {"email": account.email, "password": "wrong-password"}
    statuses = [
        requests.post(f"{server.url}/authentication/local", json=body, timeout=10).status_code
        for server in (first, second, first, second)
    ]
    assert statuses == [401, 401, 401, 429]

    # Blocking on one worker is seen on the other at the next request.
    fresh = create_user_over_http(second.url)
    assert requests.put(f"{first.url}/authentication/users/{fresh.id}/block", headers=ADMIN, timeout=10).ok
    blocked = requests.get(f"{second.url}/authentication/user", headers=fresh.headers, timeout=10)
    assert blocked.status_code == 403
