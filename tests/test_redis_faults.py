"""Redis faults with a real redis-server child on its own port (the shared one is never touched):
hung (SIGSTOP) and down (killed). Sign-in, form submission and Database writes and lists keep
answering, quickly: the shared client's timeouts and circuit breaker, and the rate limiter's fall-back
to memory. The shared Redis client is used by everyone, so these faults are tested once, here.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator

import pytest
import redis

from trellis import create_app
from trellis.testing.plugin import free_port

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")

# Far above what a fast-failing Redis costs (milliseconds, one 0.5 s probe per 5 s) and far below what a hung one cost
# before (2 s socket timeout times redis-py's three retries per command): a functional bound, not a benchmark.
HUNG_BUDGET_SECONDS = 6.0


class RedisChild:
    def __init__(self, tmp_path) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--bind",
                "127.0.0.1",
                "--dir",
                str(tmp_path),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.url = f"redis://127.0.0.1:{self.port}/0"
        probe = redis.Redis(port=self.port, socket_timeout=1)
        deadline = time.monotonic() + 10
        while True:
            try:
                probe.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        probe.close()

    def hang(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def kill(self) -> None:
        self.resume()
        self.process.kill()
        self.process.wait(5)


@pytest.fixture()
def redis_child(tmp_path) -> Iterator[RedisChild]:
    child = RedisChild(tmp_path)
    try:
        yield child
    finally:
        if child.process.poll() is None:
            child.kill()


@pytest.fixture()
def redis_app(app, app_config, redis_child):
    """A second app (another worker) on the test database, with Redis: rate limits, counts, queue."""
    application = create_app({**app_config, "REDIS_URL": redis_child.url})
    yield application
    application.extensions["trellis_redis"].connection_pool.disconnect()


@pytest.fixture()
def redis_client_app(redis_app, db):
    return redis_app.test_client()


def _timed(call):
    started = time.perf_counter()
    response = call()
    return response, time.perf_counter() - started


def _exercise(client, admin_headers, form_id: str, tag: str) -> dict[str, float]:
    """Sign in, submit the form, write and list documents; every answer is the normal one."""
    email = f"{tag}-{time.monotonic_ns()}@example.com"
    worst: dict[str, float] = {}
    registered, worst["register"] = _timed(
        lambda: client.post("/authentication/local/new", json={"email": email, "password": "long-enough-1"})
    )
    assert registered.status_code == 201, registered.get_json()
    signed_in, worst["sign-in"] = _timed(
        lambda: client.post("/authentication/local", json={"email": email, "password": "long-enough-1"})
    )
    assert signed_in.status_code == 200, signed_in.get_json()
    submitted, worst["form"] = _timed(lambda: client.post(f"/forms/submit/{form_id}", json={"message": tag}))
    assert submitted.status_code == 201, submitted.get_json()
    writes, lists = [], []
    for number in range(10):
        written, seconds = _timed(
            lambda: client.post("/database/Faulty", json={"title": f"{tag}-{number}"}, headers=admin_headers)
        )
        assert written.status_code == 201, written.get_json()
        writes.append(seconds)
        listed, seconds = _timed(lambda: client.get("/database/Faulty?limit=5", headers=admin_headers))
        assert listed.status_code == 200, listed.get_json()
        lists.append(seconds)
    worst["write (max of 10)"], worst["list (max of 10)"] = max(writes), max(lists)
    worst["write (median)"], worst["list (median)"] = sorted(writes)[5], sorted(lists)[5]
    return worst


def _setup(client, admin_headers) -> str:
    created = client.post(
        "/admin/database/schemas", headers=admin_headers, json={"name": "Faulty", "fields": {"title": "String"}}
    )
    assert created.status_code == 201, created.get_json()
    form = client.post(
        "/admin/forms", headers=admin_headers, json={"name": "faulty", "fields": [{"name": "message", "type": "text"}]}
    )
    assert form.status_code == 201, form.get_json()
    return form.get_json()["_id"]


def test_hung_and_down_redis_cost_milliseconds(redis_client_app, redis_child, admin_headers, caplog):
    client = redis_client_app
    form_id = _setup(client, admin_headers)
    healthy = _exercise(client, admin_headers, form_id, "healthy")
    assert redis.Redis.from_url(redis_child.url).keys("*"), "the app did not use Redis while it was up"

    redis_child.hang()
    try:
        with caplog.at_level(logging.WARNING):
            started = time.perf_counter()
            hung = _exercise(client, admin_headers, form_id, "hung")
            hung_total = time.perf_counter() - started
        health = client.get("/health")
    finally:
        redis_child.resume()
    assert hung_total < HUNG_BUDGET_SECONDS, hung
    assert health.status_code == 503 and health.get_json()["redis"] == "unavailable"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "redis" in r.getMessage().lower()]
    per_logger = Counter(r.name for r in warnings)
    # Each part that uses Redis warns once a minute, not once per request.
    assert warnings and max(per_logger.values()) == 1, [r.getMessage() for r in warnings]

    redis_child.kill()
    started = time.perf_counter()
    down = _exercise(client, admin_headers, form_id, "down")
    down_total = time.perf_counter() - started
    assert down_total < HUNG_BUDGET_SECONDS, down
    print(f"\nlatency (s) healthy {healthy}\nhung {hung} total {hung_total:.3f}\ndown {down} total {down_total:.3f}")


def test_rate_limits_still_apply_in_memory_while_redis_is_down(redis_client_app, redis_child, admin_headers):
    client = redis_client_app
    form_id = _setup(client, admin_headers)
    changed = client.put("/config/forms", json={"rateLimit": "3/minute"}, headers=admin_headers)
    assert changed.status_code == 200, changed.get_json()
    redis_child.kill()
    statuses = [client.post(f"/forms/submit/{form_id}", json={"message": "x"}).status_code for _ in range(5)]
    assert statuses == [201, 201, 201, 429, 429]


def test_the_circuit_closes_again_when_redis_is_back(redis_app, redis_child):
    from trellis.shared_redis import redis_client

    client = redis_client(redis_app)
    assert client.ping()
    redis_child.hang()
    try:
        with pytest.raises(redis.TimeoutError):
            client.ping()
        started = time.perf_counter()
        with pytest.raises(redis.ConnectionError):
            client.ping()  # the breaker answers without the network
        assert time.perf_counter() - started < 0.1
    finally:
        redis_child.resume()
    redis_app.extensions["trellis_redis_breaker"].open_until = 0.0  # skip the wait of an open circuit
    assert client.ping()


def test_project_routes_answer_with_redis_hung(redis_client_app, redis_child, admin_headers):
    """Export, plan and apply with Redis stopped: the apply's commit cannot publish its change token, and still
    answers at once, with the project applied."""
    client = redis_client_app
    project = {
        "version": 1,
        "modules": {
            "database": {"schemas": {"Promoted": {"fields": {"title": {"type": "String", "required": True}}}}},
            "email": {"config": {"from": "ops@example.com"}},
        },
    }
    assert client.get("/admin/project", headers=admin_headers).status_code == 200  # Redis in use before
    redis_child.hang()
    try:
        exported, export_seconds = _timed(lambda: client.get("/admin/project", headers=admin_headers))
        planned = client.post("/admin/project/plan", json={"project": project}, headers=admin_headers)
        applied, apply_seconds = _timed(
            lambda: client.post("/admin/project/apply", json={"project": project}, headers=admin_headers)
        )
    finally:
        redis_child.resume()
    assert exported.status_code == 200 and export_seconds < HUNG_BUDGET_SECONDS
    assert planned.status_code == 200 and planned.get_json()["count"] == 2, planned.get_json()
    assert applied.status_code == 200 and applied.get_json() == planned.get_json(), applied.get_json()
    assert apply_seconds < HUNG_BUDGET_SECONDS
    again = client.post("/admin/project/plan", json={"project": project}, headers=admin_headers)
    assert again.get_json() == {"changes": [], "count": 0}
