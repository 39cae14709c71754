"""Per-process caches follow the shared generations on the next request (``trellis.cache``).

Two apps on one database stand for two worker processes, each with its own cache; the Redis change
token is real (the shared Redis, under a key of this test database only).
"""

from __future__ import annotations

import os
import time

import pytest
import redis
from sqlalchemy import update

from trellis import create_app
from trellis.models import ModuleConfig
from trellis.testing.plugin import free_port, reachable_redis

REDIS_URL = os.environ.get("TRELLIS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture()
def redis_url() -> str:
    return reachable_redis(REDIS_URL)


def _worker(app_config, greeter_app, **settings):
    return create_app({**app_config, **settings}, modules=[greeter_app.extensions["trellis"].modules[0]])


def test_with_redis_the_table_is_reread_only_when_the_token_moves(
    app_config, greeter_app, admin_headers, db, redis_url
):
    writer = _worker(app_config, greeter_app, REDIS_URL=redis_url).test_client()
    reader = _worker(app_config, greeter_app, REDIS_URL=redis_url).test_client()
    assert reader.get("/greeter/hello").get_json() == {"message": "hello"}  # warms the reader's cache

    # A change behind Trellis's back (no generation bump, no token): the reader's copy is really cached.
    assert writer.put("/config/greeter", json={"greeting": "hi"}, headers=admin_headers).status_code == 200
    assert reader.get("/greeter/hello").get_json() == {"message": "hi"}
    db.execute(update(ModuleConfig).where(ModuleConfig.module == "greeter").values(data={"greeting": "sneaky"}))
    db.commit()
    assert reader.get("/greeter/hello").get_json() == {"message": "hi"}

    # An acknowledged change is in force on the reader's very next request.
    assert writer.put("/config/greeter", json={"greeting": "salut"}, headers=admin_headers).status_code == 200
    assert reader.get("/greeter/hello").get_json() == {"message": "salut"}
    assert reader.get("/config/greeter", headers=admin_headers).get_json()["greeting"] == "salut"


def test_one_session_committing_several_changes_follows_each(app_config, greeter_app, admin_headers, db, redis_url):
    """An app context serving several requests keeps one session: every commit of it that bumped a
    generation moves this process's caches (a once-listener per bump fired for the first one only)."""
    app = _worker(app_config, greeter_app, REDIS_URL=redis_url)
    with app.app_context():
        client = app.test_client()
        for greeting in ("one", "two", "three"):
            assert client.put("/config/greeter", json={"greeting": greeting}, headers=admin_headers).status_code == 200
            assert client.get("/greeter/hello").get_json() == {"message": greeting}


def test_a_bump_in_a_savepoint_is_published_by_the_outer_commit(app_config, greeter_app, db, redis_url):
    """Savepoints release and roll back inside the transaction: the new token goes out once, when the
    transaction that holds the bump commits (SQLAlchemy signals after_commit/after_rollback for both)."""
    from trellis import db as trellis_db
    from trellis.cache import token_key

    app = _worker(app_config, greeter_app, REDIS_URL=redis_url)
    client = redis.Redis.from_url(redis_url)
    with app.app_context():
        state = app.extensions["trellis"]
        key = token_key(state.engine.url.render_as_string(hide_password=True))
        state.generations.current("savepoint-test")  # the process has read a token
        before = client.get(key)
        with trellis_db.session.begin_nested():
            state.generations.bump("savepoint-test")
        trellis_db.session.begin_nested().rollback()  # another savepoint, rolled back
        assert client.get(key) == before  # not published while the transaction is open
        trellis_db.session.commit()
        assert client.get(key) != before


def test_without_redis_every_request_reads_the_generations(app_config, greeter_app, admin_headers, db):
    """Redis configured but unreachable: each request reads the table instead, still exact."""
    down = f"redis://127.0.0.1:{free_port()}/0"
    writer = _worker(app_config, greeter_app, REDIS_URL=down).test_client()
    reader = _worker(app_config, greeter_app, REDIS_URL=down).test_client()
    assert reader.get("/greeter/hello").get_json() == {"message": "hello"}
    for greeting in ("one", "two", "three"):
        assert writer.put("/config/greeter", json={"greeting": greeting}, headers=admin_headers).status_code == 200
        assert reader.get("/greeter/hello").get_json() == {"message": greeting}


def test_a_lost_token_is_agreed_again(app_config, greeter_app, admin_headers, db, redis_url):
    """Redis restarted empty (or evicted the key): processes agree on a new token and re-read."""
    writer_app = _worker(app_config, greeter_app, REDIS_URL=redis_url)
    reader = _worker(app_config, greeter_app, REDIS_URL=redis_url).test_client()
    writer = writer_app.test_client()
    assert reader.get("/greeter/hello").get_json() == {"message": "hello"}
    assert writer.put("/config/greeter", json={"greeting": "hey"}, headers=admin_headers).status_code == 200
    key = writer_app.extensions["trellis"].generations._key
    redis.Redis.from_url(redis_url).delete(key)
    assert reader.get("/greeter/hello").get_json() == {"message": "hey"}
    time.sleep(writer_app.config["CACHE_LEASE_SECONDS"] * 2)  # past the lease: the next read agrees a token
    assert reader.get("/greeter/hello").get_json() == {"message": "hey"}
    assert redis.Redis.from_url(redis_url).get(key) is not None


def test_a_process_declared_alone_follows_only_its_own_writes(app_config, greeter_app, admin_headers, db, redis_url):
    """``TRELLIS_CACHE_SHARED=false`` (one process) skips the per-request check: what the bench prices."""
    alone_app = _worker(app_config, greeter_app, REDIS_URL=redis_url, CACHE_SHARED=False)
    alone = alone_app.test_client()
    other = _worker(app_config, greeter_app, REDIS_URL=redis_url).test_client()
    assert alone.get("/greeter/hello").get_json() == {"message": "hello"}
    assert other.put("/config/greeter", json={"greeting": "elsewhere"}, headers=admin_headers).status_code == 200
    assert alone.get("/greeter/hello").get_json() == {"message": "hello"}
    assert alone.put("/config/greeter", json={"repeat": 2}, headers=admin_headers).status_code == 200
    assert alone.get("/greeter/hello").get_json() == {"message": "elsewhere elsewhere"}


def test_cache_shared_must_be_a_boolean(app_config):
    from trellis.settings import SettingsError

    with pytest.raises(SettingsError, match="TRELLIS_CACHE_SHARED"):
        create_app({**app_config, "CACHE_SHARED": "sometimes"})


def test_the_token_reader_speaks_to_redis_with_the_clients_settings(tmp_path):
    """Password, database number, nil and values, refusals: on a redis-server child of its own."""
    import shutil
    import subprocess
    import time

    from trellis.server.token_reader import TokenReader

    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--requirepass",
            "s3cret",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis.from_url(f"redis://:s3cret@127.0.0.1:{port}/5", socket_timeout=2)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        reader = TokenReader(client)
        assert reader.get("token") is None
        client.set("token", b"x" * 5000)  # longer than one read
        assert reader.get("token") == b"x" * 5000
        assert reader.get("token") == b"x" * 5000  # on the connection kept idle
        assert redis.Redis(port=port, password="s3cret", db=0).get("token") is None  # it selected database 5
        with pytest.raises(OSError):
            TokenReader(redis.Redis.from_url(f"redis://:wrong@127.0.0.1:{port}/5")).get("token")
        process.terminate()
        process.wait(10)
        with pytest.raises(OSError):
            reader.get("token")
        reader.close()
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(10)


@pytest.mark.parametrize("lease", [0.0, 0.3])
def test_every_request_after_an_acknowledged_change_sees_it(
    app_config, greeter_app, admin_headers, db, redis_url, lease
):
    """With or without leases: a reader that keeps serving never answers from before the change."""
    writer = _worker(app_config, greeter_app, REDIS_URL=redis_url, CACHE_LEASE_SECONDS=lease).test_client()
    reader = _worker(app_config, greeter_app, REDIS_URL=redis_url, CACHE_LEASE_SECONDS=lease).test_client()
    for number in range(4):
        assert reader.get("/greeter/hello").status_code == 200  # holds a fresh lease when there is one
        started = time.monotonic()
        put = writer.put("/config/greeter", json={"greeting": f"g{number}"}, headers=admin_headers)
        assert put.status_code == 200
        assert time.monotonic() - started >= lease  # the writer waited out every lease taken before
        assert reader.get("/greeter/hello").get_json() == {"message": f"g{number}"}


def test_an_answer_read_while_its_generation_moved_is_never_kept_under_the_new_one(app_config, greeter_app, redis_url):
    """``Remembered``: a request reads an answer while a change commits and another request already
    follows the new generation; what the first one read must not be served under the new generation."""
    from trellis import db
    from trellis.cache import Remembered

    remembered = Remembered(f"test-remembered-{time.monotonic_ns()}")

    def read_while_it_changes() -> str:
        remembered.bump()
        db.session.commit()  # the change commits while this answer is being read
        assert remembered.get("other", lambda: "new") == "new"  # another request, already on the new generation
        return "stale"

    app = _worker(app_config, greeter_app, REDIS_URL=redis_url)
    with app.app_context():
        assert remembered.get("key", read_while_it_changes) == "stale"  # answered, as read
        assert remembered.get("key", lambda: "fresh") == "fresh"
        assert remembered.get("key", lambda: "read again") == "fresh"  # kept now
        assert remembered.get("none", lambda: None) is None
        assert remembered.get("none", lambda: "an answer") == "an answer"  # None is never kept
