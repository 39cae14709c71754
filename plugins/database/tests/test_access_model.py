"""A model-based test of who sees what: random sequences of users, teams (sub-teams, members added,
invited and removed), documents written by different users over REST, ``/many``, GraphQL and a custom
endpoint (``?scope=Team:<id>`` included), grants and revokes (a user, a team, ``User:*``, ``*``),
field-backed relations set and unset and a Task reading through its Project (``project->read``), against a
real server and real Socket.IO clients. After every step every read path is compared with the reference
model (``access_reference``): get, a list with a filter, a sort, ``populate`` and an exact count, search,
GraphQL, aggregate, a custom endpoint, a list in a team's scope, and the live events each subscriber has
received; a user's socket closes and resumes with ``since`` the last event it had; at the end of each run
a replay from the start (``since``) must bring exactly what came live.

Live events follow the access in force when each change committed: the model computes, for each change,
who could read each document before and after it. Per document the order is compared; the only tolerance
is what clients must treat as idempotent: a ``leave`` for a document the subscriber does not hold, and an
``enter`` of a document it already holds, unchanged.

Budget: ``TRELLIS_ACCESS_MODEL_EXAMPLES`` runs of up to ``TRELLIS_ACCESS_MODEL_STEPS`` steps, the same
ones every time (derandomized), each step checking the lists and one other path in turn; a failure prints
the whole run. ``TRELLIS_SOAK=1`` (``make soak``) runs new random runs for ``TRELLIS_SOAK_MINUTES`` (30),
each step checking every path, shrinks a failure to a short run, and prints how many steps it ran
(``pytest -rP``)."""

from __future__ import annotations

import collections
import os
import queue
import time
import uuid
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from trellis.testing.plugin import TEST_MASTER_KEY
from trellis_authentication.testing import UserAccount, create_user_over_http

from .access_reference import ADMIN, ANONYMOUS, Key, Reference, Viewer, live_events
from .test_database_subscriptions import Watcher

pytestmark = [pytest.mark.live, pytest.mark.long, pytest.mark.soak]

SOAK = os.environ.get("TRELLIS_SOAK") == "1"
EXAMPLES = int(os.environ.get("TRELLIS_ACCESS_MODEL_EXAMPLES", "10" if SOAK else "20"))  # per round when soaking
SOAK_MINUTES = float(os.environ.get("TRELLIS_SOAK_MINUTES", "30"))
STEPS = int(os.environ.get("TRELLIS_ACCESS_MODEL_STEPS", "40" if SOAK else "20"))
# Shrinking replays a failing run many times over (seconds each): the soak does, the normal suite prints
# the whole failing run instead, so a failure costs one run.
SHRINK = os.environ.get("TRELLIS_ACCESS_MODEL_SHRINK", "1" if SOAK else "0") == "1"
PHASES = [Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if SHRINK else [])
MASTER = {"masterkey": TEST_MASTER_KEY}
# Teams with both ways in; limits far above what a run sends (every invite mail and sign-in comes from one
# address here, and a long soak invites the same few users many times).
LIMITS = dict.fromkeys(("loginPerIp", "loginPerEmail", "sendPerIp", "sendPerAddress"), "100000/minute")
TEAMS = {
    "teams": {"enabled": True, "allowAddWithoutInvite": True, "invites": {"enabled": True}},
    "rateLimits": LIMITS,
}
WAIT = 15.0  # seconds for one request; only reached when something is broken
DELIVERY = 5.0  # seconds a subscriber is given to receive the events a step must bring
MAX_USERS, MAX_DOCS, MAX_TEAMS = 4, 14, 5
TITLES = [f"{word} {n}" for word in ("alpha", "beta") for n in range(5)]  # unique: a repeat is a 409
RELATIONS = ("owner", "editor", "reader")
FIELDS = ("project", "assignee", "crew")  # Task's Relation fields


class Server:
    """HTTP calls to the server under test, as a user, anonymously or as the administrator."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = requests.Session()

    def call(self, who: UserAccount | str | None, method: str, path: str, **kwargs: Any) -> requests.Response:
        headers = MASTER if who == ADMIN else who.headers if isinstance(who, UserAccount) else {}
        return self.http.request(method, self.url + path, headers=headers, timeout=WAIT, **kwargs)

    def ok(self, who: Any, method: str, path: str, expect: int = 200, **kwargs: Any) -> Any:
        response = self.call(who, method, path, **kwargs)
        assert response.status_code == expect, (method, path, response.status_code, response.text)
        return response.json()


def graphql_status(response: requests.Response) -> tuple[int, Any]:
    """A GraphQL answer as (status, data): the status its first error carries, else the HTTP one."""
    body = response.json()
    errors = body.get("errors") or []
    if errors:
        return errors[0].get("extensions", {}).get("status", 500), None
    return response.status_code, body.get("data")


def normalised(received: list[tuple[Key, str, dict[str, Any]]]) -> dict[Key, list[tuple[str, dict[str, Any]]]]:
    """Per document, the events a client applies: a ``leave`` of a document it does not hold and an
    ``enter`` of one it holds, unchanged, are dropped (clients must treat both as idempotent)."""
    held: dict[Key, dict[str, Any]] = {}
    found: dict[Key, list[tuple[str, dict[str, Any]]]] = collections.defaultdict(list)
    for key, event, document in received:
        if event == "leave" and key not in held:
            continue
        if event == "enter" and held.get(key) == document:
            continue
        if event in ("leave", "delete"):
            held.pop(key, None)
        else:
            held[key] = document
        found[key].append((event, document))
    return dict(found)


class Subscriber:
    """One viewer's socket, subscribed to both schemas, and everything it has received so far."""

    def __init__(self, url: str, auth: dict[str, Any] | None, names: dict[str, str], since: int | None = None) -> None:
        self.watcher = Watcher(url, auth)
        self.kinds = {server_name: kind for kind, server_name in names.items()}
        for server_name in names.values():
            self.watcher.subscribe(schema=server_name, **({} if since is None else {"since": since}))
        self.received: list[tuple[Key, str, dict[str, Any]]] = []
        self.last = since or 0  # the newest eventId received: where a client resumes from

    def drain(self) -> None:
        while True:
            try:
                change = self.watcher.changes.get_nowait()
            except queue.Empty:
                return
            key = (self.kinds[change["schema"]], change["document"]["_id"])
            self.received.append((key, change["event"], change["document"]))
            self.last = max(self.last, change["eventId"])

    def close(self) -> None:
        self.watcher.close()


def wait_for(subscribers: dict[Viewer, Subscriber], expected: dict[Viewer, list[Any]], what: str) -> None:
    """Poll (bounded) until every subscriber has received, per document, what the model expects."""
    deadline = time.monotonic() + DELIVERY
    while True:
        wrong = {}
        for viewer, subscriber in subscribers.items():
            subscriber.drain()
            # both sides as a client applies them: a subscriber that subscribed while it could read a document
            # holds nothing of it, so the leave of its revoke is one to drop on either side
            got, want = normalised(subscriber.received), normalised(expected[viewer])
            if got != want:
                wrong[viewer] = {
                    key: (got.get(key), want.get(key)) for key in set(got) | set(want) if got.get(key) != want.get(key)
                }
        if not wrong:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: per document (received, expected): {wrong}")
        time.sleep(0.02)


class AccessModel(RuleBasedStateMachine):
    """One run: fresh schemas, two users to start with, a subscriber per viewer."""

    server: Server  # set by the test before the machine runs
    runs = steps_run = 0  # over every run of the test, for the soak's report

    def __init__(self) -> None:
        super().__init__()
        AccessModel.runs += 1
        self.ref = Reference()
        self.accounts: dict[str, UserAccount] = {}
        self.born: dict[str, int] = {}  # every id made in this run → its rank
        self.subscribers: dict[Viewer, Subscriber] = {}  # connected
        self.away: dict[str, Subscriber] = {}  # users whose socket was closed, to resume with ``since``
        self.expected: dict[Viewer, list[tuple[Key, str, dict[str, Any]]]] = {}
        self.replayable: set[Viewer] = {ADMIN, ANONYMOUS}  # the viewers there from the start of the run
        self.step = 0
        self.healthy = True
        suffix = uuid.uuid4().hex[:8]
        self.names = {"Project": f"P{suffix}", "Task": f"T{suffix}"}
        self.endpoints = {"list": f"tasks{suffix}", "create": f"newTask{suffix}"}
        self._make_schemas()
        for viewer, auth in ((ADMIN, MASTER), (ANONYMOUS, None)):
            self.subscribers[viewer] = Subscriber(self.server.url, auth, self.names)
            self.expected[viewer] = []
        for _ in range(2):
            self.replayable.add(self._new_user())

    # set-up

    def _make_schemas(self) -> None:
        project, task = self.names["Project"], self.names["Task"]
        on = {"conduit": {"authorization": {"enabled": True}}}
        self.server.ok(
            ADMIN,
            "POST",
            "/admin/database/schemas",
            201,
            json={"name": project, "fields": {"name": "String", "secret": "String"}, "modelOptions": on},
        )
        fields = {
            "title": {"type": "String", "unique": True, "searchable": True},
            "n": "Number",
            "project": {"type": "Relation", "model": project},
            "assignee": {"type": "Relation", "model": "User"},
            "crew": {"type": "Relation", "model": "Team"},
        }
        options = {"conduit": {"authorization": {"enabled": True, "fields": {"assignee": "editor", "crew": "reader"}}}}
        self.server.ok(
            ADMIN,
            "POST",
            "/admin/database/schemas",
            201,
            json={"name": task, "fields": fields, "modelOptions": options},
        )
        permissions = {
            "read": ["reader", "editor", "owner", "project->read"],
            "edit": ["editor", "owner"],
            "delete": ["owner"],
            "share": ["owner"],
        }
        self.server.ok(ADMIN, "PATCH", f"/admin/authorization/resources/{task}", json={"permissions": permissions})
        at_least = {"schemaField": "n", "operation": "gte", "comparisonField": {"type": "Input", "value": "min"}}
        self.server.ok(
            ADMIN,
            "POST",
            "/admin/database/customEndpoints",
            201,
            json={
                "name": self.endpoints["list"],
                "operation": "GET",
                "selectedSchema": task,
                "inputs": [{"name": "min", "type": "Number", "location": "query"}],
                "query": {"AND": [at_least]},
            },
        )
        inputs = [
            {"name": "title", "type": "String", "location": "body"},
            {"name": "n", "type": "Number", "location": "body"},
        ]
        assignments = [
            {"schemaField": name, "action": "set", "assignmentField": {"type": "Input", "value": name}}
            for name in ("title", "n")
        ]
        self.server.ok(
            ADMIN,
            "POST",
            "/admin/database/customEndpoints",
            201,
            json={
                "name": self.endpoints["create"],
                "operation": "POST",
                "selectedSchema": task,
                "authentication": True,
                "inputs": inputs,
                "assignments": assignments,
            },
        )

    def _new_user(self) -> str:
        account = create_user_over_http(self.server.url)
        self.accounts[account.id] = account
        self.born[account.id] = len(self.born)
        self.ref.users.add(account.id)
        self.subscribers[account.id] = Subscriber(self.server.url, {"token": account.access_token}, self.names)
        self.expected[account.id] = []
        return account.id

    def teardown(self) -> None:
        try:
            if self.healthy:
                for user in self.ordered(self.away):
                    self._resume(user)
                self.check_everything()
                self._check_replays()
                time.sleep(0.3)  # anything sent late that should not have been
                wait_for(self.subscribers, self.expected, "at the end")
        finally:
            for subscriber in [*self.subscribers.values(), *self.away.values()]:
                subscriber.close()

    # helpers

    def who(self, viewer: Viewer) -> Any:
        return viewer if viewer in (ADMIN, ANONYMOUS) else self.accounts[viewer]

    def path(self, kind: str, doc_id: str | None = None) -> str:
        return f"/database/{self.names[kind]}" + (f"/{doc_id}" if doc_id else "")

    def refresh(self, key: Key) -> None:
        """The model's copy of a document: the administrator's view of it after a write."""
        self.ref.docs[key] = self.server.ok(ADMIN, "GET", self.path(*key))

    def commit(self, change: Any) -> None:
        """Run one committed change: ``change()`` sends it, updates the model and returns the documents it
        wrote (``{key: create|update|delete}``, empty when it wrote none); the live events it brings each
        subscriber are recorded from who could read what before and after it."""
        before = {viewer: self.ref.visible(viewer) for viewer in self.expected}
        written = change() or {}
        for viewer, seen in before.items():
            self.expected[viewer] += live_events(seen, self.ref.visible(viewer), written)

    def ordered(self, items: Any) -> list[Any]:
        """``items`` in the order their ids were made (not by the ids themselves, which differ from run to
        run): Hypothesis draws by position, so a run replays the same choices when it is shrunk."""

        def rank(value: Any) -> Any:
            if isinstance(value, tuple):
                return tuple(rank(part) for part in value)
            text = str(value).split(":", 1)[-1]
            return (0, self.born[text], str(value)) if text in self.born else (1, 0, str(value))

        return sorted(items, key=rank)

    def user(self, data: Any) -> str:
        return data.draw(st.sampled_from(self.ordered(self.ref.users)), label="user")

    def actor(self, data: Any, key: Key, permission: str, admin: bool = True) -> Viewer:
        """Who acts on the document: half the time a user holding ``permission`` on it (when there is one),
        else anyone (the administrator too, with ``admin``), so that refusals and successes both come often."""
        users = self.ordered(self.ref.users)
        able = [user for user in users if self.ref.may(user, permission, key)]
        if able and data.draw(st.booleans(), label="able"):
            return data.draw(st.sampled_from(able), label="actor")
        return data.draw(st.sampled_from([*users, ADMIN] if admin else users), label="actor")

    def document(self, data: Any, kind: str | None = None) -> Key | None:
        keys = self.ordered(key for key in self.ref.docs if kind is None or key[0] == kind)
        return data.draw(st.sampled_from(keys), label="document") if keys else None

    def task_fields(self, data: Any, actor: Viewer) -> dict[str, Any]:
        projects = self.ordered(doc_id for kind, doc_id in self.ref.docs if kind == "Project")
        teams = self.ordered(self.ref.parent)  # a team the writer is not in: the 400 of an unknown one
        fields: dict[str, Any] = {
            "title": data.draw(st.sampled_from(TITLES), label="title"),
            "n": data.draw(st.integers(0, 3), label="n"),
        }
        fields["project"] = data.draw(st.sampled_from([None, *projects]), label="project")
        fields["assignee"] = data.draw(st.sampled_from([None, *self.ordered(self.ref.users)]), label="assignee")
        fields["crew"] = data.draw(st.sampled_from([None, *teams]), label="crew")
        return {name: value for name, value in fields.items() if value is not None}

    def relation_refused(
        self, actor: Viewer, scope: str | None, name: str, value: str | None, kept: str | None = None
    ) -> bool | None:
        """Whether writing ``value`` into Task's Relation field ``name`` is the 400 of a missing target: a
        project the writer may not read, a team it is not in (a hidden value the document already holds
        may stay). None: either answer (with a scope, whether the user or the team is asked is not said)."""
        if value is None or actor == ADMIN:
            return False
        if name == "project":
            if ("Project", value) not in self.ref.docs:
                return True
            as_user = self.ref.may(actor, "read", ("Project", value))
            as_team = as_user if scope is None else self.ref.may(("scope", actor, scope), "read", ("Project", value))
            refused = None if as_user != as_team else not as_user
        elif name == "crew":
            if value not in self.ref.parent:
                return True
            refused = value not in self.ref.teams_of(actor)
        else:
            return False
        return False if value == kept else refused

    def creation_outcomes(self, actor: Viewer, scope: str | None, docs: list[dict[str, Any]]) -> set[int]:
        """The statuses a create of ``docs`` may answer, as the contract has it (any of the failures when
        several apply: their order is not said)."""
        if actor == ANONYMOUS:
            return {401}  # a document must have an owner: opting in closes anonymous creates
        if scope is not None and scope not in self.ref.teams_of(actor):
            return {403}
        failures: set[int] = set()
        perhaps = False  # a project the user may read and the scope team may not, or the reverse
        titles = [doc["title"] for doc in docs if "title" in doc]
        taken = {doc.get("title") for key, doc in self.ref.docs.items() if key[0] == "Task"}
        if len(set(titles)) < len(titles) or set(titles) & taken:
            failures.add(409)
        for doc in docs:
            for name in FIELDS:
                refused = self.relation_refused(actor, scope, name, doc.get(name))
                if refused is None:
                    perhaps = True
                elif refused:
                    failures.add(400)
        if failures:
            return failures | ({400} if perhaps else set())
        return {201, 400} if perhaps else {201}

    # rules: users and teams

    @precondition(lambda self: len(self.ref.users) < MAX_USERS)
    @rule()
    def add_user(self) -> None:
        self.healthy = False  # until the checks after this step pass
        if len(self.ref.users) < MAX_USERS:
            self.commit(lambda: self._new_user() and None)

    @rule(data=st.data(), change=st.sampled_from(["create", "join", "join", "leave", "delete"]))
    def change_teams(self, data: Any, change: str) -> None:
        """A team created (a sub-team of one the user owns, or not), a user joining one (added, or invited
        and accepting), leaving one (or removed), or a team deleted with its sub-teams. One rule: teams
        are the setting, documents the subject."""
        self.healthy = False  # until the checks after this step pass
        if change == "create" and len(self.ref.parent) < MAX_TEAMS:
            self.create_team(data)
        elif change == "join" and self.ref.parent:
            self.join_team(
                data,
                data.draw(st.sampled_from(["member", "owner"]), label="role"),
                data.draw(st.booleans(), label="invite"),
            )
        elif change == "leave" and any(self.ref.members.values()):
            self.leave_team(data)
        elif change == "delete" and self.ref.parent:
            self.delete_team(data)

    def create_team(self, data: Any) -> None:
        if len(self.ref.parent) >= MAX_TEAMS:
            return
        actor = self.user(data)
        owned = self.ordered(t for t in self.ref.parent if self.ref.authority(t, actor) == "owner")
        parent = data.draw(st.sampled_from([None, *owned]), label="parent")
        body = {"name": "team-" + uuid.uuid4().hex[:8], **({"parentTeam": parent} if parent else {})}

        def create() -> None:
            created = self.server.ok(self.who(actor), "POST", "/authentication/teams", 201, json=body)
            self.ref.parent[created["_id"]] = parent
            self.born[created["_id"]] = len(self.born)
            self.ref.members[created["_id"]] = {actor: "owner"}

        self.commit(create)

    def _team_and_owner(self, data: Any) -> tuple[str, str] | None:
        pairs = self.ordered(
            (t, u) for t in self.ref.parent for u in self.ref.users if self.ref.authority(t, u) == "owner"
        )
        return data.draw(st.sampled_from(pairs), label="team, owner") if pairs else None

    def join_team(self, data: Any, role: str, invite: bool) -> None:
        """An owner adds a user, or invites the user's address and the user accepts."""
        found = self._team_and_owner(data)
        if found is None:
            return
        team, owner = found
        user = self.user(data)
        current = self.ref.members[team].get(user)
        if invite:
            answer = self.server.call(
                self.who(owner),
                "POST",
                f"/authentication/teams/{team}/invite",
                json={"email": self.accounts[user].email, "role": role},
            )
            if current is not None:
                assert answer.status_code == 409, answer.text
                return
            assert answer.status_code == 201, answer.text
            token = answer.json()["invitationToken"]
            # an account an administrator created counts as verified: its pending invites show their token
            pending = self.server.ok(self.who(user), "GET", "/authentication/teams/invites")["invites"]
            assert {"teamId": team, "invitationToken": token, "role": role}.items() <= next(
                invite for invite in pending if invite["teamId"] == team
            ).items(), pending

            def accept() -> None:
                self.server.ok(
                    self.who(user), "GET", "/authentication/teams/invite/accept", params={"invitationToken": token}
                )
                self.ref.members[team][user] = role
        else:
            if current is not None:
                answer = self.server.call(
                    self.who(owner), "POST", f"/authentication/teams/{team}/add", json={"userId": user, "role": role}
                )
                assert answer.status_code == 409, answer.text
                return

            def accept() -> None:
                self.server.ok(
                    self.who(owner),
                    "POST",
                    f"/authentication/teams/{team}/add",
                    201,
                    json={"userId": user, "role": role},
                )
                self.ref.members[team][user] = role

        self.commit(accept)

    def leave_team(self, data: Any) -> None:
        """An owner removes a member, or a member leaves (the last owner stays: 409)."""
        pairs = self.ordered((t, u) for t, people in self.ref.members.items() for u in people)
        if not pairs:
            return
        team, user = data.draw(st.sampled_from(pairs), label="team, member")
        owners = [u for u in self.ref.users if self.ref.authority(team, u) == "owner"]
        actor = data.draw(st.sampled_from(self.ordered({user, *owners})), label="actor")
        path = f"/authentication/teams/{team}/members"
        direct_owners = {u for u, role in self.ref.members[team].items() if role == "owner"}
        if direct_owners and direct_owners <= {user}:
            answer = self.server.call(self.who(actor), "DELETE", path, params={"members": user})
            assert answer.status_code == 409, answer.text
            return

        def remove() -> None:
            self.server.ok(self.who(actor), "DELETE", path, params={"members": user})
            del self.ref.members[team][user]

        self.commit(remove)

    def delete_team(self, data: Any) -> None:
        found = self._team_and_owner(data)
        if found is None:
            return
        team, owner = found

        def delete() -> None:
            self.server.ok(self.who(owner), "DELETE", f"/authentication/teams/{team}")
            self.ref.delete_team(team)

        self.commit(delete)

    # rules: changes back to back

    @precondition(lambda self: bool(self.ref.docs))
    @rule(data=st.data(), count=st.integers(2, 4))
    def burst(self, data: Any, count: int) -> None:
        """Several changes in a row, each acknowledged before the next is sent but none waiting for live
        delivery: who receives each change is decided by the access at its commit, not by what has
        changed by the time it is delivered (a revoke, a write, a grant again)."""
        self.healthy = False  # until the checks after this step pass
        for _ in range(count):
            choices = ["update", "update", "grant", "teams", *(["create"] if len(self.ref.docs) < MAX_DOCS else [])]
            choices += [*(["revoke"] if any(t[1] != "owner" for t in self.ref.tuples) else [])]
            choices += [*(["delete"] if self.ref.docs else [])]
            choice = data.draw(st.sampled_from(choices), label="change")
            if choice == "update" and self.ref.docs:
                self.update(data, data.draw(st.sampled_from(["rest", "put", "graphql"]), label="via"))
            elif choice == "grant" and self.ref.docs:
                self.grant(data, data.draw(st.sampled_from(RELATIONS), label="relation"))
            elif choice == "teams":
                self.change_teams(data, data.draw(st.sampled_from(["create", "join", "leave", "delete"]), label="team"))
            elif choice == "create":
                kind = data.draw(st.sampled_from(["Project", "Task"]), label="kind")
                self.create(
                    data, kind, data.draw(st.sampled_from(["rest", "many", "graphql", "endpoint"]), label="via")
                )
            elif choice == "revoke":
                self.revoke(data)
            elif choice == "delete" and self.ref.docs:
                self.delete(data, data.draw(st.sampled_from(["rest", "graphql"]), label="via"))

    # rules: subscribers going away and coming back

    @precondition(lambda self: any(s.last for v, s in self.subscribers.items() if v in self.accounts))
    @rule(data=st.data())
    def disconnect(self, data: Any) -> None:
        """A user's socket closes; the model goes on recording what it must receive when it resumes."""
        self.healthy = False  # until the checks after this step pass
        users = self.ordered(v for v, s in self.subscribers.items() if v in self.accounts and s.last)
        user = data.draw(st.sampled_from(users), label="user")
        self.away[user] = self.subscribers.pop(user)
        self.away[user].close()

    @precondition(lambda self: bool(self.away))
    @rule(data=st.data())
    def resume(self, data: Any) -> None:
        self.healthy = False  # until the checks after this step pass
        self._resume(data.draw(st.sampled_from(self.ordered(self.away)), label="user"))

    def _resume(self, user: str) -> None:
        """A new socket subscribes ``since`` the last event the closed one received: it must bring what
        happened while away, under the access in force at each change, then live events."""
        gone = self.away.pop(user)
        back = Subscriber(self.server.url, {"token": self.accounts[user].access_token}, self.names, since=gone.last)
        back.received = gone.received
        self.subscribers[user] = back

    # rules: documents

    @precondition(lambda self: len(self.ref.docs) < MAX_DOCS)
    @rule(
        data=st.data(),
        kind=st.sampled_from(["Project", "Task"]),
        via=st.sampled_from(["rest", "many", "graphql", "endpoint"]),
    )
    def create(self, data: Any, kind: str, via: str) -> None:
        self.healthy = False  # until the checks after this step pass
        if len(self.ref.docs) >= MAX_DOCS:
            return
        actor = data.draw(st.sampled_from([*self.ordered(self.ref.users), ADMIN, ANONYMOUS]), label="actor")
        teams = self.ordered(self.ref.parent)
        scope = data.draw(st.sampled_from([None, None, *teams]), label="scope") if actor in self.ref.users else None
        if kind == "Project":
            docs = [
                {"name": data.draw(st.sampled_from(["Launch", "Ops"]), label="name"), "secret": uuid.uuid4().hex[:6]}
            ]
        else:
            docs = [self.task_fields(data, actor)]
        if via == "many":
            docs.append(
                self.task_fields(data, actor) if kind == "Task" else {"name": "More", "secret": uuid.uuid4().hex[:6]}
            )
        if via == "endpoint":
            kind = "Task"
            docs = [
                {
                    "title": data.draw(st.sampled_from(TITLES), label="title"),
                    "n": data.draw(st.integers(0, 3), label="n"),
                }
            ]
        outcomes = self.creation_outcomes(actor, scope, docs)
        query = {"scope": f"Team:{scope}"} if scope else {}
        holder = f"Team:{scope}" if scope else f"User:{actor}"

        def write() -> dict[Key, str]:
            status, ids = self._send_create(actor, kind, via, docs, query, scope)
            assert status in outcomes, (via, kind, docs, scope, status, outcomes)
            for doc_id in ids:
                self.refresh((kind, doc_id))
                self.born[doc_id] = len(self.born)
                if actor != ADMIN:
                    self.ref.tuples.add((holder, "owner", (kind, doc_id)))
            return {(kind, doc_id): "create" for doc_id in ids}

        self.commit(write)

    def _send_create(
        self, actor: Viewer, kind: str, via: str, docs: list[dict[str, Any]], query: dict[str, str], scope: str | None
    ) -> tuple[int, list[str]]:
        who = self.who(actor)
        if via == "rest":
            answer = self.server.call(who, "POST", self.path(kind), json=docs[0], params=query)
            return answer.status_code, [answer.json()["_id"]] if answer.status_code == 201 else []
        if via == "many":
            answer = self.server.call(who, "POST", self.path(kind) + "/many", json={"docs": docs}, params=query)
            return answer.status_code, [
                doc["_id"] for doc in answer.json()["docs"]
            ] if answer.status_code == 201 else []
        if via == "endpoint":
            answer = self.server.call(
                who, "POST", f"/database/function/{self.endpoints['create']}", json=docs[0], params=query
            )
            return answer.status_code, [answer.json()["_id"]] if answer.status_code == 201 else []
        name = self.names[kind]
        types = {"title": "String", "n": "Float", "name": "String", "secret": "String"} | dict.fromkeys(FIELDS, "ID")
        params = ", ".join(f"${field}: {types[field]}" for field in docs[0])
        values = ", ".join(f"{field}: ${field}" for field in docs[0])
        text = f"mutation ({params}{', ' if params else ''}$scope: String) {{ create{name}(data: {{{values}}}, scope: $scope) {{ _id }} }}"
        variables = {**docs[0], "scope": f"Team:{scope}" if scope else None}
        status, found = graphql_status(
            self.server.call(who, "POST", "/graphql", json={"query": text, "variables": variables})
        )
        return (201, [found[f"create{name}"]["_id"]]) if status == 200 else (status, [])

    @precondition(lambda self: bool(self.ref.docs))
    @rule(data=st.data(), via=st.sampled_from(["rest", "put", "graphql"]))
    def update(self, data: Any, via: str) -> None:
        """A PATCH, a PUT (the whole document sent back: a hidden project or a stranger's team it already
        holds may stay) or a GraphQL update, as a user who may edit it or as anyone."""
        self.healthy = False  # until the checks after this step pass
        key = self.document(data)
        if key is None:
            return
        actor = self.actor(data, key, "edit")
        kind, doc_id = key
        may_edit = self.ref.may(actor, "edit", key)
        if kind == "Project":
            changes: dict[str, Any] = {"secret": uuid.uuid4().hex[:6]}
        elif not may_edit:
            changes = {"n": data.draw(st.integers(0, 3), label="n")}
        else:
            drawn = self.task_fields(data, actor)
            names = data.draw(
                st.sets(st.sampled_from(["title", "n", "project", "assignee", "crew"]), min_size=1), label="fields"
            )
            changes = {name: drawn.get(name) for name in names}  # None unsets a relation
        if via == "put":
            doc = self.ref.docs[key]
            fields = ("name", "secret") if kind == "Project" else ("title", "n", *FIELDS)
            changes = {name: doc.get(name) for name in fields if doc.get(name) is not None} | changes
            changes = {name: value for name, value in changes.items() if value is not None}
        if not self.ref.may(actor, "read", key):
            outcomes = {404}
        elif not may_edit:
            outcomes = {403}
        else:
            outcomes = self._update_outcomes(actor, key, changes)

        def write() -> dict[Key, str]:
            status = self._send_update(actor, key, changes, via)
            assert status in outcomes, (via, key, changes, status, outcomes)
            if status != 200:
                return {}
            self.refresh(key)
            return {key: "update"}

        self.commit(write)

    def _update_outcomes(self, actor: Viewer, key: Key, changes: dict[str, Any]) -> set[int]:
        failures = set()
        title = changes.get("title")
        if title is not None and any(
            doc.get("title") == title for k, doc in self.ref.docs.items() if k[0] == "Task" and k != key
        ):
            failures.add(409)
        doc = self.ref.docs[key]
        if any(self.relation_refused(actor, None, name, changes.get(name), doc.get(name)) for name in FIELDS):
            failures.add(400)
        return failures or {200}

    def _send_update(self, actor: Viewer, key: Key, changes: dict[str, Any], via: str) -> int:
        kind, doc_id = key
        who = self.who(actor)
        if via == "put":
            return self.server.call(who, "PUT", self.path(kind, doc_id), json=changes).status_code
        if via == "rest" or any(value is None for value in changes.values()):
            return self.server.call(who, "PATCH", self.path(kind, doc_id), json=changes).status_code
        name = self.names[kind]
        types = {"title": "String", "n": "Float", "secret": "String"} | dict.fromkeys(FIELDS, "ID")
        params = ", ".join(f"${field}: {types[field]}" for field in changes)
        values = ", ".join(f"{field}: ${field}" for field in changes)
        text = f"mutation ($id: ID!, {params}) {{ update{name}(_id: $id, data: {{{values}}}) {{ _id }} }}"
        answer = self.server.call(who, "POST", "/graphql", json={"query": text, "variables": {"id": doc_id, **changes}})
        return graphql_status(answer)[0]

    @precondition(lambda self: bool(self.ref.docs))
    @rule(data=st.data(), via=st.sampled_from(["rest", "graphql"]))
    def delete(self, data: Any, via: str) -> None:
        self.healthy = False  # until the checks after this step pass
        key = self.document(data)
        if key is None:
            return
        actor = self.actor(data, key, "delete")
        kind, doc_id = key
        outcome = 404 if not self.ref.may(actor, "read", key) else 200 if self.ref.may(actor, "delete", key) else 403

        def write() -> dict[Key, str]:
            if via == "rest":
                status = self.server.call(self.who(actor), "DELETE", self.path(kind, doc_id)).status_code
            else:
                text = f"mutation ($id: ID!) {{ delete{self.names[kind]}(_id: $id) {{ _id }} }}"
                answer = self.server.call(
                    self.who(actor), "POST", "/graphql", json={"query": text, "variables": {"id": doc_id}}
                )
                status = graphql_status(answer)[0]
            assert status == outcome, (via, key, status, outcome)
            if status != 200:
                return {}
            del self.ref.docs[key]
            self.ref.tuples = {t for t in self.ref.tuples if t[2] != key}
            return {key: "delete"}

        self.commit(write)

    # rules: grants

    @precondition(lambda self: bool(self.ref.docs))
    @rule(data=st.data(), relation=st.sampled_from(RELATIONS))
    def grant(self, data: Any, relation: str) -> None:
        self.healthy = False  # until the checks after this step pass
        key = self.document(data)
        if key is None:
            return
        actor = self.actor(data, key, "share", admin=False)
        users = [f"User:{u}" for u in self.ordered(self.ref.users)]
        teams = [f"Team:{t}" for t in self.ordered(self.ref.parent)]
        subject = data.draw(st.sampled_from([*users, *teams, "User:*", "*"]), label="subject")
        if not self.ref.may(actor, "read", key):
            outcomes = {404}
        elif not self.ref.may(actor, "share", key):
            outcomes = {403}
        elif subject in ("User:*", "*") and relation == "owner":
            outcomes = {400}  # owner admits users and teams only
        elif subject.startswith("Team:") and subject[5:] not in self.ref.teams_of(actor):
            outcomes = {400, 403, 404}  # a team the caller is not in is not its to grant to
        elif (subject, relation, key) in self.ref.tuples:
            outcomes = {409}
        else:
            outcomes = {201}
        kind, doc_id = key

        def write() -> None:
            answer = self.server.call(
                self.who(actor),
                "POST",
                self.path(kind, doc_id) + "/grants",
                json={"subject": subject, "relation": relation},
            )
            assert answer.status_code in outcomes, (key, subject, relation, answer.status_code, answer.text, outcomes)
            if answer.status_code == 201:
                self.ref.tuples.add((subject, relation, key))

        self.commit(write)

    @precondition(lambda self: any(t[1] != "owner" for t in self.ref.tuples))
    @rule(data=st.data())
    def revoke(self, data: Any) -> None:
        self.healthy = False  # until the checks after this step pass
        shared = self.ordered(t for t in self.ref.tuples if t[1] != "owner")
        if not shared:
            return
        subject, relation, key = data.draw(st.sampled_from(shared), label="tuple")
        actor = self.actor(data, key, "share", admin=False)
        outcome = 404 if not self.ref.may(actor, "read", key) else 200 if self.ref.may(actor, "share", key) else 403
        kind, doc_id = key

        def write() -> None:
            answer = self.server.call(
                self.who(actor),
                "DELETE",
                self.path(kind, doc_id) + "/grants",
                params={"subject": subject, "relation": relation},
            )
            assert answer.status_code == outcome, (key, subject, relation, answer.status_code, answer.text, outcome)
            if outcome == 200:
                self.ref.tuples.discard((subject, relation, key))

        self.commit(write)

    # checks

    @invariant()
    def reads_agree(self) -> None:
        self.step += 1
        AccessModel.steps_run += self.step > 1  # the first check comes before any rule
        checks = [self.check_lists]
        every = [
            self.check_gets,
            self.check_search,
            self.check_graphql,
            self.check_aggregate,
            self.check_endpoint,
            self.check_scopes,
        ]
        checks += every if SOAK else [every[self.step % len(every)]]
        for check in checks:
            check()
        wait_for(self.subscribers, self.expected, f"after step {self.step}")
        self.healthy = True

    def check_everything(self) -> None:
        for check in (
            self.check_lists,
            self.check_gets,
            self.check_search,
            self.check_graphql,
            self.check_aggregate,
            self.check_endpoint,
            self.check_scopes,
        ):
            check()

    def viewers(self) -> list[Viewer]:
        return [*self.ordered(self.ref.users), ANONYMOUS]

    def tasks(self, viewer: Viewer) -> list[dict[str, Any]]:
        return sorted(
            (doc for key, doc in self.ref.visible(viewer).items() if key[0] == "Task"), key=lambda d: d["title"]
        )

    def check_lists(self) -> None:
        """Projects whole; Tasks with n ≥ 1 sorted by title, the first three of them, populated, with the
        exact count of all."""
        for viewer in self.viewers():
            who = self.who(viewer)
            projects = self.server.ok(who, "GET", self.path("Project"), params={"sort": "name"})
            want = {key[1] for key in self.ref.visible(viewer) if key[0] == "Project"}
            assert {d["_id"] for d in projects["documents"]} == want and projects["count"] == len(want), (
                viewer,
                projects,
                want,
            )
            listed = self.server.ok(
                who, "GET", self.path("Task"), params={"sort": "title", "n[$gte]": 1, "limit": 3, "populate": "project"}
            )
            matching = [doc for doc in self.tasks(viewer) if doc["n"] >= 1]
            assert [d["_id"] for d in listed["documents"]] == [d["_id"] for d in matching[:3]], (
                viewer,
                listed,
                matching,
            )
            assert listed["count"] == len(matching), (viewer, listed["count"], len(matching))
            for doc in listed["documents"]:
                project = self.ref.docs[("Task", doc["_id"])].get("project")
                if project is not None and self.ref.may(viewer, "read", ("Project", project)):
                    assert doc["project"] == self.ref.docs[("Project", project)], (viewer, doc)
                else:
                    assert doc.get("project") == project, (viewer, doc)  # unreadable: its bare id

    def check_gets(self) -> None:
        keys = self.ordered(self.ref.docs)
        if not keys:
            return
        key = keys[self.step % len(keys)]
        for viewer in self.viewers():
            answer = self.server.call(self.who(viewer), "GET", self.path(*key))
            if self.ref.may(viewer, "read", key):
                assert answer.status_code == 200 and answer.json() == self.ref.docs[key], (viewer, key, answer.text)
            else:
                assert answer.status_code == 404, (viewer, key, answer.text)

    def check_search(self) -> None:
        for viewer in self.viewers():
            found = self.server.ok(self.who(viewer), "GET", self.path("Task"), params={"search": "alpha"})
            want = {doc["_id"] for doc in self.tasks(viewer) if doc["title"].startswith("alpha")}
            assert {d["_id"] for d in found["documents"]} == want and found["count"] == len(want), (viewer, found, want)

    def check_graphql(self) -> None:
        """Both lists in one query, Tasks filtered and sorted with their project resolved (null when the
        viewer may not read it, as a GraphQL object cannot be a bare id) and their exact count."""
        project, task = self.names["Project"], self.names["Task"]
        where = "where: {n_gte: 1}"
        text = f'{{ {project} {{ _id }} {task}(sort: "title", {where}) {{ _id project {{ _id }} }} {task}__count({where}) }}'
        for viewer in self.viewers():
            answer = self.server.ok(self.who(viewer), "POST", "/graphql", json={"query": text})
            assert "errors" not in answer, answer
            data = answer["data"]
            projects = {key[1] for key in self.ref.visible(viewer) if key[0] == "Project"}
            tasks = [
                {"_id": doc["_id"], "project": {"_id": doc["project"]} if doc.get("project") in projects else None}
                for doc in self.tasks(viewer)
                if doc["n"] >= 1
            ]
            assert {d["_id"] for d in data[project]} == projects, (viewer, data, projects)
            assert data[task] == tasks and data[f"{task}__count"] == len(tasks), (viewer, data, tasks)

    def check_aggregate(self) -> None:
        for viewer in self.viewers():
            answer = self.server.ok(
                self.who(viewer), "GET", self.path("Task") + "/aggregate", params={"groupBy": "n", "count": "true"}
            )
            got = {group["key"]["n"]: group["count"] for group in answer["groups"]}
            want = collections.Counter(doc["n"] for doc in self.tasks(viewer))
            assert got == dict(want), (viewer, answer, want)

    def check_endpoint(self) -> None:
        for viewer in self.viewers():
            answer = self.server.ok(
                self.who(viewer), "GET", f"/database/function/{self.endpoints['list']}", params={"min": 2}
            )
            want = {doc["_id"] for doc in self.tasks(viewer) if doc["n"] >= 2}
            assert {d["_id"] for d in answer["documents"]} == want and answer["count"] == len(want), (
                viewer,
                answer,
                want,
            )

    def check_scopes(self) -> None:
        """Each user lists Tasks as each team it counts among (the team's own grants only), and is refused
        a team it is not in."""
        for user in self.ordered(self.ref.users):
            for team in self.ordered(self.ref.parent):
                answer = self.server.call(self.who(user), "GET", self.path("Task"), params={"scope": f"Team:{team}"})
                if team not in self.ref.teams_of(user):
                    assert answer.status_code == 403, (user, team, answer.text)
                    continue
                assert answer.status_code == 200, answer.text
                want = {doc["_id"] for doc in self.tasks(("scope", user, team))}
                assert {d["_id"] for d in answer.json()["documents"]} == want, (user, team, answer.json(), want)

    def _check_replays(self) -> None:
        """A replay from the start brings each viewer there from the start exactly what came live."""
        for viewer in sorted(self.replayable & set(self.subscribers), key=str):
            auth = (
                MASTER
                if viewer == ADMIN
                else None
                if viewer == ANONYMOUS
                else {"token": self.accounts[viewer].access_token}
            )
            replay = Subscriber(self.server.url, auth, self.names, since=0)
            try:
                wait_for({viewer: replay}, {viewer: self.expected[viewer]}, f"the replay of {viewer}")
            finally:
                replay.close()


@pytest.fixture(scope="module")
def server(module_live_server):
    response = requests.put(f"{module_live_server.url}/config/authentication", json=TEAMS, headers=MASTER, timeout=WAIT)
    assert response.status_code == 200, response.text
    return module_live_server


def test_every_read_path_agrees_with_the_model(server):
    AccessModel.server = Server(server.url)
    options = settings(
        max_examples=EXAMPLES,
        stateful_step_count=STEPS,
        deadline=None,
        derandomize=not SOAK,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=PHASES,
    )
    deadline = time.monotonic() + SOAK_MINUTES * 60
    run_state_machine_as_test(AccessModel, settings=options)
    while SOAK and time.monotonic() < deadline:  # rounds of new random runs until the time is up
        run_state_machine_as_test(AccessModel, settings=options)
    print(f"access model: {AccessModel.runs} runs, {AccessModel.steps_run} steps, none refuted")
