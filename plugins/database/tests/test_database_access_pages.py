"""Pages under access control: a caller who may read most of what matches gets its page from the first
matches in sort order (``documents.list_statements.walked_page``), one who may read little from the deferred join; the
same documents in the same order either way, whichever predicate (tuples, inherited, field-backed) grants
the reading."""

from __future__ import annotations

from typing import Any

import pytest

from trellis.testing.plugin import statements_run
from trellis_database.documents import list_access

ACCESS = {"conduit": {"authorization": {"enabled": True}}}


@pytest.fixture()
def notes(dbapi) -> dict[str, Any]:
    return dbapi.create_schema("Note", {"text": "String", "n": "Number"}, modelOptions=ACCESS)


@pytest.fixture(autouse=True)
def no_hints():
    list_access.narrow_callers.clear()  # the hints of earlier tests' callers on this worker
    yield
    list_access.narrow_callers.clear()


def _many(dbapi, user, schema: str, docs: list[dict[str, Any]]) -> list[str]:
    response = dbapi.client.post(f"/database/{schema}/many", json={"docs": docs}, headers=user.headers)
    assert response.status_code == 201, response.get_json()
    return [doc["_id"] for doc in response.get_json()["docs"]]


def _ns(dbapi, user, schema: str, query: str) -> list[float]:
    return [doc["n"] for doc in dbapi.list(schema, query, headers=user.headers)["documents"]]


def _grant(dbapi, owner, schema: str, doc_id: str, reader) -> None:
    response = dbapi.client.post(
        f"/database/{schema}/{doc_id}/grants", json={"subject": f"User:{reader.id}", "relation": "reader"},
        headers=owner.headers,
    )  # fmt: skip
    assert response.status_code == 201, response.get_json()


def _carol_reads_five(dbapi, make_user) -> tuple[Any, Any]:
    """Alice's 60 notes (n = 0..59) and carol's 3 (0.5, 1.5, 2.5); carol may read alice's 10 and 50 too."""
    alice, carol = make_user(), make_user()
    ids = _many(dbapi, alice, "Note", [{"text": "a", "n": n} for n in range(60)])
    _many(dbapi, carol, "Note", [{"text": "c", "n": n + 0.5} for n in range(3)])
    for n in (10, 50):
        _grant(dbapi, alice, "Note", ids[n], carol)
    return alice, carol


def _narrow_callers() -> int:
    return len(list_access.narrow_callers)


def test_a_broad_callers_full_pages_are_walked_and_exact(dbapi, notes, make_user):
    alice, bob = make_user(), make_user()
    _many(dbapi, alice, "Note", [{"text": "a", "n": n} for n in range(120)])
    _many(dbapi, bob, "Note", [{"text": "b", "n": n + 0.5} for n in (7, 30, 58, 100)])
    pages = [_ns(dbapi, alice, "Note", f"sort=-n&limit=7&skip={skip}&n[$lt]=60") for skip in range(0, 56, 7)]
    assert pages == [[59 - skip - k for k in range(7)] for skip in range(0, 56, 7)]
    assert _narrow_callers() == 0  # every one came from the walk
    # the last page is short because the matches ran out: the deferred join finds no more, so no hint
    assert _ns(dbapi, alice, "Note", "sort=-n&limit=7&skip=56&n[$lt]=60") == [3, 2, 1, 0]
    assert _ns(dbapi, alice, "Note", "sort=-n&limit=7&n[$lt]=-1") == []  # nothing matches: the same
    assert _narrow_callers() == 0
    assert _ns(dbapi, alice, "Note", "sort=n&limit=5&skip=10") == [10, 11, 12, 13, 14]
    list_access.narrow_callers.clear()
    # deeper than MAX_WALKED_PAGE: the deferred join at once
    assert _ns(dbapi, alice, "Note", "sort=-n&limit=10&skip=105") == [14 - k for k in range(10)]
    listed = dbapi.list("Note", "sort=-n&limit=3", headers=bob.headers)
    assert [d["n"] for d in listed["documents"]] == [100.5, 58.5, 30.5]
    assert listed["count"] == 4


def test_a_narrow_callers_page_comes_from_the_deferred_join(dbapi, notes, make_user):
    alice, carol = _carol_reads_five(dbapi, make_user)
    first = dbapi.list("Note", "sort=-n&limit=2", headers=carol.headers)
    assert [d["n"] for d in first["documents"]] == [50, 10]  # the first 4 matches hold one readable row
    assert first["count"] == 5
    assert _narrow_callers() == 1
    assert _ns(dbapi, carol, "Note", "sort=-n&limit=2&skip=2") == [2.5, 1.5]
    assert _ns(dbapi, carol, "Note", "sort=-n&limit=2&skip=4") == [0.5]
    assert _ns(dbapi, alice, "Note", "sort=-n&limit=3") == [59, 58, 57]  # a hint is per caller
    assert _narrow_callers() == 1


def test_walked_pages_follow_inherited_and_field_backed_access(dbapi, make_user):
    dbapi.tasks_read_through_projects({"n": "Number"})
    alice, bob = make_user(), make_user()
    shared, private = (dbapi.post("Project", {"name": name}, headers=alice.headers)["_id"] for name in "sp")
    _grant(dbapi, alice, "Project", shared, bob)
    _many(dbapi, alice, "Task", [{"n": n, "project": private if n % 10 == 3 else shared} for n in range(40)])
    expected = [n for n in range(39, -1, -1) if n % 10 != 3]
    assert [n for skip in (0, 6, 12) for n in _ns(dbapi, bob, "Task", f"sort=-n&limit=6&skip={skip}")] == expected[:18]
    assert _narrow_callers() == 0

    options = {"conduit": {"authorization": {"enabled": True, "fields": {"assignee": "editor"}}}}
    dbapi.create_schema(
        "Ticket", {"n": "Number", "assignee": {"type": "Relation", "model": "User"}}, modelOptions=options
    )
    _many(dbapi, alice, "Ticket", [{"n": n, "assignee": alice.id if n % 7 == 0 else bob.id} for n in range(30)])
    expected = [n for n in range(29, -1, -1) if n % 7 != 0]
    assert [n for skip in (0, 5, 10) for n in _ns(dbapi, bob, "Ticket", f"sort=-n&limit=5&skip={skip}")] == expected[
        :15
    ]
    assert _narrow_callers() == 0


def test_a_narrow_callers_hint_ends(dbapi, notes, make_user, monkeypatch):
    alice, carol = make_user(), make_user()
    _many(dbapi, alice, "Note", [{"text": "a", "n": n} for n in range(30)])
    _many(dbapi, carol, "Note", [{"text": "c", "n": 0.5}])
    monkeypatch.setattr(list_access, "NARROW_SECONDS", 0.0)  # a hint that is over as soon as it is made
    assert _ns(dbapi, carol, "Note", "sort=-n&limit=2") == [0.5]
    assert _narrow_callers() == 1
    _many(dbapi, carol, "Note", [{"text": "c", "n": 100 + n} for n in range(3)])
    assert _ns(dbapi, carol, "Note", "sort=-n&limit=2") == [102, 101]  # walked again: a whole page
    assert _narrow_callers() == 0


def _membership_pages(seen: list[str]) -> int:
    """Statements that read a page by membership of the caller's set (``list_statements.few_page``)."""
    return sum("_held" in sql and "LIMIT" in sql and "count(" not in sql for sql in seen)


def test_a_narrow_caller_who_holds_few_gets_its_pages_by_membership(dbapi, notes, make_user):
    alice, carol = _carol_reads_five(dbapi, make_user)
    assert _ns(dbapi, carol, "Note", "sort=-n&limit=2") == [50, 10]  # a short walk: the hint is made
    with statements_run() as seen:
        assert _ns(dbapi, carol, "Note", "sort=-n&limit=2&skip=2") == [2.5, 1.5]
        assert _ns(dbapi, carol, "Note", "sort=-n&limit=2&skip=4") == [0.5]
        assert _ns(dbapi, carol, "Note", "sort=n&limit=3&n[$gt]=1") == [1.5, 2.5, 10]
        listed = dbapi.list("Note", "sort=-n&limit=2&n[$lt]=40", headers=carol.headers)
    assert [d["n"] for d in listed["documents"]] == [10, 2.5]
    assert listed["count"] == 4
    assert _membership_pages(seen) == 4
    # the hint is per caller: alice reads everything and walks
    with statements_run() as seen:
        assert _ns(dbapi, alice, "Note", "sort=-n&limit=3") == [59, 58, 57]
    assert _membership_pages(seen) == 0


def test_a_narrow_caller_who_holds_many_keeps_the_deferred_join(dbapi, notes, make_user, monkeypatch):
    monkeypatch.setattr(list_access, "FEW", 2)  # carol holds 5 documents: more than "few"
    alice, carol = make_user(), make_user()
    _many(dbapi, alice, "Note", [{"text": "a", "n": n} for n in range(60)])
    _many(dbapi, carol, "Note", [{"text": "c", "n": n + 0.5} for n in range(5)])
    assert _ns(dbapi, carol, "Note", "sort=-n&limit=2") == [4.5, 3.5]
    assert _narrow_callers() == 1
    with statements_run() as seen:
        assert _ns(dbapi, carol, "Note", "sort=-n&limit=2&skip=2") == [2.5, 1.5]
    assert _membership_pages(seen) == 0


def test_membership_pages_follow_inherited_and_field_backed_access(dbapi, make_user):
    dbapi.tasks_read_through_projects({"n": "Number"})
    alice, bob = make_user(), make_user()
    shared, private = (dbapi.post("Project", {"name": name}, headers=alice.headers)["_id"] for name in "sp")
    _grant(dbapi, alice, "Project", shared, bob)
    tasks = _many(dbapi, alice, "Task", [{"n": n, "project": shared if n % 10 == 3 else private} for n in range(40)])
    _grant(dbapi, alice, "Task", tasks[20], bob)
    expected = [33, 23, 20, 13, 3]  # through the project, and one task granted directly
    with statements_run() as seen:
        pages = [_ns(dbapi, bob, "Task", f"sort=-n&limit=2&skip={skip}") for skip in (0, 2, 4)]
    assert [n for page in pages for n in page] == expected
    assert _membership_pages(seen) == 2  # the first page found the caller narrow

    options = {"conduit": {"authorization": {"enabled": True, "fields": {"assignee": "editor"}}}}
    dbapi.create_schema(
        "Ticket", {"n": "Number", "assignee": {"type": "Relation", "model": "User"}}, modelOptions=options
    )
    _many(dbapi, alice, "Ticket", [{"n": n, "assignee": bob.id if n % 9 == 0 else alice.id} for n in range(30)])
    with statements_run() as seen:
        pages = [_ns(dbapi, bob, "Ticket", f"sort=-n&limit=2&skip={skip}") for skip in (0, 2)]
    assert [n for page in pages for n in page] == [27, 18, 9, 0]
    assert _membership_pages(seen) == 1
