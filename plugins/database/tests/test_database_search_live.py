"""Full-text search against running servers: live subscriptions with ``search`` (Socket.IO and SSE) get only
the events whose document the list would find, and on a committed database adding ``searchable`` to a
schema with documents builds its index (PostgreSQL: concurrently, after the change commits) and drops it
again when removed."""

from __future__ import annotations

import pytest
import requests
import sqlalchemy as sa

from .test_database_subscriptions import (  # noqa: F401  (watchers: a fixture)
    ADMIN,
    WAIT,
    Api,
    _sse_events,
    watchers,
)

pytestmark = pytest.mark.live

SEARCHABLE = {"title": {"type": "String", "searchable": True}, "body": {"type": "String", "searchable": True}}
ENGLISH = {"modelOptions": {"search": {"language": "english"}}}


@pytest.fixture(scope="module")
def server(module_live_server):
    return module_live_server


def test_socketio_subscription_with_search_gets_only_matching_events(server, watchers):
    api = Api(server.url)
    name = api.schema(SEARCHABLE, **ENGLISH)
    watcher = watchers(server.url, ADMIN)
    running = watcher.subscribe(schema=name, search="running")
    cheap = watcher.subscribe(schema=name, search="shoe", where={"body": {"$exists": True}})
    bad = watcher.call("subscribe", {"schema": name, "search": 5})
    assert bad["error"]["status"] == 400 and bad["error"]["name"] == "INVALID_ARGUMENTS"
    plain = api.schema({"title": "String"})
    refused = watcher.call("subscribe", {"schema": plain, "search": "x"})
    assert refused["error"]["status"] == 400 and "searchable" in refused["error"]["message"]

    runs = api.create(name, {"title": "She runs"})
    api.create(name, {"title": "He walks"})
    shoe = api.create(name, {"title": "red shoe", "body": "leather"})
    api.create(name, {"title": "blue shoe"})  # no body: the where leaves it out
    walked = api.patch(name, runs["_id"], {"title": "She walked"})  # leaves the search
    again = api.patch(name, shoe["_id"], {"body": "running shoe"})  # now in both
    api.delete(name, shoe["_id"])

    got = watcher.take(7)
    watcher.quiet()
    by_sub: dict[str, list[tuple[str, str]]] = {}
    for change in got:
        by_sub.setdefault(change["subscriptionId"], []).append((change["event"], change["document"]["_id"]))
    assert by_sub[running] == [
        ("create", runs["_id"]),
        ("leave", walked["_id"]),
        ("enter", again["_id"]),
        ("delete", shoe["_id"]),
    ]
    assert by_sub[cheap] == [("create", shoe["_id"]), ("update", again["_id"]), ("delete", shoe["_id"])]
    listed = requests.get(f"{server.url}/database/{name}", params={"search": "running"}, headers=ADMIN, timeout=WAIT)
    assert listed.json()["count"] == 0  # deleted: the list agrees with the last event


def test_server_sent_events_with_search(server):
    api = Api(server.url)
    name = api.schema(SEARCHABLE)
    url = f"{server.url}/database/{name}/changes"
    assert (
        requests.get(f"{server.url}/database/{api.schema({'t': 'String'})}/changes?search=x", timeout=WAIT).status_code
        == 400
    )
    with requests.get(url, params={"search": "solar pan"}, stream=True, timeout=WAIT) as response:
        assert response.status_code == 200
        lines = response.iter_lines(decode_unicode=True)
        api.create(name, {"title": "wind turbine"})
        api.create(name, {"title": "solar", "body": "roof"})
        panel = api.create(name, {"title": "Solar", "body": "Panels for the roof"})
        found, _ = _sse_events(lines, 1)
    assert [(event["event"], event["data"]["_id"]) for event in found] == [("create", panel["_id"])]


def test_searchable_added_to_committed_data_builds_the_index_and_removing_drops_it(server, app):
    api = Api(server.url)
    name = api.schema({"title": "String", "n": "Number"})
    docs = [{"title": f"item {n} {'gamma' if n % 3 == 0 else 'delta'}", "n": n} for n in range(300)]
    response = requests.post(f"{server.url}/database/{name}/many", json={"docs": docs}, headers=ADMIN, timeout=WAIT)
    assert response.status_code == 201, response.text
    schemas = f"{server.url}/admin/database/schemas/{name}"
    url = f"{server.url}/database/{name}"
    assert requests.get(url, params={"search": "gamma"}, headers=ADMIN, timeout=WAIT).status_code == 400
    changed = requests.put(
        schemas,
        json={"fields": {"title": {"type": "String", "searchable": True}, "n": "Number"}},
        headers=ADMIN,
        timeout=60,
    )
    assert changed.status_code == 200, changed.text
    table = f"dbdoc_{changed.json()['_id']}"
    assert requests.get(url, params={"search": "gamma", "limit": 1}, headers=ADMIN, timeout=WAIT).json()["count"] == 100
    engine = app.extensions["trellis"].engine
    with engine.connect() as connection:
        if connection.dialect.name == "postgresql":
            rows = connection.execute(
                sa.text(
                    "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                    "WHERE i.indrelid = to_regclass(:t) AND c.relname LIKE 'dbfts%'"
                ),
                {"t": table},
            ).all()
            assert len(rows) == 1 and rows[0][1] is True
        else:
            fts = f"dbfts_{changed.json()['_id']}"
            assert connection.execute(sa.text(f'SELECT count(*) FROM "{fts}"')).scalar() == 300
    response = requests.put(
        schemas, json={"modelOptions": {"search": {"language": "english"}}}, headers=ADMIN, timeout=60
    )
    assert response.status_code == 200
    with engine.connect() as connection:
        if connection.dialect.name == "postgresql":
            names = (
                connection.execute(
                    sa.text("SELECT indexname FROM pg_indexes WHERE tablename = :t AND indexname LIKE 'dbfts%'"),
                    {"t": table},
                )
                .scalars()
                .all()
            )
            assert len(names) == 1 and names[0] != rows[0][0]  # the new language's index only
    removed = requests.put(schemas, json={"fields": {"title": "String", "n": "Number"}}, headers=ADMIN, timeout=60)
    assert removed.status_code == 200
    assert requests.get(url, params={"search": "gamma"}, headers=ADMIN, timeout=WAIT).status_code == 400
    with engine.connect() as connection:
        if connection.dialect.name == "postgresql":
            left = connection.execute(
                sa.text("SELECT count(*) FROM pg_indexes WHERE tablename = :t AND indexname LIKE 'dbfts%'"),
                {"t": table},
            ).scalar()
        else:
            left = connection.execute(
                sa.text("SELECT count(*) FROM sqlite_master WHERE name LIKE :f"),
                {"f": f"dbfts_{changed.json()['_id']}%"},
            ).scalar()
        assert left == 0
