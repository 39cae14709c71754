"""Counts under access control with Redis: a caller who may read every document of a schema is given the
admin's count (counted without the read predicate, kept for everyone alike), asked once per change
numbers; as soon as one document is hidden from it, its counts are its own again, exact."""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import sqlalchemy as sa

from trellis import create_app, db
from trellis.testing.plugin import statements_run
from trellis_database import counts
from trellis_database.documents import list_access

from .conftest import DatabaseApi

REDIS = "redis://127.0.0.1:6379/14"
ACCESS = {"conduit": {"authorization": {"enabled": True}}}


@pytest.fixture()
def api(app_config, db, admin_headers):
    app = create_app({**app_config, "REDIS_URL": REDIS})
    with app.app_context():
        yield DatabaseApi(app.test_client(), admin_headers)


@pytest.fixture(autouse=True)
def no_hints():
    list_access.narrow_callers.clear()  # the hints of earlier tests' callers on this worker
    yield
    list_access.narrow_callers.clear()


@pytest.fixture()
def statements():
    """The SQL of every statement run while the test runs."""
    with statements_run() as seen:
        yield seen


def _tuple_counts(seen: list[str]) -> int:
    """Statements that counted matches joined with the caller's tuples (a count under access; not the count
    of the documents a narrow caller holds, which stops at ``list_access.FEW``)."""
    return sum(1 for sql in seen if re.search(r"count\(\*\)", sql) and "authz_relations" in sql and "_held" not in sql)


def _many(api: DatabaseApi, headers: dict[str, str], docs: list[dict[str, Any]]) -> list[str]:
    response = api.client.post("/database/Note/many", json={"docs": docs}, headers=headers)
    assert response.status_code == 201, response.get_json()
    return [doc["_id"] for doc in response.get_json()["docs"]]


def _count(api: DatabaseApi, headers: dict[str, str], below: int) -> int:
    return api.list("Note", f"n[$lt]={below}&sort=-n&limit=2", headers=headers)["count"]


def test_a_caller_who_reads_everything_gets_the_admins_counts_until_a_document_is_hidden(api, make_user, statements):
    api.create_schema("Note", {"n": "Number"}, modelOptions=ACCESS)
    alice, bob = make_user(), make_user()
    _many(api, alice.headers, [{"n": n} for n in range(40)])

    statements.clear()
    assert _count(api, alice.headers, 30) == 30
    assert _tuple_counts(statements) == 1  # the one question, "does she read them all?", in one statement
    statements.clear()
    assert [_count(api, alice.headers, below) for below in (10, 20, 25, 35)] == [10, 20, 25, 35]
    assert _tuple_counts(statements) == 0  # answered as the admin's counts: no join with her tuples
    assert _count(api, api.admin, 10) == 10 and _tuple_counts(statements) == 0  # the admin's own: kept

    hidden = api.post("Note", {"n": 5}, headers=bob.headers)  # a document Alice may not read
    statements.clear()
    assert [_count(api, alice.headers, below) for below in (10, 20)] == [10, 20]  # hers, exact
    assert _tuple_counts(statements) == 3  # the question again (no), then both counts joined
    assert _count(api, bob.headers, 10) == 1
    assert _count(api, api.admin, 10) == 11

    granted = api.client.post(
        "/admin/authorization/relations",
        json={"subject": f"User:{alice.id}", "relation": "reader", "resource": f"Note:{hidden['_id']}"},
        headers=api.admin,
    )
    assert granted.status_code == 201, granted.get_json()
    statements.clear()
    assert [_count(api, alice.headers, below) for below in (10, 20, 6)] == [11, 21, 7]
    assert _tuple_counts(statements) == 1  # she reads everything again: admin counts from here

    revoked = api.client.delete(f"/admin/authorization/relations/{granted.get_json()['_id']}", headers=api.admin)
    assert revoked.status_code == 200, revoked.get_json()
    assert [_count(api, alice.headers, below) for below in (10, 20, 6)] == [10, 20, 6]


def _pages(seen: list[str], guarded: bool) -> int:
    """Page statements (not counts) run with the read predicate (``guarded``) or without it."""
    pages = [sql for sql in seen if "FROM dbdoc_" in sql and "ORDER BY" in sql and "count(" not in sql]
    return sum(1 for sql in pages if ("authz_relations" in sql) == guarded)


def _page(api: DatabaseApi, headers: dict[str, str]) -> tuple[list[float], int]:
    body = api.list("Note", "sort=-n&limit=2", headers=headers)
    return [doc["n"] for doc in body["documents"]], body["count"]


def test_a_caller_known_to_read_everything_has_its_pages_read_without_the_predicate(api, make_user, statements):
    api.create_schema("Note", {"n": "Number"}, modelOptions=ACCESS)
    alice, bob = make_user(), make_user()
    _many(api, alice.headers, [{"n": n} for n in range(40)])

    statements.clear()
    assert _page(api, alice.headers) == ([39, 38], 40)  # found to read everything here
    assert _pages(statements, guarded=True) == 1 and _pages(statements, guarded=False) == 0
    statements.clear()
    assert _page(api, alice.headers) == ([39, 38], 40)
    assert _pages(statements, guarded=True) == 0 and _pages(statements, guarded=False) == 1

    api.post("Note", {"n": 100}, headers=bob.headers)  # first in her sort order, and hidden from her
    statements.clear()
    assert _page(api, alice.headers) == ([39, 38], 40)
    assert _page(api, alice.headers) == ([39, 38], 40)
    assert _pages(statements, guarded=False) == 1  # read once, its change numbers new: not used
    assert _pages(statements, guarded=True) == 2

    api.client.delete(f"/database/Note/{api.list('Note', 'n=100')['documents'][0]['_id']}", headers=api.admin)
    api.post("Note", {"n": 50}, headers=alice.headers)  # everything hers again, at new numbers
    assert _page(api, alice.headers) == ([50, 39], 41)  # asked again: yes
    statements.clear()
    assert _page(api, alice.headers) == ([50, 39], 41)
    assert _pages(statements, guarded=True) == 0 and _pages(statements, guarded=False) == 1
    assert _page(api, bob.headers) == ([], 0)


def _uncounted(api: DatabaseApi, headers: dict[str, str]) -> list[float]:
    body = api.list("Note", "sort=-n&limit=2&count=none", headers=headers)
    assert "count" not in body or body["count"] is None
    return [doc["n"] for doc in body["documents"]]


def test_a_list_without_a_count_uses_the_hint_too_and_only_at_its_numbers(api, make_user, statements):
    """A list with ``count=none`` asks nothing, but a hint found by a counted list serves it while the
    change numbers its page reads are the hint's; a hidden document made meanwhile moves them."""
    api.create_schema("Note", {"n": "Number"}, modelOptions=ACCESS)
    alice, bob = make_user(), make_user()
    _many(api, alice.headers, [{"n": n} for n in range(40)])
    statements.clear()
    assert _uncounted(api, alice.headers) == [39, 38]  # no hint yet: the predicate
    assert _pages(statements, guarded=True) == 1 and _pages(statements, guarded=False) == 0
    assert _page(api, alice.headers) == ([39, 38], 40)  # the counted list finds she reads everything

    statements.clear()
    assert _uncounted(api, alice.headers) == [39, 38]
    assert _pages(statements, guarded=True) == 0 and _pages(statements, guarded=False) == 1

    api.post("Note", {"n": 100}, headers=bob.headers)  # first in her sort order, and hidden from her
    statements.clear()
    assert _uncounted(api, alice.headers) == [39, 38]
    assert _uncounted(api, alice.headers) == [39, 38]
    assert _pages(statements, guarded=False) == 1  # read once, its change numbers new: dropped
    assert _pages(statements, guarded=True) == 2
    assert _uncounted(api, bob.headers) == [100]


def test_a_parent_schema_leaving_access_control_hides_what_its_grants_showed(api, make_user):
    """Alice reads every Task through its Project's grant; the Project schema then leaves access control
    (it grants nothing from then on). No event is recorded and no change number moves, but her next page
    and count no longer show the Tasks: the access definitions' version, part of every kept answer's key,
    moved."""
    api.tasks_read_through_projects({"n": "Number"})
    alice = make_user()
    project = api.post("Project", {"name": "p"})
    granted = api.client.post(
        "/admin/authorization/relations",
        json={"subject": f"User:{alice.id}", "relation": "reader", "resource": f"Project:{project['_id']}"},
        headers=api.admin,
    )
    assert granted.status_code == 201, granted.get_json()
    api.many("Task", [{"n": n, "project": project["_id"]} for n in range(30)])
    for _ in range(2):  # asked, then read without the predicate
        body = api.list("Task", "sort=-n&limit=2", headers=alice.headers)
        assert ([doc["n"] for doc in body["documents"]], body["count"]) == ([29, 28], 30)

    schema_id = next(
        s["_id"]
        for s in api.client.get("/admin/database/schemas", headers=api.admin).get_json()["schemas"]
        if s["name"] == "Project"
    )
    api.update_schema(schema_id, modelOptions={"conduit": {"authorization": {"enabled": False}}})
    body = api.list("Task", "sort=-n&limit=2", headers=alice.headers)
    assert (body["documents"], body["count"]) == ([], 0)
    assert api.list("Task", "sort=-n&limit=2")["count"] == 30


def test_a_grant_removed_behind_trellis_back_stops_showing_after_the_counts_expiry(api, make_user, monkeypatch):
    """Plain SQL records no event, so no change number moves: what was kept (the answer, the count, the
    page hint) lasts until the counts' expiry, and no longer (here shortened to a second)."""
    monkeypatch.setattr(counts, "TTL_SECONDS", 1)
    monkeypatch.setattr(counts, "LOCAL_SECONDS", 0.1)
    api.create_schema("Note", {"n": "Number"}, modelOptions=ACCESS)
    alice = make_user()
    top = _many(api, alice.headers, [{"n": n} for n in range(40)])[-1]  # n = 39, first in her sort order
    for _ in range(2):  # asked, then read without the predicate
        assert _page(api, alice.headers) == ([39, 38], 40)
    db.session.execute(sa.text("DELETE FROM authz_relations WHERE resource_id = :id"), {"id": top})
    time.sleep(1.3)
    assert _page(api, alice.headers) == ([38, 37], 39)


def test_a_narrow_caller_is_never_asked_whether_it_reads_everything(api, make_user, statements):
    api.create_schema("Note", {"n": "Number"}, modelOptions=ACCESS)
    alice, bob = make_user(), make_user()
    _many(api, alice.headers, [{"n": n} for n in range(40)])
    _many(api, bob.headers, [{"n": n + 0.5} for n in range(0, 40, 8)])  # a few among hers: her walk fails

    statements.clear()
    assert _count(api, bob.headers, 30) == 4
    assert _count(api, bob.headers, 20) == 3
    # two counts of his, joined; the whole-table question (two counts in one statement) never asked
    assert _tuple_counts(statements) == 2
    assert not any(sql.count("count(*)") > 1 for sql in statements if "_held" not in sql)
    assert sum("_held" in sql and "count(*)" in sql for sql in statements) == 1  # how many he holds: once


def test_concurrent_lists_ask_whether_the_caller_reads_everything_once(committing_app_factory, admin_headers):
    """Eight lists of a broad caller at a new change number at once: one of them asks, the others wait for
    its answer (each question counts the whole table with the caller's tuples). The question is held in
    PostgreSQL for a moment (a real sleep in its statement's path) so that all eight arrive meanwhile."""
    app = committing_app_factory(REDIS_URL=REDIS)
    client = app.test_client()
    made = client.post(
        "/admin/database/schemas",
        json={"name": "Note", "fields": {"n": "Number"}, "modelOptions": ACCESS},
        headers=admin_headers,
    )
    assert made.status_code == 201, made.get_json()
    body = {"email": "broad@example.com", "password": "a-long-enough-password"}
    assert client.post("/authentication/users", json=body, headers=admin_headers).status_code == 201
    tokens = client.post("/authentication/local", json=body).get_json()
    alice = {"Authorization": f"Bearer {tokens['accessToken']}"}
    created = client.post("/database/Note/many", json={"docs": [{"n": n} for n in range(40)]}, headers=alice)
    assert created.status_code == 201, created.get_json()

    asked: list[str] = []

    def slow_question(conn, cursor, statement, parameters, context, executemany) -> None:
        if statement.count("count(*)") == 2:  # both counts of the whole table: the question
            asked.append(statement)
            time.sleep(0.5)

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", slow_question)
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            totals = list(
                pool.map(
                    lambda below: client.get(
                        f"/database/Note?n[$lt]={below}&sort=-n&limit=2", headers=alice
                    ).get_json()["count"],
                    range(10, 34, 3),
                )
            )
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", slow_question)
    assert totals == list(range(10, 34, 3))
    assert len(asked) == 1
