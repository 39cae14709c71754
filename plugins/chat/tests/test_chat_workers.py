"""Two server processes sharing events through Redis (``TRELLIS_REDIS_URL`` as the Socket.IO queue)."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from trellis.testing.plugin import TEST_MASTER_KEY, reachable_redis
from trellis_authentication.testing import create_user_over_http

pytestmark = pytest.mark.live

REDIS_URL = os.environ.get("TRELLIS_TEST_CHAT_REDIS_URL", "redis://127.0.0.1:6379/7")
ADMIN = {"masterkey": TEST_MASTER_KEY}


@pytest.fixture()
def redis_url() -> str:
    return reachable_redis(REDIS_URL)


def test_events_cross_workers(live_server_factory, redis_url, http, sockets):
    with ThreadPoolExecutor(2) as pool:  # the two start-ups overlap
        one, two = pool.map(lambda _: live_server_factory(TRELLIS_REDIS_URL=redis_url), range(2))
    api_one, api_two = http(one.url), http(two.url)
    alice, bob = create_user_over_http(one.url), create_user_over_http(one.url)
    room = api_one.create_room(alice, [bob.id])
    a, b = sockets(one.url, alice.access_token), sockets(two.url, bob.access_token)

    # A socket message on worker one reaches a socket on worker two, and a REST message the other way.
    ack = a.call("message", room, "across workers")
    assert b.next() == ack
    api_two.send(bob, room, "and back")
    assert a.texts_until("and back") == ["across workers", "and back"]
    assert b.next()["message"] == "and back"

    # Membership changed on worker one applies to bob's socket on worker two, in order with messages.
    dm = api_one.create_room(alice, [bob.id])
    api_one.send(alice, dm, "new room")
    assert b.next()["message"] == "new room"
    assert api_one.put(f"/chat/leave/{room}", bob.headers).status_code == 200
    api_one.send(alice, room, "bob has left")
    api_one.send(alice, dm, "marker")
    assert b.texts_until("marker") == ["marker"]

    # Blocking on worker one disconnects bob's socket on worker two.
    assert api_one.put(f"/authentication/users/{bob.id}/block", ADMIN).status_code == 200
    b.disconnected.get(timeout=10)
    assert not b.client.connected
    # The worker that held the socket forgets it: the registry does not grow with closed sockets.
    registry = redis.Redis.from_url(redis_url)
    deadline = time.monotonic() + 10
    while registry.smembers(f"trellis:connections:{bob.id}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert registry.smembers(f"trellis:connections:{bob.id}") == set()
    assert len(registry.smembers(f"trellis:connections:{alice.id}")) == 1
