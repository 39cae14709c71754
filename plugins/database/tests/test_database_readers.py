"""The document reads' autocommit connections (PostgreSQL): kept between requests, never leaking
autocommit into writes, and dropped together when the server kills them."""
from __future__ import annotations

import time

import psycopg2
import pytest

from trellis import create_app
from trellis.testing.plugin import TEST_MASTER_KEY, database_kind

pytestmark = pytest.mark.skipif(database_kind() != "postgresql", reason="readers exist on PostgreSQL only")
ADMIN = {"masterkey": TEST_MASTER_KEY}


@pytest.fixture()
def unpinned(app, app_config):  # `app` migrates the test database
    """An app whose sessions are not pinned to the test transaction: reads take readers, data is real."""
    app = create_app(app_config)
    client = app.test_client()
    created = client.post("/admin/database/schemas", headers=ADMIN, json={"name": "ReadMe", "fields": {"n": "Number"}})
    assert created.status_code == 201, created.get_json()
    try:
        yield app, client
    finally:
        client.delete(f"/admin/database/schemas/{created.get_json()['_id']}?deleteData=true", headers=ADMIN)
        app.extensions["trellis_database_readers"].close()
        app.extensions["trellis"].engine.dispose()


def _kill(app, pids: list[int]) -> int:
    """Terminate these PostgreSQL backends, as a server restart would."""
    url = app.extensions["trellis"].engine.url
    with psycopg2.connect(host=url.host, port=url.port, user=url.username, dbname=url.database) as conn:
        with conn.cursor() as cursor:
            cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM unnest(%s) AS pid", (pids,))
            return cursor.fetchone()[0]


def test_readers_are_reused_and_writes_never_run_in_autocommit(unpinned):
    app, client = unpinned
    readers = app.extensions["trellis_database_readers"]
    doc = client.post("/database/ReadMe", json={"n": 1}).get_json()
    for _ in range(5):
        assert client.get(f"/database/ReadMe/{doc['_id']}").get_json()["n"] == 1
        assert client.get("/database/ReadMe?n[$gte]=1").get_json()["count"] == 1
    assert len(readers._idle) == 1  # one request at a time: one reader, taken and given back
    reader = readers._idle[0]
    assert reader.pooled.dbapi_connection.autocommit
    # A failing batch is all or nothing: the write ran in a transaction, not on a reader.
    assert client.post("/database/ReadMe/many", json={"docs": [{"n": 2}, {"n": "two"}]}).status_code == 400
    assert client.get("/database/ReadMe").get_json()["count"] == 1
    assert readers._idle == [reader]


def test_killed_connections_cost_at_most_one_failed_read(unpinned):
    app, client = unpinned
    readers = app.extensions["trellis_database_readers"]
    doc = client.post("/database/ReadMe", json={"n": 1}).get_json()
    url = f"/database/ReadMe/{doc['_id']}"
    assert client.get(url).status_code == 200
    taken = [readers.acquire() for _ in range(3)]  # as under concurrent reads: three idle readers
    for reader in taken:
        readers.release(reader)
    stale = list(readers._idle)
    assert len(stale) == 3
    pooled = [record.dbapi_connection for record in list(app.extensions["trellis"].engine.pool._pool.queue)]
    pids = [reader.pooled.dbapi_connection.get_backend_pid() for reader in stale]
    pids += [connection.get_backend_pid() for connection in pooled if connection is not None]
    assert _kill(app, pids) == len(pids)  # this app's connections only: the rest of the suite goes on
    statuses = [client.get(url).status_code for _ in range(5)]
    # The first read finds its connection dead (500, as with any pooled connection and no pre-ping);
    # the idle readers are dropped with it and SQLAlchemy renews its pool, so no other request fails.
    assert statuses == [500, 200, 200, 200, 200], statuses
    assert not set(stale) & set(readers._idle)
    assert client.get("/database/ReadMe?n=1").get_json()["count"] == 1


def test_an_idle_reader_past_pool_recycle_is_not_used(unpinned):
    app, client = unpinned
    readers = app.extensions["trellis_database_readers"]
    doc = client.post("/database/ReadMe", json={"n": 1}).get_json()
    assert client.get(f"/database/ReadMe/{doc['_id']}").status_code == 200
    (old,) = readers._idle
    readers.recycle = old.age() + 0.2  # what pool_recycle would be, scaled down
    time.sleep(0.3)
    assert client.get(f"/database/ReadMe/{doc['_id']}").status_code == 200
    assert readers._idle and old not in readers._idle


def test_a_failed_read_in_a_transaction_keeps_its_error(client, admin_headers, db):
    """Without a reader (the session's transaction), get by id reports the database's own error, so the
    route's stale-table retry can recognise a table another worker dropped."""
    import sqlalchemy as sa
    from trellis_database import documents
    from trellis_database.registry import snapshot

    assert client.post("/admin/database/schemas", headers=admin_headers,
                       json={"name": "Gone", "fields": {"n": "Number"}}).status_code == 201
    schema = snapshot().document_schema("Gone")
    db.execute(sa.text(f'DROP TABLE "{schema.table.name}"'))
    with pytest.raises(sa.exc.DBAPIError, match="does not exist"):
        documents.get_json(schema, "0" * 32)
