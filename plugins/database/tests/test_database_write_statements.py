"""Single-document writes as they run in production (no test transaction around them): on PostgreSQL one
statement on an autocommit connection (one round trip, no BEGIN/COMMIT travels), on both databases all or
nothing (a refused write leaves no document, no event, no grant, and does not move the change number),
and the change number grows with every committed write.

These tests commit for real, each in schemas of its own (unique names), through ``app.test_client()``
without the ``db`` fixture: the app reads and writes through its production connections."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import sqlalchemy as sa

from trellis import events
from trellis.testing.pg_proxy import PostgresProxy, proxied_app
from trellis.testing.plugin import TEST_MASTER_KEY, database_kind, statements_run, wipe_data
from trellis_authentication.testing import UserAccount, create_user_with_client

ADMIN = {"masterkey": TEST_MASTER_KEY}
ACCESS = {"conduit": {"authorization": {"enabled": True}}}


def _schema(client: Any, fields: dict[str, Any], access: bool = False) -> str:
    name = "W" + uuid.uuid4().hex[:10]
    body: dict[str, Any] = {"name": name, "fields": fields}
    if access:
        body["modelOptions"] = ACCESS
    response = client.post("/admin/database/schemas", json=body, headers=ADMIN)
    assert response.status_code == 201, response.get_json()
    return name


def _state(app: Any, schema: str) -> dict[str, int]:
    """What a write leaves behind: the schema's documents, its events, its tuples, its change number."""
    family = f"database.{schema}"
    with app.app_context(), app.extensions["trellis"].engine.connect() as connection:
        number = connection.execute(sa.select(events.change_number(family))).scalar_one()
        recorded = events.recorded()  # numbered or still pending
        logged = connection.execute(
            sa.select(sa.func.count()).select_from(recorded).where(recorded.c.family == family)
        ).scalar_one()
        granted = connection.execute(
            sa.text("SELECT count(*) FROM authz_relations WHERE resource_type = :name"), {"name": schema}
        ).scalar_one()
    documents = app.test_client().get(f"/database/{schema}?limit=1", headers=ADMIN).get_json()["count"]
    return {"documents": documents, "events": logged, "grants": granted, "change": number}


@pytest.fixture()
def client(app) -> Iterator[Any]:
    """The app's test client with no test transaction: every write commits (and is wiped afterwards,
    so the tests that count every resource or tuple of the database do not see them)."""
    yield app.test_client()
    wipe_data(app)


@pytest.fixture()
def user(client) -> UserAccount:
    return create_user_with_client(client)


def test_a_refused_write_leaves_no_document_event_or_grant(app, client, user):
    target = _schema(client, {"label": "String"}, access=True)
    schema = _schema(
        client,
        {"code": {"type": "String", "unique": True}, "other": {"type": "Relation", "model": target}},
        access=True,
    )
    first = client.post(f"/database/{schema}", json={"code": "a"}, headers=user.headers)
    assert first.status_code == 201, first.get_json()
    before = _state(app, schema)
    assert before == {"documents": 1, "events": 1, "grants": 1, "change": before["change"]}

    taken = client.post(f"/database/{schema}", json={"code": "a"}, headers=user.headers)
    assert taken.status_code == 409 and taken.get_json()["errors"] == {"code": ["Already taken"]}
    missing = client.post(f"/database/{schema}", json={"code": "b", "other": "nope"}, headers=user.headers)
    assert missing.status_code == 400 and "other" in missing.get_json()["errors"]
    second = client.post(f"/database/{schema}", json={"code": "b"}, headers=user.headers).get_json()
    renamed = client.patch(f"/database/{schema}/{second['_id']}", json={"code": "a"}, headers=user.headers)
    assert renamed.status_code == 409
    stranger = create_user_with_client(client)
    first_id = first.get_json()["_id"]
    refused = client.delete(f"/database/{schema}/{first_id}", headers=stranger.headers)
    assert refused.status_code == 404
    assert (
        client.patch(f"/database/{schema}/{first_id}", json={"code": "z"}, headers=stranger.headers).status_code == 404
    )
    shared = client.post(
        f"/database/{schema}/{first_id}/grants",
        json={"subject": f"User:{stranger.id}", "relation": "reader"},
        headers=user.headers,
    )
    assert shared.status_code == 201, shared.get_json()
    for method in ("PATCH", "DELETE"):  # may read, may not edit or delete: 403, and nothing changes
        answer = client.open(
            f"/database/{schema}/{first_id}", method=method, json={"code": "z"}, headers=stranger.headers
        )
        assert answer.status_code == 403, (method, answer.get_json())
    assert client.get(f"/database/{schema}/{first_id}", headers=user.headers).get_json()["code"] == "a"
    after = _state(app, schema)  # the second document and the share (its own grant event: another family)
    assert after == {"documents": 2, "events": 2, "grants": 3, "change": before["change"] + 1}

    client.delete(f"/database/{schema}/{second['_id']}", headers=user.headers)
    gone = _state(app, schema)
    assert gone == {"documents": 1, "events": 3, "grants": 2, "change": before["change"] + 2}


def test_the_change_number_grows_with_each_committed_write_and_not_with_a_rolled_back_one(app, client):
    schema = _schema(client, {"n": "Number"})
    numbers = [_state(app, schema)["change"]]
    doc = client.post(f"/database/{schema}", json={"n": 1}, headers=ADMIN).get_json()
    numbers.append(_state(app, schema)["change"])
    assert client.patch(f"/database/{schema}/{doc['_id']}", json={"n": 2}, headers=ADMIN).status_code == 200
    numbers.append(_state(app, schema)["change"])
    assert client.put(f"/database/{schema}/{doc['_id']}", json={"n": 3}, headers=ADMIN).status_code == 200
    numbers.append(_state(app, schema)["change"])
    assert (
        client.post(f"/database/{schema}/many", json={"docs": [{"n": 4}, {"n": 5}]}, headers=ADMIN).status_code == 201
    )
    numbers.append(_state(app, schema)["change"])
    assert client.delete(f"/database/{schema}/{doc['_id']}", headers=ADMIN).status_code == 200
    numbers.append(_state(app, schema)["change"])
    assert numbers == [numbers[0] + step for step in range(6)], numbers

    # A transaction that recorded the family's event and a document, rolled back: nothing moves.
    from trellis import db

    with app.app_context():
        db.session.execute(sa.text("SELECT 1"))
        events.record(f"database.{schema}.create", {"document": {"_id": "x"}})
        db.session.rollback()
    assert client.patch(f"/database/{schema}/missing", json={"n": 1}, headers=ADMIN).status_code == 404
    assert _state(app, schema)["change"] == numbers[-1]


def test_the_change_number_reads_a_bounded_number_of_counter_rows(app, client):
    """However many writes, a family's number is the sum of at most SLOTS rows (an index lookup)."""
    schema = _schema(client, {"n": "Number"})
    for n in range(40):
        client.post(f"/database/{schema}", json={"n": n}, headers=ADMIN)
    with app.extensions["trellis"].engine.connect() as connection:
        rows = connection.execute(
            sa.text("SELECT slot, changes FROM core_event_counters WHERE family = :f"), {"f": f"database.{schema}"}
        ).all()
    assert 1 <= len(rows) <= events.SLOTS and sum(changes for _slot, changes in rows) == 40


@pytest.fixture()
def proxied(app, app_config) -> Iterator[tuple[Any, PostgresProxy]]:
    """A second app on the same database whose every connection goes through a recording proxy."""
    if database_kind() != "postgresql":
        pytest.skip("round trips are a PostgreSQL matter (SQLite is in-process)")
    with proxied_app(app_config) as (other, proxy):
        yield other, proxy


def test_each_single_document_write_is_one_statement_without_begin_or_commit(proxied, client, user):
    other, proxy = proxied
    schema = _schema(client, {"n": "Number"})
    shared = _schema(client, {"n": "Number"}, access=True)
    via = other.test_client()
    via.get(f"/database/{schema}?limit=1", headers=ADMIN)  # warm: schema snapshot, pools
    via.get(f"/database/{shared}?limit=1", headers=user.headers)
    proxy.taken_statements()

    def one_statement(method: str, path: str, headers: dict[str, str], body: Any = None, status: int = 200) -> str:
        proxy.taken_statements()
        response = via.open(path, method=method, json=body, headers=headers)
        assert response.status_code == status, response.get_json()
        sent = proxy.taken_statements()
        writes = [(number, sql) for number, sql in sent if "INSERT INTO core_events_pending" in sql]
        assert len(writes) == 1, sent
        writer, statement = writes[0]
        assert statement.lstrip().startswith("WITH"), statement
        # What the writing connection sent for the request: no transaction travelled around the write.
        on_writer = [sql.strip().upper() for number, sql in sent if number == writer]
        assert not {"BEGIN", "COMMIT", "ROLLBACK"} & set(on_writer), on_writer
        return statement

    created = one_statement("POST", f"/database/{schema}", ADMIN, {"n": 1}, 201)
    assert "core_event_counters" in created
    doc_id = via.get(f"/database/{schema}?limit=1", headers=ADMIN).get_json()["documents"][0]["_id"]
    one_statement("PATCH", f"/database/{schema}/{doc_id}", ADMIN, {"n": 2})
    one_statement("PUT", f"/database/{schema}/{doc_id}", ADMIN, {"n": 3})
    one_statement("DELETE", f"/database/{schema}/{doc_id}", ADMIN)

    owned = one_statement("POST", f"/database/{shared}", user.headers, {"n": 1}, 201)
    assert "authz_relations" in owned  # the owner tuple, in the same statement
    doc_id = via.get(f"/database/{shared}?limit=1", headers=user.headers).get_json()["documents"][0]["_id"]
    one_statement("PATCH", f"/database/{shared}/{doc_id}", user.headers, {"n": 2})
    removed = one_statement("DELETE", f"/database/{shared}/{doc_id}", user.headers)
    assert "authz_relations" in removed  # its tuples, in the same statement
    assert _state(other, shared)["grants"] == 0


def test_concurrent_updates_of_one_document_record_each_replaced_version(committing_app):
    """Eight clients PATCH one document at once. PostgreSQL runs an update first without a row lock and
    requires the version it read (``documents.update._update_one``); an update that lost the race writes nothing
    and runs again with ``FOR UPDATE``. Either way each event's ``previous`` is the very version its update
    replaced, and each answer is its event's ``document``: versions 1..N once each, in one chain. (SQLite
    has one writer, and no lock-free first attempt: eight writing threads there meet "database is locked".)"""
    if database_kind() != "postgresql":
        pytest.skip("the update without a lock is PostgreSQL's")
    client = committing_app.test_client()
    schema = _schema(client, {"n": "Number"})
    doc = client.post(f"/database/{schema}", json={"n": 0}, headers=ADMIN).get_json()
    patches = 80

    def patch(n: int) -> dict[str, Any]:
        answer = committing_app.test_client().patch(f"/database/{schema}/{doc['_id']}", json={"n": n}, headers=ADMIN)
        assert answer.status_code == 200, answer.get_json()
        return answer.get_json()

    with statements_run(committing_app.extensions["trellis"].reads.engine) as seen:
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(patch, range(1, patches + 1)))
    with committing_app.app_context(), committing_app.extensions["trellis"].engine.connect() as connection:
        recorded = events.recorded()
        payloads = connection.execute(
            sa.select(recorded.c.payload).where(recorded.c.topic == f"database.{schema}.update")
        ).scalars()
        by_version = {event["document"]["__v"]: event for event in map(json.loads, payloads)}
    assert sorted(by_version) == list(range(1, patches + 1))
    for version, event in by_version.items():
        replaced = by_version[version - 1]["document"] if version > 1 else doc
        assert event["previous"] == replaced, version
    assert sorted(answers, key=lambda a: a["__v"]) == [by_version[v]["document"] for v in sorted(by_version)]
    # Both paths ran: some updates lost the race and ran again with the lock (each update at most twice).
    updates = [sql for sql in seen if "core_events_pending" in sql and "UPDATE" in sql]
    locked = [sql for sql in updates if "FOR UPDATE" in sql]
    assert 0 < len(locked) == len(updates) - patches, (len(locked), len(updates))
