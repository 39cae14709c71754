"""The Functions routes with Redis hung (SIGSTOP): calls (rate-limited through Redis), triggered writes and
the admin routes keep answering, without a 5xx."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
import redis

from trellis.testing.ports import free_port

from .conftest import Api, eventually

pytestmark = pytest.mark.live


@pytest.fixture()
def hung_redis(tmp_path):
    port = free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1",
         "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    eventually(lambda: _pings(port))
    yield process, f"redis://127.0.0.1:{port}/0"
    os.kill(process.pid, signal.SIGCONT)
    process.kill()
    process.wait(5)


def _pings(port: int) -> bool:
    try:
        return bool(redis.Redis(port=port, socket_timeout=0.5).ping())
    except redis.RedisError:
        return False


def test_functions_answer_with_redis_hung(start, folder, hung_redis):
    process, url = hung_redis
    folder.write(
        "calls.py",
        """
        from trellis_functions import after_create, before_create, function

        @function("hello", auth="anyone")
        def hello(ctx, params):
            return "hi"

        @before_create("*")
        def stamp(ctx, doc):
            doc["title"] = doc["title"].upper()

        @after_create("*")
        def seen(ctx, doc):
            ctx.log("seen " + doc["title"])
        """,
    )
    api = Api(start(TRELLIS_REDIS_URL=url, TRELLIS_RATELIMIT_ENABLED="true").url)
    name = api.schema({"title": "String"})
    os.kill(process.pid, signal.SIGSTOP)
    began = time.monotonic()
    assert api.call("POST", "/functions/hello", 200, headers={}).json() == {"result": "hi"}
    assert api.call("POST", "/functions/nope", 404, headers={}).json()["name"] == "NOT_FOUND"
    assert api.call("POST", f"/database/{name}", 201, json={"title": "a"}).json()["title"] == "A"
    assert eventually(lambda: api.log(function="seen"))[0]["message"] == "seen A"
    assert api.call("GET", "/admin/functions", 200).json()["triggers"]
    assert time.monotonic() - began < 30
