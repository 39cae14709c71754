"""The live hub judges the events of one delivery together: the audiences of a schema's events are read in
one statement and the log's tail once (``LiveHub.judge``, ``live_access.document_sides``). Whatever the
batch holds (two schemas under access control, users and teams named, updates that move documents between
readers, a grant and a delete in the middle of it), each subscriber gets exactly what judging the events
one by one sends, in the same order; and a batch of creates costs two statements per schema, not two per
event. Real database and event log (a committing app); the subscriptions' ``send`` collects."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from trellis import events, reads
from trellis.testing.plugin import TEST_MASTER_KEY, database_kind, statements_run
from trellis_authentication.testing import UserAccount, create_user_with_client
from trellis_database import live_access
from trellis_database.live import LiveHub, Subscription

ADMIN = {"masterkey": TEST_MASTER_KEY}
TEAMS = {"teams": {"enabled": True, "allowAddWithoutInvite": True}}
RELATIONS = {"viewers": [{"type": "Relation", "model": "User"}], "teams": [{"type": "Relation", "model": "Team"}]}


def _access(fields: dict[str, str]) -> dict[str, Any]:
    return {"conduit": {"authorization": {"enabled": True, "fields": fields}}}


class World:
    """Two schemas under access control (``Note``: users and teams named; ``Memo``: users named), four users
    (``users[1]`` in a team, ``users[3]`` named by nothing at first), and the REST calls of the test."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.client = app.test_client()
        assert self.client.put("/config/authentication", json=TEAMS, headers=ADMIN).status_code == 200
        self.schema("Note", {"n": "Number", **RELATIONS}, {"viewers": "reader", "teams": "reader"})
        self.schema("Memo", {"n": "Number", "viewers": RELATIONS["viewers"]}, {"viewers": "reader"})
        self.users: list[UserAccount] = [create_user_with_client(self.client) for _ in range(4)]
        owner = self.users[0]
        team = self.client.post("/authentication/teams", json={"name": "crew"}, headers=owner.headers)
        self.team = team.get_json()["_id"]
        added = self.client.post(
            f"/authentication/teams/{self.team}/add", json={"userId": self.users[1].id}, headers=owner.headers
        )
        assert added.status_code == 201, added.get_json()

    def schema(self, name: str, fields: dict[str, Any], relations: dict[str, str]) -> None:
        body = {"name": name, "fields": fields, "modelOptions": _access(relations)}
        assert self.client.post("/admin/database/schemas", json=body, headers=ADMIN).status_code == 201

    def many(self, schema: str, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        response = self.client.post(f"/database/{schema}/many", json={"docs": docs}, headers=ADMIN)
        assert response.status_code == 201, response.get_json()
        return response.get_json()["docs"]

    def call(self, method: str, path: str, body: Any = None, params: Any = None) -> Any:
        response = self.client.open(path, method=method, json=body, query_string=params, headers=ADMIN)
        assert response.status_code in (200, 201), response.get_json()
        return response.get_json()

    def head(self) -> int:
        with self.app.app_context():
            return events.head()

    def events_after(self, after: int) -> list[events.Event]:
        with self.app.app_context():
            events.head()  # every committed event numbered
            found = events.read(after, limit=10_000)
        assert found, "the writes recorded no events"
        return found

    def viewers(self, n: int) -> list[str]:
        """The users document ``n`` names: one, two or none of the first three."""
        return [[self.users[0].id], [self.users[2].id, self.users[0].id], []][n % 3]


def _judged(
    world: World,
    batch: list[events.Event],
    together: bool,
    since: int,
    before: Callable[[], object] = lambda: None,
    schemas: tuple[str, ...] = ("Note", "Memo"),
) -> dict[str, list[Any]]:
    """What each subscriber (every user and an administrator, on each of ``schemas``) is sent when ``batch``
    is judged in one pass (``together``) or one event at a time, by a hub of its own (``before`` runs just
    before the judging)."""
    hub = LiveHub(world.app)
    hub._stop_listening = []  # fed by the test alone: the app's log would hand it this batch's last events too
    sent: dict[str, list[Any]] = {}
    with world.app.app_context():
        for who, user in [("admin", None), *((f"user{k}", u) for k, u in enumerate(world.users))]:
            for schema in schemas:
                received = sent.setdefault(f"{who} {schema}", [])
                subscription = Subscription(
                    schema=schema,
                    kinds=frozenset({"create", "update", "delete", "enter", "leave"}),
                    predicate=None,
                    filter_key="",
                    send=received.append,
                    owner=f"{who} {schema}",
                    user_id=None if user is None else user.id,
                    since=None,
                    last=since,
                    viewer=None if user is None else live_access.user_viewer(user.id),
                )
                hub.add(subscription)
                hub.go_live(subscription)
    before()
    if together:
        hub.judge(batch)
    else:
        for event in batch:
            hub.judge([event])
    return {
        who: [(change["eventId"], change["event"], change["document"]["_id"]) for change in changes]
        for who, changes in sent.items()
    }


@pytest.fixture()
def world(committing_app) -> World:
    return World(committing_app)


def test_a_batch_of_creates_is_judged_as_one_event_at_a_time_with_two_statements_per_schema(world):
    since = world.head()
    world.many(
        "Note", [{"n": n, "viewers": world.viewers(n), "teams": [world.team] if n % 4 == 0 else []} for n in range(12)]
    )
    world.many("Memo", [{"n": n, "viewers": world.viewers(n + 1)} for n in range(9)])
    batch = world.events_after(since)
    one_by_one = _judged(world, batch, together=False, since=since)
    with statements_run(world.app.extensions["trellis"].reads.engine) as seen:
        together = _judged(world, batch, together=True, since=since)
    assert together == one_by_one
    # the readers, as the documents name them: the team's member reads the Notes naming the team
    notes = [doc_id for _, kind, doc_id in one_by_one["admin Note"]]
    assert len(notes) == 12 and len(one_by_one["admin Memo"]) == 9
    assert [d for _, _, d in one_by_one["user1 Note"]] == [notes[n] for n in range(12) if n % 4 == 0]
    assert [d for _, _, d in one_by_one["user2 Note"]] == [notes[n] for n in range(12) if n % 3 == 1]
    assert one_by_one["user3 Note"] == one_by_one["user3 Memo"] == []
    # per schema: the audiences, then the tail (not the log's other readers meanwhile: its receiver's polls)
    reads = [sql for sql in seen if "FROM authz_relations" in sql or "ORDER BY recorded.event_id IS NULL" in sql]
    assert len(reads) == 4, reads


def test_updates_a_grant_and_a_delete_in_the_batch_are_judged_as_one_event_at_a_time(world):
    notes = world.many("Note", [{"n": n, "viewers": world.viewers(n)} for n in range(6)])
    memos = world.many("Memo", [{"n": n, "viewers": world.viewers(n)} for n in range(3)])
    since = world.head()
    world.many("Note", [{"n": 10 + n, "viewers": world.viewers(n + 2)} for n in range(4)])
    world.call("PATCH", f"/database/Note/{notes[0]['_id']}", {"viewers": [world.users[3].id]})  # moves it
    world.call("PATCH", f"/database/Note/{notes[1]['_id']}", {"teams": [world.team]})  # the team enters
    grant = {"subject": f"User:{world.users[3].id}", "relation": "reader"}
    world.call("POST", f"/database/Note/{notes[2]['_id']}/grants", grant)
    world.call("PATCH", f"/database/Note/{notes[2]['_id']}", {"n": 99})
    world.call("DELETE", f"/database/Note/{notes[2]['_id']}/grants", params=grant)
    world.call("DELETE", f"/database/Note/{notes[3]['_id']}")
    world.call("PATCH", f"/database/Memo/{memos[1]['_id']}", {"viewers": [world.users[2].id]})
    world.many("Note", [{"n": 20 + n, "viewers": world.viewers(n)} for n in range(3)])
    batch = world.events_after(since)
    together = _judged(world, batch, together=True, since=since)
    assert together == _judged(world, batch, together=False, since=since)
    kinds = {kind for changes in together.values() for _, kind, _ in changes}
    assert kinds >= {"create", "update", "enter", "leave", "delete"}, kinds
    assert (notes[2]["_id"]) in {d for _, kind, d in together["user3 Note"] if kind == "enter"}


def test_a_batch_of_a_delete_moves_and_creates_under_inherited_access_stays_on_the_batched_reads(world):
    """Comments readable by whoever reads their Note (``note->read``): a delete first (the tail is what
    follows it), then comments moved between notes of different readers, then new ones. Nothing in the
    batch changes who reads a Note, so the batch is judged with one read of each schema's tuples and one of the tail, and
    sends what judging one event at a time sends."""
    body = {"name": "Comment", "fields": {"n": "Number", "note": {"type": "Relation", "model": "Note"}}}
    body["modelOptions"] = _access({})
    assert world.client.post("/admin/database/schemas", json=body, headers=ADMIN).status_code == 201
    inherited = {"read": ["reader", "editor", "owner", "note->read"], "edit": ["editor", "owner"]}
    world.call(
        "PATCH",
        "/admin/authorization/resources/Comment",
        {"permissions": {**inherited, "delete": ["owner"], "share": ["owner"]}},
    )
    notes = world.many(
        "Note", [{"n": n, "viewers": world.viewers(n), "teams": [world.team] * (n == 3)} for n in range(4)]
    )
    comments = world.many("Comment", [{"n": n, "note": notes[n % 4]["_id"]} for n in range(8)])
    since = world.head()
    world.call("DELETE", f"/database/Comment/{comments[0]['_id']}")
    for n in range(1, 7):
        world.call("PATCH", f"/database/Comment/{comments[n]['_id']}", {"note": notes[(n + 1) % 4]["_id"]})
    world.many("Comment", [{"n": 10 + n, "note": notes[n % 4]["_id"]} for n in range(5)])
    batch = world.events_after(since)
    assert {event.topic for event in batch} == {f"database.Comment.{kind}" for kind in ("delete", "update", "create")}
    one_by_one = _judged(world, batch, together=False, since=since, schemas=("Comment",))
    with statements_run(world.app.extensions["trellis"].reads.engine) as seen:
        together = _judged(world, batch, together=True, since=since, schemas=("Comment",))
    assert together == one_by_one
    kinds = {kind for changes in together.values() for _, kind, _ in changes}
    assert kinds >= {"create", "update", "enter", "leave", "delete"}, kinds
    reads = [sql for sql in seen if "FROM authz_relations" in sql or "ORDER BY recorded.event_id IS NULL" in sql]
    # the comments' own tuples, their notes' (one hop), the tail: not three for each of the 12 events
    assert len(reads) == 3, reads


@pytest.mark.skipif(database_kind() != "postgresql", reason="ends PostgreSQL backends")
def test_a_batch_whose_connection_was_ended_reads_again_and_loses_no_event(world, caplog):
    """The read-ahead's pooled connections ended by the server (a restart, an administrator) under it: the
    batch is read once more on a fresh connection, and every subscriber gets what it would have."""
    since = world.head()
    world.many("Note", [{"n": n, "viewers": world.viewers(n)} for n in range(5)])
    batch = world.events_after(since)
    expected = _judged(world, batch, together=False, since=since)

    def end_the_next_read_connection() -> None:
        """The read connection the provider hands out next (the last one given back) ended by the server."""
        with world.app.app_context():
            provider = reads.provider()
            connection = provider.open()
            pid = connection.exec_driver_sql("SELECT pg_backend_pid()").scalar()
            provider.close(connection)
        with world.app.extensions["trellis"].engine.connect() as killer:
            assert killer.exec_driver_sql(f"SELECT pg_terminate_backend({int(pid)})").scalar()

    assert _judged(world, batch, together=True, since=since, before=end_the_next_read_connection) == expected
    assert "database connection lost" in caplog.text


def test_a_live_read_is_made_once_more_after_a_dead_connection_and_never_after_a_pool_timeout():
    """``once_more_if_lost``: the driver's own disconnect (a read shared through the cache raises it, not
    SQLAlchemy's) is read once more; a pool that had no free connection is not waited for twice; a
    query's own error is the caller's."""
    psycopg2 = pytest.importorskip("psycopg2")
    from sqlalchemy.exc import ProgrammingError
    from sqlalchemy.exc import TimeoutError as PoolTimeoutError

    from trellis_database.live import once_more_if_lost

    def failing_once(error: Exception) -> Callable[[], str]:
        calls: list[int] = []

        def read() -> str:
            calls.append(1)
            if len(calls) == 1:
                raise error
            return f"read {len(calls)} times"

        return read

    assert once_more_if_lost(failing_once(psycopg2.OperationalError("server closed the connection"))) == "read 2 times"
    for error in (PoolTimeoutError("QueuePool limit reached"), ProgrammingError("SELECT", {}, Exception("syntax"))):
        with pytest.raises(type(error)):
            once_more_if_lost(failing_once(error))
