"""Restoring tables that reference themselves (team trees), and restores the database refuses: the error
names the table and the row, and the previous state stays. On SQLite and PostgreSQL alike."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from trellis.backups import restore as backups_restore
from trellis.errors import APIError
from trellis.testing.plugin import database_kind
from trellis_authentication.testing import UserAccount, create_user_with_client

from .backup_apps import ADMIN, backup, make_app, restore  # noqa: F401  (the fixture)

TEAMS = "/authentication/teams"


def _teams_on(app: Any) -> Any:
    client = app.test_client()
    body = {"teams": {"enabled": True, "allowAddWithoutInvite": True}}
    assert client.put("/config/authentication", headers=ADMIN, json=body).status_code == 200
    return client


def _team(client: Any, owner: UserAccount, name: str, parent: str | None = None) -> str:
    made = client.post(TEAMS, headers=owner.headers, json={"name": name, "parentTeam": parent})
    assert made.status_code == 201, made.get_json()
    return made.get_json()["_id"]


def _tree(client: Any, who: UserAccount) -> dict[str, Any]:
    """What ``who`` sees of the teams: their list, and every team's sub-teams below it."""
    listed = client.get(f"{TEAMS}?limit=100", headers=who.headers).get_json()
    seen: dict[str, Any] = {"teams": listed}
    pending = [team["_id"] for team in listed["teams"]]
    while pending:
        team = pending.pop()
        below = client.get(f"{TEAMS}/{team}/teams?limit=100", headers=who.headers).get_json()
        seen[team] = below
        pending.extend(sub["_id"] for sub in below["teams"])
    return seen


def test_team_trees_with_names_repeated_at_other_levels_restore(make_app, tmp_path):
    """A sub-team named like a root team, and sub-teams of one name under two parents."""
    app = make_app(database_kind())
    client = _teams_on(app)
    owner = create_user_with_client(client)
    x = _team(client, owner, "X")
    inner = _team(client, owner, "X", x)
    _team(client, owner, "X", inner)
    for department in ("Sales", "Support"):
        _team(client, owner, "Design", _team(client, owner, department))
    member = create_user_with_client(client)
    assert client.post(f"{TEAMS}/{inner}/add", headers=owner.headers, json={"userId": member.id}).status_code == 201
    before = (_tree(client, owner), _tree(client, member))
    archive = tmp_path / "teams.zip"
    backup(app, archive)
    assert client.delete(f"{TEAMS}/{x}", headers=owner.headers).status_code == 200
    _team(client, owner, "Design")
    restore(app, archive)
    assert (_tree(client, owner), _tree(client, member)) == before
    assert len(before[0]["teams"]["teams"]) == 7 and len(before[1]["teams"]["teams"]) == 1
    # New writes keep the rules: a second root "X" is refused, a second "X" under the first too.
    assert client.post(TEAMS, headers=owner.headers, json={"name": "X"}).status_code == 409
    assert client.post(TEAMS, headers=owner.headers, json={"name": "X", "parentTeam": x}).status_code == 409


def _rewritten(source: Path, target: Path, table: str, change: Callable[[list[str], list[list[Any]]], Any]) -> None:
    """A copy of the archive whose ``table`` rows ``change(columns, rows)`` edits in place, its manifest's
    checksum and count updated: an archive that verifies, whose rows the database will refuse."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as new:
        manifest = json.loads(old.read("manifest.json"))
        for info in old.infolist():
            if info.filename == "manifest.json":
                continue
            data = old.read(info.filename)
            if info.filename == f"tables/{table}.jsonl":
                header, *lines = data.decode().splitlines()
                rows = [json.loads(line) for line in lines]
                change(json.loads(header)["columns"], rows)
                data = "".join(line + "\n" for line in [header, *(json.dumps(r) for r in rows)]).encode()
                entry = next(t for t in manifest["tables"] if t["name"] == table)
                entry["sha256"], entry["rows"] = hashlib.sha256(data).hexdigest(), len(rows)
            new.writestr(info, data)
        new.writestr("manifest.json", json.dumps(manifest))


def _counts(app: Any) -> dict[str, int]:
    from trellis.backups import tables

    with app.extensions["trellis"].engine.connect() as connection:
        names = [
            t.name for t in tables.model_tables(connection) if t.name not in (tables.EVENTS, tables.PENDING_EVENTS)
        ]
        return {n: connection.execute(sa.select(sa.func.count()).select_from(sa.table(n))).scalar() for n in names}


def _upload(app: Any, archive: Path) -> None:
    uploaded = app.test_client().post(
        "/admin/backups/upload", headers=ADMIN, data={"file": (io.BytesIO(archive.read_bytes()), archive.name)}
    )
    assert uploaded.status_code == 201, uploaded.get_json()


def _refused_through_the_routes(app: Any, archive: Path) -> str:
    """Restore the uploaded ``archive`` through the admin routes; the restore's recorded error."""
    from trellis.testing.waiting import wait_until

    client = app.test_client()
    assert client.post(f"/admin/backups/{archive.name}/restore", headers=ADMIN).status_code == 202

    def finished() -> dict[str, Any] | None:
        state = client.get("/admin/backups", headers=ADMIN).get_json()["restore"]
        return state if state and state["status"] != "running" else None

    state = wait_until(finished, "the restore has finished", timeout=60)
    assert state["status"] == "failed", state
    return state["error"]


@pytest.mark.parametrize("fault", ["duplicate root name", "missing parent"])
def test_a_row_the_database_refuses_is_named_and_the_previous_state_stays(make_app, tmp_path, fault):
    app = make_app(database_kind())
    client = _teams_on(app)
    owner = create_user_with_client(client)
    first, second = _team(client, owner, "First"), _team(client, owner, "Second")
    _team(client, owner, "Below", second)
    good = tmp_path / "good.zip"
    backup(app, good)

    def damage(columns: list[str], rows: list[list[Any]]) -> None:
        at_id, at_name, at_parent = columns.index("id"), columns.index("name"), columns.index("parent_id")
        culprit = next(r for r in rows if r[at_id] == second)
        if fault == "duplicate root name":
            culprit[at_name] = "First"
        else:
            culprit[at_parent] = "0" * 32

    bad = tmp_path / "bad.zip"
    _rewritten(good, bad, "auth_teams", damage)
    _upload(app, bad)
    # The state moves on: it must be what stays.
    assert client.delete(f"{TEAMS}/{first}", headers=owner.headers).status_code == 200
    _team(client, owner, "Later")
    counts, tree = _counts(app), _tree(client, owner)

    with pytest.raises(APIError) as refused:
        restore(app, bad)
    assert refused.value.status == 400
    message = refused.value.message
    assert "auth_teams" in message and f"id={second}" in message, message
    assert _counts(app) == counts and _tree(client, owner) == tree
    error = _refused_through_the_routes(app, bad)
    assert "auth_teams" in error and f"id={second}" in error, error
    assert "First" not in error  # the database's detail quoting the row's values is left out
    assert _counts(app) == counts and _tree(client, owner) == tree
    restore(app, good)  # and the archive as it was restores
    assert "First" in {t["name"] for t in _tree(client, owner)["teams"]["teams"]}


def _table() -> sa.Table:
    return sa.Table(
        "tree",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("parent", sa.Integer, sa.ForeignKey("tree.id"), nullable=True),
    )


def test_rows_go_parents_first_and_a_cycle_is_cut_once():
    table = _table()
    # Children before their parents in the archive; a deep chain; a row pointing to itself; a missing parent.
    rows = [{"id": i, "parent": i + 1 if i < 50 else None} for i in range(1, 51)]
    rows += [{"id": 100, "parent": 100}, {"id": 101, "parent": 999}, {"id": 102, "parent": 1}]
    ordered, later = backups_restore._parents_first(table, [dict(r) for r in rows])
    assert later == [] and sorted(r["id"] for r in ordered) == sorted(r["id"] for r in rows)
    position = {r["id"]: i for i, r in enumerate(ordered)}
    for row in ordered:
        if row["parent"] in position and row["parent"] != row["id"]:
            assert position[row["parent"]] < position[row["id"]], row
    assert {r["id"]: r["parent"] for r in ordered} == {r["id"]: r["parent"] for r in rows}
    # A cycle (1 → 2 → 3 → 1): one reference is written NULL, then set by an update.
    cycle = [{"id": 1, "parent": 2}, {"id": 2, "parent": 3}, {"id": 3, "parent": 1}]
    ordered, later = backups_restore._parents_first(table, [dict(r) for r in cycle])
    assert len(later) == 1 and sum(r["parent"] is None for r in ordered) == 1
    nulled = next(r for r in ordered if r["parent"] is None)
    assert later == [{"pk_id": nulled["id"], "parent": next(c for c in cycle if c["id"] == nulled["id"])["parent"]}]
    position = {r["id"]: i for i, r in enumerate(ordered)}
    assert all(position[r["parent"]] < position[r["id"]] for r in ordered if r["parent"] is not None)


def test_after_a_restore_the_administrators_and_passwords_are_the_archives(make_app, tmp_path):
    """What the console's backups page and docs/operations.md tell a newcomer restoring onto a fresh server."""
    from trellis.testing.plugin import TEST_ADMIN

    made = make_app(database_kind())
    with made.app_context():
        runner = made.test_cli_runner()
        changed = runner.invoke(args=["trellis", "admin", "reset-password", TEST_ADMIN[0]], input="archived-pw-1\n" * 2)
    assert changed.exit_code == 0, changed.output
    archive = tmp_path / "admins.zip"
    backup(made, archive)
    fresh = make_app(database_kind())
    client = fresh.test_client()
    signed = client.post("/login", headers=ADMIN, json={"username": TEST_ADMIN[0], "password": TEST_ADMIN[1]})
    assert signed.status_code == 200, signed.get_json()
    token = {"Authorization": f"Bearer {signed.get_json()['token']}"}
    with fresh.app_context():
        restored = fresh.test_cli_runner().invoke(args=["trellis", "backup", "restore", str(archive), "--yes"])
    assert restored.exit_code == 0 and "administrators and their passwords are now the archive's" in restored.output
    # The fresh server's password and its admin's session are gone; the archive's password and the master key work.
    old = client.post("/login", headers=ADMIN, json={"username": TEST_ADMIN[0], "password": TEST_ADMIN[1]})
    assert old.status_code == 401, old.get_json()
    assert client.get("/admin/backups", headers=token).status_code == 401
    again = client.post("/login", headers=ADMIN, json={"username": TEST_ADMIN[0], "password": "archived-pw-1"})
    assert again.status_code == 200, again.get_json()
    assert client.get("/admin/backups", headers=ADMIN).status_code == 200
    page = " ".join(client.get("/console/backups", headers=ADMIN).get_data(as_text=True).split())
    assert "After a restore, the administrators and their passwords are the archive's." in page
