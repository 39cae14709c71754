"""List counts remembered in Redis: exact after every kind of write, shared by workers, and never a
reason for a list to fail (Redis down → the database counts)."""

from __future__ import annotations

import logging
import threading
import time
import uuid

import pytest
import requests
import sqlalchemy as sa

from trellis import create_app
from trellis import db as trellis_db
from trellis.testing.plugin import TEST_MASTER_KEY, statements_run

from .conftest import DatabaseApi

REDIS = "redis://127.0.0.1:6379/14"
ADMIN = {"masterkey": TEST_MASTER_KEY}


@pytest.fixture()
def cached_api(app_config, db, admin_headers):
    app = create_app({**app_config, "REDIS_URL": REDIS})
    with app.app_context():
        yield DatabaseApi(app.test_client(), admin_headers)


def _insert_behind_trellis(name: str, n: int) -> None:
    """A row written straight into the table: no Trellis write, so no count is dropped for it."""
    schema = trellis_db.session.execute(
        sa.text("SELECT storage FROM database_schemas WHERE name = :n"), {"n": name}
    ).scalar_one()
    table = (schema if isinstance(schema, dict) else __import__("json").loads(schema))["table"]
    trellis_db.session.execute(
        sa.text(
            f"INSERT INTO {table} (id, data, created_at, updated_at, version) "
            "VALUES (:id, :data, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 0)"
        ),
        {"id": f"direct{n:026d}", "data": f'{{"n": {n}}}'},
    )


def test_a_count_is_kept_until_a_write_to_the_schema_commits(cached_api):
    api = cached_api
    schema = api.create_schema("Counted", {"n": "Number", "label": "String"})
    api.many("Counted", [{"n": i} for i in range(30)])
    api.create_schema("Other", {"n": "Number"})

    def count() -> int:
        return api.list("Counted", "n[$lt]=25&limit=5")["count"]

    assert count() == 25
    _insert_behind_trellis("Counted", 3)
    assert count() == 25  # remembered: the row written behind Trellis's back is not counted yet
    assert api.list("Counted", "n[$lt]=24&limit=5")["count"] == 25  # another query is counted afresh
    api.post("Other", {"n": 1})
    assert count() == 25  # a write to another schema keeps this one's counts

    created = api.post("Counted", {"n": 1})
    assert count() == 27  # the write dropped the counts: both new rows are counted
    assert (
        api.client.patch(f"/database/Counted/{created['_id']}", json={"n": 100}, headers=api.admin).status_code == 200
    )
    assert count() == 26
    assert api.client.put(f"/database/Counted/{created['_id']}", json={"n": 2}, headers=api.admin).status_code == 200
    assert count() == 27
    assert api.client.delete(f"/database/Counted/{created['_id']}", headers=api.admin).status_code == 200
    assert count() == 26
    api.many("Counted", [{"n": 5}, {"n": 6}])
    assert count() == 28
    api.graphql("mutation { createCounted(data: {n: 7}) { _id } }")
    assert count() == 29

    endpoint = {
        "name": "dropSmall",
        "operation": "DELETE",
        "selectedSchema": "Counted",
        "query": {"AND": [{"schemaField": "n", "operation": "lt", "comparisonField": {"type": "Custom", "value": 3}}]},
    }
    assert api.client.post("/admin/database/customEndpoints", json=endpoint, headers=api.admin).status_code == 201
    assert api.client.delete("/database/function/dropSmall", headers=api.admin).status_code == 200
    assert count() == 26  # n = 0, 1 and 2 are gone
    _insert_behind_trellis("Counted", 4)
    assert count() == 26
    api.update_schema(schema["_id"], fields={"n": "Number"})  # drops `label` from the stored documents
    assert count() == 27


def test_a_failed_write_keeps_the_counts_right(cached_api):
    api = cached_api
    api.create_schema("Unique", {"code": {"type": "String", "unique": True}})
    api.many("Unique", [{"code": "a"}, {"code": "b"}])
    assert api.list("Unique", "limit=1")["count"] == 2
    api.many("Unique", [{"code": "c"}, {"code": "a"}], expect=409)  # all or nothing
    assert api.list("Unique", "limit=1")["count"] == 2


def test_lists_count_in_the_database_when_redis_is_down(app_config, db, admin_headers, caplog):
    from trellis_database import counts

    app = create_app({**app_config, "REDIS_URL": "redis://127.0.0.1:1/0"})
    with app.app_context(), caplog.at_level(logging.WARNING, logger=counts.__name__):
        api = DatabaseApi(app.test_client(), admin_headers)
        api.create_schema("Counted", {"n": "Number"})
        api.many("Counted", [{"n": i} for i in range(10)])
        assert api.list("Counted", "n[$lt]=8&limit=2")["count"] == 8
        _insert_behind_trellis("Counted", 1)
        assert api.list("Counted", "n[$lt]=8&limit=2")["count"] == 9  # nothing is remembered
    logged = [
        record.getMessage()
        for record in caplog.records
        if record.levelno >= logging.WARNING and record.name == counts.__name__
    ]  # the core's Redis client warns too
    assert len(logged) == 1, logged  # one a minute, not one per list
    assert "counting in the database" in logged[0]


@pytest.mark.live
def test_workers_share_counts_and_writes_racing_reads_leave_them_exact(live_server_factory):
    writer, reader = (live_server_factory(TRELLIS_REDIS_URL=REDIS) for _ in range(2))
    created = requests.post(
        f"{writer.url}/admin/database/schemas",
        headers=ADMIN,
        timeout=30,
        json={"name": "Raced", "fields": {"n": "Number"}},
    )
    assert created.status_code == 201, created.text
    try:
        assert (
            requests.post(
                f"{writer.url}/database/Raced/many", timeout=30, json={"docs": [{"n": i % 10} for i in range(100)]}
            ).status_code
            == 201
        )
        url = f"{reader.url}/database/Raced?n[$lt]=5&limit=1"
        assert requests.get(url, timeout=30).json()["count"] == 50
        assert requests.post(f"{writer.url}/database/Raced", json={"n": 0}, timeout=30).status_code == 201
        assert requests.get(url, timeout=30).json()["count"] == 51  # the other worker's write is seen at once

        # Writers on one worker, readers filling the cache on the other: a count computed before a
        # commit must never outlive that commit's bump.
        stop = threading.Event()
        failures: list[str] = []

        def write() -> None:
            with requests.Session() as http:
                for _ in range(40):
                    if http.post(f"{writer.url}/database/Raced", json={"n": 1}, timeout=30).status_code != 201:
                        failures.append("write")

        def read() -> None:
            with requests.Session() as http:
                while not stop.is_set():
                    if http.get(url, timeout=30).status_code != 200:
                        failures.append("read")

        readers = [threading.Thread(target=read) for _ in range(3)]
        writers = [threading.Thread(target=write) for _ in range(3)]
        for thread in readers + writers:
            thread.start()
        for thread in writers:
            thread.join()
        stop.set()
        for thread in readers:
            thread.join()
        assert not failures
        time.sleep(0.1)
        assert requests.get(url, timeout=30).json()["count"] == 51 + 120
        assert requests.get(f"{writer.url}/database/Raced?n[$lt]=5&limit=1", timeout=30).json()["count"] == 171
    finally:
        requests.delete(
            f"{writer.url}/admin/database/schemas/{created.json()['_id']}?deleteData=true", headers=ADMIN, timeout=30
        )


def test_a_count_lives_at_most_the_ttl_however_busy_its_table(cached_api):
    from trellis.shared_redis import redis_client
    from trellis_database import counts

    table = f"busy_{uuid.uuid4().hex}"
    counts.cache().count(table, ("first",), 0, lambda: 1)
    (counts_key,) = redis_client().keys(f"*{table}:0")
    time.sleep(1.1)
    counts.cache().count(table, ("second",), 0, lambda: 2)  # more counts in the same hash …
    assert redis_client().ttl(counts_key) < counts.TTL_SECONDS  # … do not push its expiry back


def test_count_none_leaves_the_count_out(dbapi):
    dbapi.create_schema("Paged", {"n": "Number", "count": "Number"})
    dbapi.many("Paged", [{"n": i, "count": i % 2} for i in range(30)])
    body = dbapi.list("Paged", "n[$lt]=25&limit=5&count=none")
    assert "count" not in body and len(body["documents"]) == 5
    assert "count" not in dbapi.list("Paged", "limit=2&select=n&count=none")  # the decoded path too
    assert dbapi.list("Paged", "n[$lt]=25&limit=5&count=exact")["count"] == 25
    assert dbapi.list("Paged", "limit=5&count[$eq]=1")["count"] == 15  # a field named count is still a filter
    error = dbapi.list("Paged", "count=5", expect=400)
    assert "count" in error["errors"]


def test_a_count_is_kept_per_change_number(cached_api):
    from trellis_database import counts

    table = f"numbered_{uuid.uuid4().hex}"
    assert counts.cache().count(table, ("q",), 7, lambda: 1) == 1
    assert counts.cache().count(table, ("q",), 7, lambda: 2) == 1  # kept for the same committed writes
    assert counts.cache().count(table, ("q",), 8, lambda: 3) == 3  # another number: counted afresh
    assert counts.cache().count(table, ("other",), 7, lambda: 4) == 4
    assert counts.cache().count(table, ("q",), None, lambda: 5) == 5  # unknown number: never kept
    assert counts.cache().count(table, ("q",), None, lambda: 6) == 6


def _change_number(name: str) -> int:
    from trellis import events
    from trellis_database import counts

    return trellis_db.session.execute(sa.select(events.change_number(counts.family(name)))).scalar_one()


def test_the_change_number_grows_with_every_write_of_its_schema_only(cached_api):
    api = cached_api
    api.create_schema("Numbered", {"n": "Number", "code": {"type": "String", "unique": True}})
    api.create_schema("Elsewhere", {"n": "Number"})
    start = _change_number("Numbered")
    created = api.post("Numbered", {"n": 1, "code": "a"})
    after_create = _change_number("Numbered")
    assert after_create > start
    api.post("Elsewhere", {"n": 1})
    assert _change_number("Numbered") == after_create  # another schema's write
    api.post("Numbered", {"n": 2, "code": "a"}, expect=409)
    assert _change_number("Numbered") == after_create  # a rolled-back write
    patched = api.client.patch(f"/database/Numbered/{created['_id']}", json={"n": 3}, headers=api.admin)
    assert patched.status_code == 200
    after_patch = _change_number("Numbered")
    assert after_patch > after_create
    assert api.client.delete(f"/database/Numbered/{created['_id']}", headers=api.admin).status_code == 200
    assert _change_number("Numbered") > after_patch


def test_writes_send_nothing_to_redis(cached_api):
    """The event a write records is its counts' invalidation: no Redis command per write."""
    from trellis.shared_redis import redis_client
    from trellis_database import counts

    api = cached_api
    api.create_schema("Quiet", {"n": "Number"})
    api.many("Quiet", [{"n": i} for i in range(30)])
    assert api.list("Quiet", "n[$lt]=25&limit=5")["count"] == 25
    redis = redis_client()
    before = sorted(redis.keys(f"{counts.cache().prefix}*"))
    created = api.post("Quiet", {"n": 1})
    api.client.patch(f"/database/Quiet/{created['_id']}", json={"n": 2}, headers=api.admin)
    assert sorted(redis.keys(f"{counts.cache().prefix}*")) == before
    assert api.list("Quiet", "n[$lt]=25&limit=5")["count"] == 26  # and the list is exact


def test_without_the_event_log_no_count_is_kept(app_config, db, admin_headers):
    app = create_app({**app_config, "REDIS_URL": REDIS, "EVENTS": "false"})
    with app.app_context():
        api = DatabaseApi(app.test_client(), admin_headers)
        api.create_schema("Unlogged", {"n": "Number"})
        api.many("Unlogged", [{"n": i} for i in range(10)])
        assert api.list("Unlogged", "n[$lt]=8&limit=2")["count"] == 8
        _insert_behind_trellis("Unlogged", 1)
        assert api.list("Unlogged", "n[$lt]=8&limit=2")["count"] == 9  # counted again: nothing kept


def test_a_process_answers_a_count_it_kept_from_memory_until_a_write(cached_api):
    """A count under a change number never changes: the process that read or kept it answers it again
    without asking Redis (here the Redis copy is gone, and no count runs), and a write's new number
    counts afresh."""
    from trellis.shared_redis import redis_client
    from trellis_database import counts

    api = cached_api
    api.create_schema("Recent", {"n": "Number"})
    api.many("Recent", [{"n": i} for i in range(30)])
    assert api.list("Recent", "n[$lt]=25&limit=5")["count"] == 25  # counted, kept in Redis and here
    redis = redis_client()
    redis.delete(*redis.keys(f"{counts.cache().prefix}*"))
    with statements_run() as seen:
        assert api.list("Recent", "n[$lt]=25&limit=5")["count"] == 25
    assert not [sql for sql in seen if "count(*)" in sql]
    api.post("Recent", {"n": 1})
    with statements_run() as seen:
        assert api.list("Recent", "n[$lt]=25&limit=5")["count"] == 26
    assert [sql for sql in seen if "count(*)" in sql]
