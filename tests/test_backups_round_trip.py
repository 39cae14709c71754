"""The round-trip property of backups: whatever state the API can build, a restore gives back exactly what
every administrator and every user read at the backup, on the same database and across databases.

Each example builds a random state through the HTTP API — users; team trees whose names repeat at other
levels; documents of several schemas (searchable, unique, under access control with owners, team scopes,
field-backed and inherited relations); grants to `User`, `Team`, `User:*` and `*`; files; uploads in
progress (tus); webhook deliveries; the email outbox — reads everything, backs up, changes things, restores
and reads again. Examples start from one restored base state, so each is independent of the others.

In the normal suite each test runs a few examples (about a minute per database in all). With
``TRELLIS_SOAK=1`` (``make soak`` sets it and runs the tests marked ``soak``) Hypothesis runs many more,
and shrinks what it finds. A counterexample found here becomes a plain regression test:
``tests/test_backups_teams.py`` (team trees), ``tests/test_backups_uploads.py`` (continuing an upload in
progress after a restore, which those tests finish; the reads here compare its ``HEAD``).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, event, example, given, settings
from hypothesis import strategies as st

from trellis.testing.plugin import database_kind
from trellis_authentication.testing import UserAccount, create_user_with_client

from .backup_apps import ADMIN, backup, make_app, restore  # noqa: F401  (the fixture)

SOAK = os.environ.get("TRELLIS_SOAK") == "1"
pytestmark = [pytest.mark.long, pytest.mark.soak]


def _settings(examples: int, soak_examples: int) -> settings:
    return settings(
        max_examples=soak_examples if SOAK else examples,
        deadline=None,
        database=None,  # nothing written into the working tree; a failure prints its example
        # The normal suite's budget has no room for shrinking (each step restores twice): it reports the
        # example as found. A soak run shrinks it.
        phases=list(Phase) if SOAK else [Phase.explicit, Phase.reuse, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


WORDS = ("alpha", "beta", "gamma", "delta")
TEAM_NAMES = ("X", "Design", "Ops")
SCHEMAS: dict[str, dict[str, Any]] = {
    "Note": {
        "fields": {"text": {"type": "String", "searchable": True}, "code": {"type": "String", "unique": True}},
        "modelOptions": {"search": {"language": "english"}, "conduit": {"authorization": {"enabled": True}}},
    },
    "Project": {
        "fields": {"name": {"type": "String", "searchable": True}},
        "modelOptions": {"conduit": {"authorization": {"enabled": True}}},
    },
    "Task": {
        "fields": {
            "title": "String",
            "project": {"type": "Relation", "model": "Project"},
            "assignee": {"type": "Relation", "model": "User"},
        },
        "modelOptions": {"conduit": {"authorization": {"enabled": True, "fields": {"assignee": "editor"}}}},
    },
    "Plain": {
        "fields": {"title": {"type": "String", "searchable": True}, "sku": {"type": "String", "unique": True}},
        "modelOptions": {"search": {"language": "english"}},
    },
}
INHERITED = {
    "read": ["reader", "editor", "owner", "project->read"],
    "edit": ["editor", "owner"],
    "delete": ["owner"],
    "share": ["owner"],
}


class _Receiver(BaseHTTPRequestHandler):
    """A webhook target that accepts every delivery, so none is left to retry while the test reads."""

    def do_POST(self) -> None:  # noqa: N802  (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def receiver() -> Any:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()
    server.server_close()


# ---- plans: what an example builds, drawn by Hypothesis ----------------------------------------------------

index = st.integers(min_value=0, max_value=7)
words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)
plans = st.fixed_dictionaries(
    {
        "users": st.integers(min_value=1, max_value=3),
        # (creator, name, parent: an earlier team or none)
        "teams": st.lists(st.tuples(index, st.sampled_from(TEAM_NAMES), st.none() | index), max_size=6),
        "members": st.lists(st.tuples(index, index, st.sampled_from(["member", "owner"])), max_size=3),
        # (schema, creator: a user or the admin, in a team's scope?, words, unique key, related)
        "documents": st.lists(
            st.tuples(st.sampled_from(sorted(SCHEMAS)), st.none() | index, st.booleans(), words, index, index),
            max_size=8,
        ),
        # (document, subject kind, subject, relation)
        "grants": st.lists(
            st.tuples(
                index, st.sampled_from(["User", "Team", "User:*", "*"]), index, st.sampled_from(["reader", "editor"])
            ),
            max_size=4,
        ),
        "files": st.lists(st.tuples(index, st.binary(min_size=1, max_size=300)), max_size=3),
        "uploads": st.lists(st.tuples(index, st.integers(min_value=0, max_value=40)), max_size=2),
        "pings": st.integers(min_value=0, max_value=2),
        "emails": st.lists(words, max_size=2),
    }
)


# A plan with something of every kind, run first by every test: a root team and a sub-team both named X;
# sub-teams named Design under two teams; a task assigned to another user inside a project shared with a
# third (field-backed and inherited relations); a note in a team's scope; grants to a user, a team, User:*
# and *; a unique key used twice; files, uploads in progress, webhook deliveries, the email outbox.
EVERY_KIND: dict[str, Any] = {
    "users": 3,
    "teams": [(0, "X", None), (0, "X", 0), (1, "Ops", None), (0, "Design", 0), (0, "Design", 2)],
    "members": [(2, 0, "member"), (1, 2, "owner")],
    "documents": [
        ("Project", 0, False, "alpha beta", 0, 0),
        ("Task", 0, False, "gamma", 1, 1),
        ("Note", 1, True, "alpha", 2, 2),
        ("Note", 2, False, "beta delta", 3, 0),
        ("Plain", None, False, "alpha", 4, 0),
        ("Plain", 0, False, "gamma", 4, 0),
    ],
    "grants": [(0, "User", 2, "reader"), (2, "Team", 0, "editor"), (3, "User:*", 0, "reader"), (3, "*", 0, "reader")],
    "files": [(0, b"hello"), (1, bytes(range(200)))],
    "uploads": [(0, 10), (2, 0)],
    "pings": 2,
    "emails": ["alpha", "beta gamma"],
}
LATER: dict[str, Any] = {
    "users": 1,
    "teams": [(0, "X", None), (0, "Design", 1)],
    "members": [(0, 0, "member")],
    "documents": [("Note", 0, False, "delta", 5, 0), ("Plain", None, False, "beta", 6, 0)],
    "grants": [(1, "*", 0, "editor")],
    "files": [(0, b"later")],
    "uploads": [(0, 5)],
    "pings": 1,
    "emails": ["delta"],
}


@dataclass
class World:
    """What an example made, to read it back: the ids the reads visit."""

    users: list[UserAccount] = field(default_factory=list)
    teams: list[tuple[str, int]] = field(default_factory=list)  # (id, owner)
    documents: list[tuple[str, str]] = field(default_factory=list)  # (schema, id)
    files: list[tuple[int, str]] = field(default_factory=list)
    uploads: list[tuple[int, str]] = field(default_factory=list)  # (creator, location)
    webhook: str = ""


def _pick(items: list[Any], at: int | None) -> Any:
    return None if at is None or not items else items[at % len(items)]


def _ok(answer: Any, *allowed: int) -> Any:
    assert answer.status_code in allowed, (answer.status_code, answer.get_json(silent=True))
    return answer.get_json(silent=True)


def _base(app: Any, target: str, path: Path) -> str:
    """The state every example starts from: the schemas, teams on, a webhook to ``target``; backed up to
    ``path``. Returns the webhook's id."""
    client = app.test_client()
    _ok(
        client.put(
            "/config/authentication", headers=ADMIN, json={"teams": {"enabled": True, "allowAddWithoutInvite": True}}
        ),
        200,
    )
    _ok(client.put("/config/webhooks", headers=ADMIN, json={"allowPrivateTargets": True}), 200)
    for name, body in SCHEMAS.items():
        _ok(client.post("/admin/database/schemas", headers=ADMIN, json={"name": name, **body}), 201)
    _ok(client.patch("/admin/authorization/resources/Task", headers=ADMIN, json={"permissions": INHERITED}), 200)
    hook = {"url": target, "events": ["authentication.user.block"], "description": "round trip"}
    webhook = _ok(client.post("/admin/webhooks", headers=ADMIN, json=hook), 201)["_id"]
    backup(app, path)
    return webhook


def build(app: Any, plan: dict[str, Any], world: World) -> None:
    """Make the plan's state through the API (answers a plan cannot have, such as a 409 for a name taken
    under the same parent, are part of it: what stands is what is read)."""
    client = app.test_client()
    start = len(world.users)
    for _ in range(plan["users"]):
        world.users.append(create_user_with_client(client))
    users = world.users[start:] or world.users
    for creator, name, parent in plan["teams"]:
        above = _pick(world.teams, parent)
        owner = above[1] if above else creator % len(world.users)
        body = {"name": name, "parentTeam": above[0] if above else None}
        made = client.post("/authentication/teams", headers=world.users[owner].headers, json=body)
        if _ok(made, 201, 409) and made.status_code == 201:
            world.teams.append((made.get_json()["_id"], owner))
    for team_at, user_at, role in plan["members"]:
        team = _pick(world.teams, team_at)
        if team is not None:
            joiner = _pick(world.users, user_at)
            body = {"userId": joiner.id, "role": role}
            _ok(
                client.post(f"/authentication/teams/{team[0]}/add", headers=world.users[team[1]].headers, json=body),
                201,
                409,
            )
    for schema, creator, scoped, text, key, related in plan["documents"]:
        _document(client, world, users, schema, creator, scoped, text, key, related)
    for doc_at, kind, subject_at, relation in plan["grants"]:
        document = _pick(world.documents, doc_at)
        if document is None or document[0] == "Plain":
            continue
        subject = {"User": f"User:{_pick(world.users, subject_at).id}", "User:*": "User:*", "*": "*"}.get(kind)
        if kind == "Team":
            team = _pick(world.teams, subject_at)
            subject = f"Team:{team[0]}" if team else None
        if subject is not None:
            body = {"subject": subject, "relation": relation, "resource": f"{document[0]}:{document[1]}"}
            _ok(client.post("/admin/authorization/relations", headers=ADMIN, json=body), 201, 409)
    for owner_at, data in plan["files"]:
        owner = owner_at % len(world.users)
        sent = {"file": (io.BytesIO(data), f"f{len(world.files)}.bin")}
        made = _ok(client.post("/storage/upload", headers=world.users[owner].headers, data=sent), 201)
        world.files.append((owner, made["id"]))
    for owner_at, sent in plan["uploads"]:
        owner = owner_at % len(world.users)
        world.uploads.append((owner, _upload_in_progress(client, world.users[owner], sent)))
    for _ in range(plan["pings"]):
        _ok(client.post(f"/admin/webhooks/{world.webhook}/ping", headers=ADMIN), 200)
    for text in plan["emails"]:
        body = {"to": "someone@example.com", "subject": text, "body": f"{text}\n"}
        _ok(client.post("/email/send", headers=ADMIN, json=body), 200)


def _document(
    client: Any,
    world: World,
    users: list[UserAccount],
    schema: str,
    creator: int | None,
    scoped: bool,
    text: str,
    key: int,
    related: int,
) -> None:
    if schema == "Plain":
        body: dict[str, Any] = {"title": text, "sku": f"k{key}"}
    elif schema == "Note":
        body = {"text": text, "code": f"c{key}"}
    elif schema == "Project":
        body = {"name": text}
    else:
        project = _pick([d for d in world.documents if d[0] == "Project"], related)
        body = {"title": text, "assignee": _pick(world.users, related).id}
        if project is not None:
            body["project"] = project[1]
    who = ADMIN if creator is None and schema == "Plain" else _pick(users, creator or 0).headers
    path = f"/database/{schema}"
    mine = [team for team, owner in world.teams if world.users[owner].headers == who]
    if scoped and mine and schema != "Plain":
        path += f"?scope=Team:{mine[key % len(mine)]}"
    made = client.post(path, headers=who, json=body)
    if _ok(made, 201, 400, 409) and made.status_code == 201:  # 409: a unique key taken; 400: a hidden project
        world.documents.append((schema, made.get_json()["_id"]))


def _tus(user: UserAccount, **headers: str) -> dict[str, str]:
    return {**user.headers, "Tus-Resumable": "1.0.0", **headers}


def _upload_in_progress(client: Any, user: UserAccount, sent: int) -> str:
    """A tus upload of 64 bytes with ``sent`` of them stored (never all: it stays in progress)."""
    name = base64.b64encode(b"partial.bin").decode()
    made = client.post(
        "/storage/uploads", headers=_tus(user, **{"Upload-Length": "64", "Upload-Metadata": f"filename {name}"})
    )
    _ok(made, 201)
    location = made.headers["Location"]
    if sent:
        headers = _tus(user, **{"Upload-Offset": "0", "Content-Type": "application/offset+octet-stream"})
        _ok(client.patch(location, headers=headers, data=bytes(range(sent))), 204)
    return location


def change(app: Any, world: World, plan: dict[str, Any]) -> None:
    """After the backup: more of everything, and some of what was there deleted."""
    client = app.test_client()
    later = World(users=list(world.users), teams=list(world.teams), webhook=world.webhook)
    build(app, plan, later)
    if world.documents:
        schema, doc = world.documents[0]
        _ok(client.delete(f"/database/{schema}/{doc}", headers=ADMIN), 200)
    if world.teams:
        team, owner = world.teams[-1]
        _ok(client.delete(f"/authentication/teams/{team}", headers=world.users[owner].headers), 200, 404)
    if world.files:
        _ok(client.delete(f"/storage/file/{world.files[0][1]}", headers=ADMIN), 200)
    for owner, location in world.uploads[:1]:
        _ok(client.delete(location, headers=_tus(world.users[owner])), 204)
    if world.users:
        _ok(client.delete(f"/authentication/users/{world.users[-1].id}", headers=ADMIN), 200)


# ---- reads: everything an administrator and each user can see ----------------------------------------------


def _get(client: Any, path: str, headers: dict[str, str]) -> tuple[int, Any]:
    answer = client.get(path, headers=headers)
    body = answer.get_json(silent=True)
    if isinstance(body, dict):
        body.pop("requestId", None)  # an error's: each request has its own
    return answer.status_code, body


def reads(app: Any, world: World) -> dict[str, Any]:
    client = app.test_client()
    for what in ("users", "teams", "documents", "files", "uploads"):  # --hypothesis-show-statistics
        event(f"{what}: {len(getattr(world, what))}")
    seen: dict[str, Any] = {"admin": _reads_of(client, world, ADMIN)}
    for i, user in enumerate(world.users):
        seen[f"user {i}"] = {
            "user": _get(client, "/authentication/user", user.headers),
            "teams": _teams_of(client, user),
            **_reads_of(client, world, user.headers),
            "uploads": [
                _upload_state(client, world, user, location)
                for owner, location in world.uploads
                if world.users[owner] is user
            ],
        }
    return seen


def _reads_of(client: Any, world: World, who: dict[str, str]) -> dict[str, Any]:
    admin = who is ADMIN
    seen: dict[str, Any] = {}
    for schema in SCHEMAS:
        seen[f"{schema} list"] = _get(client, f"/database/{schema}?limit=1000&sort=_id", who)
        if schema != "Task":
            seen[f"{schema} search"] = [
                _get(client, f"/database/{schema}?search={word}&sort=_id", who) for word in WORDS[:2]
            ]
    for schema, doc in world.documents:
        seen[f"{schema} {doc}"] = _get(client, f"/database/{schema}/{doc}", who)
        if schema != "Plain":
            seen[f"{schema} {doc} grants"] = _get(client, f"/database/{schema}/{doc}/grants", who)
    for _, file in world.files:
        seen[f"file {file}"] = _get(client, f"/storage/file/{file}", who)
        downloaded = client.get(f"/storage/download/{file}", headers=who)
        content = hashlib.sha256(downloaded.data).hexdigest() if downloaded.status_code == 200 else None
        seen[f"file {file} bytes"] = (downloaded.status_code, content)
    if admin:
        seen["users"] = _get(client, "/authentication/users?limit=1000", who)
        seen["schemas"] = _get(client, "/admin/database/schemas", who)
        seen["grants"] = _get(client, "/admin/authorization/relations?limit=1000", who)
        seen["files"] = _get(client, "/admin/storage/files?limit=1000", who)
        seen["webhooks"] = _get(client, "/admin/webhooks", who)
        seen["deliveries"] = _get(client, f"/admin/webhooks/{world.webhook}/deliveries?limit=1000", who)
        seen["outbox"] = _get(client, "/admin/email/outbox?limit=1000", who)
    return seen


def _teams_of(client: Any, user: UserAccount) -> dict[str, Any]:
    listed = _get(client, "/authentication/teams?limit=100", user.headers)
    seen: dict[str, Any] = {"teams": listed}
    pending = [team["_id"] for team in (listed[1] or {}).get("teams", [])]
    while pending:
        team = pending.pop()
        if team in seen:
            continue
        below = _get(client, f"/authentication/teams/{team}/teams?limit=100", user.headers)
        members = _get(client, f"/authentication/teams/{team}/members?limit=100", user.headers)
        seen[team] = (below, members)
        pending.extend(sub["_id"] for sub in (below[1] or {}).get("teams", []))
    return seen


def _upload_state(client: Any, world: World, user: UserAccount, location: str) -> tuple[int, dict[str, str]]:
    answer = client.head(location, headers=_tus(user))
    kept = ("Upload-Offset", "Upload-Length", "Upload-Metadata", "Upload-Expires")
    return answer.status_code, {name: answer.headers.get(name, "") for name in kept}


def _differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The reads that differ, named (a whole dict compared at once says too little to act on)."""
    found = []
    for who in sorted(set(before) | set(after)):
        mine, theirs = before.get(who, {}), after.get(who, {})
        for key in sorted(set(mine) | set(theirs)):
            if mine.get(key) != theirs.get(key):
                found.append(
                    f"{who} / {key}:\n  at the backup: {mine.get(key)!r}\n  restored:      {theirs.get(key)!r}"
                )
    return found


def _same(before: dict[str, Any], after: dict[str, Any]) -> None:
    differences = _differences(before, after)
    assert not differences, "\n".join(differences[:10])


# ---- the properties -----------------------------------------------------------------------------------------


def test_a_restore_gives_back_every_read_of_the_backup(make_app, tmp_path, receiver):
    app = make_app(database_kind())
    blank = tmp_path / "base.zip"
    webhook = _base(app, receiver, blank)
    runs = iter(range(10**9))

    @_settings(examples=3, soak_examples=200)
    @given(plan=plans, later=plans)
    @example(plan=EVERY_KIND, later=LATER)
    def round_trip(plan: dict[str, Any], later: dict[str, Any]) -> None:
        restore(app, blank)
        world = World(webhook=webhook)
        build(app, plan, world)
        before = reads(app, world)
        archive = tmp_path / f"run-{next(runs)}.zip"
        backup(app, archive)
        change(app, world, later)
        restore(app, archive)
        _same(before, reads(app, world))

    round_trip()


def test_a_backup_restores_on_the_other_database_and_back(make_app, tmp_path, receiver):
    """Made on this run's database, restored on the other one, read there; backed up there and restored
    back here over a changed state."""
    kind = database_kind()
    here = make_app(kind)
    there = make_app("postgresql" if kind == "sqlite" else "sqlite")
    blank = tmp_path / "base.zip"
    webhook = _base(here, receiver, blank)
    runs = iter(range(10**9))

    @_settings(examples=1, soak_examples=100)
    @given(plan=plans, later=plans)
    @example(plan=EVERY_KIND, later=LATER)
    def across(plan: dict[str, Any], later: dict[str, Any]) -> None:
        restore(here, blank)
        world = World(webhook=webhook)
        build(here, plan, world)
        before = reads(here, world)
        run = next(runs)
        archive, back = tmp_path / f"here-{run}.zip", tmp_path / f"there-{run}.zip"
        backup(here, archive)
        restore(there, archive)
        _same(before, reads(there, world))
        backup(there, back)
        change(here, world, later)
        restore(here, back)
        _same(before, reads(here, world))

    across()
