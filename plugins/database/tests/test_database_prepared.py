"""Document reads on statements prepared on the server (PostgreSQL; ``trellis.statements``): an app with
its real read connections (autocommit, so preparing), committing to the test database. A schema change
between two requests that changes a prepared statement's types still answers correctly."""

from __future__ import annotations

import pytest

from trellis import create_app
from trellis.testing.plugin import database_kind

pytestmark = pytest.mark.skipif(database_kind() != "postgresql", reason="server-side preparation is PostgreSQL's")


@pytest.fixture()
def committing(committing_app):
    return committing_app


def _on_idle_read_connections(application, query: str) -> list[tuple]:
    """The rows of ``query`` on every idle read connection (all of them checked out at once)."""
    reads = application.extensions["trellis"].reads
    reads.release_idle()  # the connections kept checked out for the next requests go back to the pool
    engine = reads.engine
    held = [engine.connect() for _ in range(engine.pool.checkedin())]
    try:
        return [tuple(row) for c in held for row in c.exec_driver_sql(query).all()]
    finally:
        for connection in held:
            connection.close()


def _prepared_on_idle_read_connections(application) -> set[str]:
    """The names prepared on every idle read connection."""
    return {name for (name,) in _on_idle_read_connections(application, "SELECT name FROM pg_prepared_statements")}


def test_lists_and_gets_are_prepared_and_a_field_type_change_between_requests_answers(
    committing, app_config, admin_headers
):
    client = committing.test_client()
    made = client.post(
        "/admin/database/schemas",
        json={"name": "Priced", "fields": {"price": {"type": "Number", "index": True}, "code": "String"}},
        headers=admin_headers,
    )
    assert made.status_code == 201, made.get_json()
    docs = [{"price": p, "code": c} for p, c in ((1, "10"), (5, "5"), (9, "9"))]
    created = client.post("/database/Priced/many", json={"docs": docs}, headers=admin_headers)
    assert created.status_code == 201, created.get_json()
    ids = [doc["_id"] for doc in created.get_json()["docs"]]

    for _ in range(7):  # past PostgreSQL's five custom plans
        listed = client.get("/database/Priced?price[$lt]=6&sort=-price&limit=20", headers=admin_headers)
        assert listed.status_code == 200 and [d["price"] for d in listed.get_json()["documents"]] == [5, 1]
        bare = client.get("/database/Priced?code[$lt]=6&sort=code&count=none", headers=admin_headers)
        assert [d["code"] for d in bare.get_json()["documents"]] == ["10", "5"]  # compared as text
        got = client.get(f"/database/Priced/{ids[2]}", headers=admin_headers)
        assert got.status_code == 200 and got.get_json()["price"] == 9
    assert len(_prepared_on_idle_read_connections(committing)) >= 3

    # code becomes a Number: its generated column changes type, and the prepared `f_code < $1` (text)
    # no longer fits it. The next list is answered by the statement prepared again.
    schema_id = made.get_json()["_id"]
    changed = client.put(
        f"/admin/database/schemas/{schema_id}",
        json={"fields": {"price": {"type": "Number", "index": True}, "code": "Number"}},
        headers=admin_headers,
    )
    assert changed.status_code in (200, 409), changed.get_json()
    if changed.status_code == 409:
        pytest.fail(f"the type change was refused: {changed.get_json()}")
    added = client.post("/database/Priced", json={"price": 2, "code": 3}, headers=admin_headers)
    assert added.status_code == 201, added.get_json()
    query = "/database/Priced?code[$lt]=6&sort=code&count=none"
    bare = client.get(query, headers=admin_headers)
    assert bare.status_code == 200, bare.get_json()
    # Compared as numbers now; the earlier documents' codes are JSON strings, not numbers, so not < 6.
    assert [d["code"] for d in bare.get_json()["documents"]] == [3]
    unprepared = create_app({**app_config, "DATABASE_PREPARE": False})
    try:
        assert unprepared.test_client().get(query, headers=admin_headers).get_json() == bare.get_json()
    finally:
        unprepared.extensions["trellis_events"].stop()
        unprepared.extensions["trellis"].reads.dispose()
    listed = client.get("/database/Priced?price[$lt]=6&sort=-price&limit=20", headers=admin_headers)
    assert [d["price"] for d in listed.get_json()["documents"]] == [5, 2, 1] and listed.get_json()["count"] == 3


def test_a_first_page_settles_on_a_generic_plan(committing, admin_headers):
    """PostgreSQL plans a prepared statement whose LIMIT or OFFSET is a parameter at every run (their
    generic estimate, a tenth of the rows, always costs more than a plan for 20); a first page's bounds
    are written into its SQL, so its statement is planned once."""
    client = committing.test_client()
    made = client.post(
        "/admin/database/schemas",
        json={"name": "Paged", "fields": {"price": {"type": "Number", "index": True}}},
        headers=admin_headers,
    )
    assert made.status_code == 201, made.get_json()
    for start in (0, 1000):
        docs = [{"price": (start + n) % 997} for n in range(1000)]
        assert client.post("/database/Paged/many", json={"docs": docs}, headers=admin_headers).status_code == 201
    for below in range(100, 900, 100):
        first = client.get(f"/database/Paged?price[$lt]={below}&sort=-price&limit=20&count=none", headers=admin_headers)
        assert [d["price"] for d in first.get_json()["documents"]][:1] == [below - 1]
        later = client.get(
            f"/database/Paged?price[$lt]={below}&sort=-price&limit=20&skip=20&count=none", headers=admin_headers
        )
        assert len(later.get_json()["documents"]) == 20
    pages = [
        (sql, generic, custom)
        for sql, generic, custom in _on_idle_read_connections(
            committing, "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
        )
        if "ORDER BY" in sql
    ]
    first_pages = [p for p in pages if "LIMIT 20" in p[0]]
    assert first_pages and sum(generic for _, generic, _ in first_pages) >= 1, pages
    assert any("OFFSET $" in sql for sql, _, _ in pages)  # a later page keeps its bounds as parameters


def test_under_access_only_the_walked_page_is_prepared(committing, admin_headers):
    """A count and a deferred page under access are planned at every run: prepared, PostgreSQL would keep
    one generic plan for every caller after five runs (for a caller reading 1% of 100,000 documents a count
    took 26 ms on it against 1.8 on its own plan). The walked page, which reads a bounded number of rows,
    stays prepared."""
    from trellis_authentication.testing import create_user_with_client

    client = committing.test_client()
    made = client.post(
        "/admin/database/schemas",
        json={
            "name": "Shared",
            "fields": {"n": {"type": "Number", "index": True}},
            "modelOptions": {"conduit": {"authorization": {"enabled": True}}},
        },
        headers=admin_headers,
    )
    assert made.status_code == 201, made.get_json()
    alice, bob = create_user_with_client(client), create_user_with_client(client)
    for headers, docs in ((alice.headers, [{"n": n} for n in range(100)]), (bob.headers, [{"n": n} for n in (3, 50)])):
        assert client.post("/database/Shared/many", json={"docs": docs}, headers=headers).status_code == 201

    for below in range(60, 100, 5):  # more than five runs of each statement, on the few read connections
        mine = client.get(f"/database/Shared?n[$lt]={below}&sort=-n&limit=1", headers=bob.headers).get_json()
        assert [d["n"] for d in mine["documents"]] == [50] and mine["count"] == 2  # the deferred page, counted
        hers = client.get(f"/database/Shared?n[$lt]={below}&sort=-n&limit=2", headers=alice.headers).get_json()
        assert [d["n"] for d in hers["documents"]] == [below - 1, below - 2] and hers["count"] == below

    prepared = [sql for (sql,) in _on_idle_read_connections(committing, "SELECT statement FROM pg_prepared_statements")]
    under_access = [sql for sql in prepared if "authz_relations" in sql]
    assert any(" AS walk" in sql for sql in under_access), prepared  # the walked page
    assert not [sql for sql in under_access if "count(*)" in sql or "row_number()" in sql], under_access
