"""Backups and restore (trellis.backups) against real databases: each test builds its own apps on fresh
databases, since a backup reads committed data through its own snapshot (the savepoint fixture's rows are
invisible to it). The tables checked are whatever the loaded modules declare, never a list kept here."""

from __future__ import annotations

import io
import json
import os
import threading
import uuid
import zipfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from trellis.backups import tables
from trellis.cache import REMEMBERED
from trellis.testing.plugin import database_kind

from .backup_apps import ADMIN, make_app  # noqa: F401  (the fixture)
from .backup_apps import backup as _backup
from .backup_apps import restore as _restore


def _fill(app: Any) -> dict[str, Any]:
    """A schema with documents, a user with a file, a module config: data of several modules."""
    client = app.test_client()
    made = client.post(
        "/admin/database/schemas",
        headers=ADMIN,
        json={"name": "Product", "fields": {"title": {"type": "String", "required": True}, "price": "Number"}},
    )
    assert made.status_code in (200, 201), made.get_json()
    for title, price in (("Pen", 2), ("Lamp", 9.5), ("Desk", 180)):
        assert client.post("/database/Product", headers=ADMIN, json={"title": title, "price": price}).status_code in (
            200,
            201,
        )
    account = {"email": "ann@example.com", "password": "ann-password-1"}
    assert client.post("/authentication/local/new", json=account).status_code in (200, 201)
    token = client.post("/authentication/local", json=account).get_json()["accessToken"]
    user = {"Authorization": f"Bearer {token}"}
    upload = client.post(
        "/storage/upload", headers=user, data={"file": (io.BytesIO(b"hello from a backup\n" * 500), "hello.txt")}
    )
    assert upload.status_code == 201, upload.get_json()
    assert client.put("/config/backups", headers=ADMIN, json={"keep": 3}).status_code == 200
    return {"file": upload.get_json()["id"], "user": user, "account": account}


def _products(app: Any) -> list[tuple[str, Any]]:
    found = app.test_client().get("/database/Product?sort=price", headers=ADMIN).get_json()["documents"]
    return [(d["title"], d["price"]) for d in found]


def _counts(app: Any) -> dict[str, int]:
    engine = app.extensions["trellis"].engine
    with app.app_context(), engine.connect() as connection:
        pending = tables.PENDING_EVENTS in sa.inspect(connection).get_table_names()  # not in an older database
    if pending:  # every committed event numbered first: the sequencer moves them meanwhile
        with app.app_context():
            log = app.extensions["trellis_events"]
            log.publish(log.sequence())
    with app.app_context(), engine.connect() as connection:
        found = tables.model_tables(connection)
        names = [t.name for t in found] + [
            t.table.name for t in tables.runtime_tables(app.extensions["trellis"].hooks.hook, connection)
        ]
        return {
            name: connection.execute(sa.select(sa.func.count()).select_from(sa.table(name))).scalar() for name in names
        }


def _latest_event(app: Any) -> int:
    from trellis import events

    with app.app_context():
        return events.latest()


def test_round_trip_of_every_module_and_file(make_app, tmp_path):
    app = make_app(database_kind())
    data = _fill(app)
    archive = tmp_path / "one.zip"
    manifest = _backup(app, archive)
    counts = _counts(app)
    # Every table of every loaded module is in the archive, with its row count, and nothing else.
    listed = {t["name"]: t["rows"] for t in manifest["tables"]}
    assert set(listed) == set(counts)
    log = ("core_events", "core_events_pending")  # the sequencer moves events between them meanwhile
    assert {name: listed[name] for name in counts if name not in log} == {
        name: n for name, n in counts.items() if name not in log
    }
    assert any(t.get("runtime") for t in manifest["tables"])  # the Product documents' own table
    assert [f["name"] for f in manifest["files"]] == [f"storage/{data['file']}"]

    client = app.test_client()
    before_latest = _latest_event(app)
    client.post("/database/Product", headers=ADMIN, json={"title": "Chair", "price": 40})
    pen = client.get("/database/Product?title=Pen", headers=ADMIN).get_json()["documents"][0]
    client.delete(f"/database/Product/{pen['_id']}", headers=ADMIN)
    assert client.delete(f"/storage/file/{data['file']}", headers=data["user"]).status_code in (200, 204)
    client.put("/config/backups", headers=ADMIN, json={"keep": 9})

    restored = _restore(app, archive)
    assert restored["files"] == 1
    assert _products(app) == [("Pen", 2), ("Lamp", 9.5), ("Desk", 180)]
    after = _counts(app)
    # The event log, its change counters and the cache generations are not copied back (a restore moves
    # them forward: it bumps every generation, those of the processes' remembered answers included).
    moved = ("core_events", "core_events_pending", "core_event_counters", "trellis_audit_log", tables.GENERATIONS)
    assert {n: c for n, c in after.items() if n not in moved} == {n: c for n, c in counts.items() if n not in moved}
    with app.app_context(), app.extensions["trellis"].engine.connect() as connection:
        bumped = set(connection.execute(sa.text(f"SELECT name FROM {tables.GENERATIONS}")).scalars())
    assert REMEMBERED <= bumped and "webhooks-active" in bumped  # though no webhook was ever written here
    download = client.get(f"/storage/download/{data['file']}", headers=data["user"])
    assert download.status_code == 200 and download.data == b"hello from a backup\n" * 500
    assert client.get("/config/backups", headers=ADMIN).get_json()["keep"] == 3
    # The user signs in with the restored account; the event log went on past every number it had used.
    assert client.post("/authentication/local", json=data["account"]).status_code == 200
    assert _latest_event(app) > before_latest
    client.post("/database/Product", headers=ADMIN, json={"title": "Stool", "price": 15})
    assert [t for t, _ in _products(app)] == ["Pen", "Lamp", "Stool", "Desk"]


@pytest.mark.parametrize(("source", "target"), [("sqlite", "postgresql"), ("postgresql", "sqlite")])
def test_restore_across_databases(make_app, tmp_path, source, target):
    first = make_app(source)
    data = _fill(first)
    archive = tmp_path / f"{source}.zip"
    _backup(first, archive)
    second = make_app(target)
    _restore(second, archive)
    _renewals_end()
    assert _products(second) == [("Pen", 2), ("Lamp", 9.5), ("Desk", 180)]
    client = second.test_client()
    token = client.post("/authentication/local", json=data["account"]).get_json()["accessToken"]
    download = client.get(f"/storage/download/{data['file']}", headers={"Authorization": f"Bearer {token}"})
    assert download.data == b"hello from a backup\n" * 500
    # Documents written after the restore are numbered and listed as on the source.
    assert client.post("/database/Product", headers=ADMIN, json={"title": "Lamp", "price": 1}).status_code == 201


def _renewals_end() -> None:
    """A finished restore's lock renewal (PostgreSQL) ends with it, not at its next wake 30 s later."""
    for thread in threading.enumerate():
        if thread.name == "trellis-lock-renewal":
            thread.join(5)
            assert not thread.is_alive()


def _damaged(archive: Path, folder: Path) -> dict[str, Path]:
    raw = archive.read_bytes()
    out = {"truncated": folder / "truncated.zip", "foreign": folder / "foreign.zip", "flipped": folder / "flipped.zip"}
    out["truncated"].write_bytes(raw[: len(raw) // 2])
    with zipfile.ZipFile(out["foreign"], "w") as foreign:
        foreign.writestr("readme.txt", "not a backup")
    with zipfile.ZipFile(archive) as source, zipfile.ZipFile(out["flipped"], "w") as flipped:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename.startswith("tables/database_schemas"):
                data = data.replace(b"Product", b"Produkt")
            flipped.writestr(info, data)
    newer = folder / "newer.zip"
    with zipfile.ZipFile(archive) as source, zipfile.ZipFile(newer, "w") as changed:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == "manifest.json":
                manifest = json.loads(data)
                manifest["heads"] = [*manifest["heads"], "core_9999"]
                data = json.dumps(manifest).encode()
            changed.writestr(info, data)
    out["newer"] = newer
    foreign = folder / "branch.zip"  # made by an installation with a module of its own, unknown here
    with zipfile.ZipFile(archive) as source, zipfile.ZipFile(foreign, "w") as changed:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == "manifest.json":
                manifest = json.loads(data)
                manifest["heads"] = [*manifest["heads"], "ledger_0002"]
                data = json.dumps(manifest).encode()
            changed.writestr(info, data)
    out["branch"] = foreign
    return out


def test_damaged_foreign_newer_and_foreign_branch_archives_are_refused(make_app, tmp_path):
    app = make_app(database_kind())
    _fill(app)
    archive = tmp_path / "good.zip"
    _backup(app, archive)
    client = app.test_client()
    client.post("/database/Product", headers=ADMIN, json={"title": "Chair", "price": 40})
    counts = _counts(app)
    for kind, path in _damaged(archive, tmp_path).items():
        answer = client.post(
            "/admin/backups/upload", headers=ADMIN, data={"file": (io.BytesIO(path.read_bytes()), f"{kind}.zip")}
        )
        assert answer.status_code == 400, (kind, answer.get_json())
        assert answer.get_json()["message"], kind
        if kind == "branch":  # a migration branch this installation does not have: says which
            assert "ledger_0002 are unknown here" in answer.get_json()["message"], answer.get_json()
        from trellis.errors import APIError

        with pytest.raises(APIError) as refused:
            _restore(app, path)
        assert refused.value.status == 400, kind
    assert client.get("/admin/backups", headers=ADMIN).get_json()["count"] == 1  # the CLI's, none uploaded
    assert _counts(app) == counts
    assert len(_products(app)) == 4


# Where an older release stopped: each later migration changes a table's shape (sessions gain their client
# columns; teams and resumable uploads arrive) or its data (database_0003 gives every document table its row
# of count epochs, from the schema records it finds).
OLDER = ("authentication_0003", "storage_0002", "database_0002")


def _make_older(app: Any, *revisions: str) -> list[str]:
    """Bring ``app``'s database, rows and all, down to ``revisions`` (each one branch's), as a release before
    them left it; returns its heads. The rows were written through the real routes at head (this code cannot
    write into older tables), the downgrades reshaped them. database_0003's count rows are removed: at
    database_0002 nothing made them, so their return shows that migration ran over the restored rows."""
    from trellis.backups import create
    from trellis.migrate import downgrade

    for revision in revisions:
        downgrade(app, revision)
    with app.extensions["trellis"].engine.begin() as connection:
        if "database_0002" in revisions:
            connection.exec_driver_sql("DELETE FROM database_count_epochs")
        return create.current_heads(connection)


def _change_counters(app: Any) -> dict[str, int]:
    """Every event family's change number (``trellis.events.change_number``: the sum of its counters)."""
    with app.extensions["trellis"].engine.connect() as connection:
        rows = connection.exec_driver_sql("SELECT family, sum(changes) FROM core_event_counters GROUP BY family")
        return {family: int(number) for family, number in rows}


def _storage_of(app: Any, schema: str) -> str:
    from trellis_database.models import SchemaRecord

    records = SchemaRecord.__table__
    with app.extensions["trellis"].engine.connect() as connection:
        storage = connection.execute(sa.select(records.c.storage).where(records.c.name == schema)).scalar_one()
    return storage["table"]


def _code_heads(app: Any) -> list[str]:
    from trellis.backups import lineage

    with app.app_context():
        return sorted(lineage.scripts(app).get_heads())


def test_an_archive_from_older_migrations_restores_then_migrates(make_app, serve, tmp_path):
    import requests

    from trellis.backups import create

    old = make_app(database_kind())
    data = _fill(old)
    heads = _make_older(old, *OLDER, "core_0005")  # core_0005: before the change counters' table
    assert set(OLDER) <= set(heads) and heads != _code_heads(old)
    with old.extensions["trellis"].engine.connect() as connection:
        sessions = connection.exec_driver_sql("SELECT count(*) FROM auth_sessions").scalar()
        assert "ip" not in {c["name"] for c in sa.inspect(connection).get_columns("auth_sessions")}
    products = _storage_of(old, "Product")
    archive = tmp_path / "older.zip"
    manifest = _backup(old, archive)
    assert manifest["heads"] == heads  # the database's heads, not the code's
    listed = {t["name"]: t["rows"] for t in manifest["tables"]}
    assert listed["auth_sessions"] == sessions >= 1 and "storage_uploads" not in listed

    new = make_app(database_kind())
    client = new.test_client()
    made = client.post("/admin/database/schemas", headers=ADMIN, json={"name": "Other", "fields": {"n": "Number"}})
    assert made.status_code in (200, 201)
    server = serve(new)  # another process, its caches primed with the state before
    assert requests.get(f"{server.url}/database/Other", headers=ADMIN, timeout=30).status_code == 200
    assert client.post("/database/Other", headers=ADMIN, json={"n": 1}).status_code == 201
    changes = _change_counters(new)
    assert changes
    with new.app_context():  # as `flask --app wsgi trellis backup restore` runs it
        restored = new.test_cli_runner().invoke(args=["trellis", "backup", "restore", str(archive), "--yes"])
    assert restored.exit_code == 0 and "then migrated to this release's heads" in restored.output, restored.output
    with new.extensions["trellis"].engine.connect() as connection:
        inspector = sa.inspect(connection)
        # At head again, with the archive's rows in the migrated shape.
        assert create.current_heads(connection) == _code_heads(new)
        assert {"ip", "user_agent"} <= {c["name"] for c in inspector.get_columns("auth_sessions")}
        assert {"auth_teams", "storage_uploads"} <= set(inspector.get_table_names())
        assert connection.exec_driver_sql("SELECT count(*) FROM auth_sessions WHERE ip IS NULL").scalar() == sessions
        counted = connection.exec_driver_sql("SELECT table_name, epoch, counted_until FROM database_count_epochs")
        # database_0003 ran over the restored schema records: the Product table has its row again.
        assert [tuple(row) for row in counted] == [(products, 0, None)]
    # The change counters' table was dropped and made again by the migrations: no number went back.
    after = _change_counters(new)
    assert all(after.get(family, 0) > number for family, number in changes.items()), (changes, after)
    # And the app serves it: documents, the account, its file; new writes go on.
    assert _products(new) == [("Pen", 2), ("Lamp", 9.5), ("Desk", 180)]
    names = {s["name"] for s in client.get("/admin/database/schemas", headers=ADMIN).get_json()["schemas"]}
    assert "Product" in names and "Other" not in names
    signed = client.post("/authentication/local", json=data["account"])
    assert signed.status_code == 200, signed.get_json()
    user = {"Authorization": f"Bearer {signed.get_json()['accessToken']}"}
    download = client.get(f"/storage/download/{data['file']}", headers=user)
    assert download.status_code == 200 and download.data == b"hello from a backup\n" * 500
    assert client.post("/database/Product", headers=ADMIN, json={"title": "Stool", "price": 15}).status_code == 201
    assert client.get("/database/Product?limit=1", headers=ADMIN).get_json()["count"] == 4
    assert client.get("/config/backups", headers=ADMIN).get_json()["keep"] == 3
    # The other process serves the restored, migrated state at once.
    listed = requests.get(f"{server.url}/database/Product?sort=price", headers=ADMIN, timeout=30).json()
    assert [d["title"] for d in listed["documents"]] == ["Pen", "Lamp", "Stool", "Desk"]
    assert requests.get(f"{server.url}/database/Other", headers=ADMIN, timeout=30).status_code == 404
    assert requests.post(f"{server.url}/authentication/local", json=data["account"], timeout=30).status_code == 200
    # The other way round is refused: an archive above the database's heads (upgrade the database first).
    current = tmp_path / "current.zip"
    _backup(new, current)
    kept = _counts(old)
    from trellis.errors import APIError

    with pytest.raises(APIError) as refused:
        _restore(old, current)
    assert refused.value.status == 400 and "upgrade the database first" in refused.value.message
    newest = next(head for head in _code_heads(new) if head.startswith("authentication_"))
    assert newest in refused.value.message and _counts(old) == kept


# A later core migration that the archived rows break: a unique index over audit entries the archive holds
# twice (the same config changed twice). A fresh database takes it; the restore's upgrade cannot.
FAILING_MIGRATION = '''"""test: one audit entry per module, action and target"""

from alembic import op

revision = "{new}"
down_revision = "{head}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_test_audit_once", "trellis_audit_log", ["module", "action", "target"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_test_audit_once", table_name="trellis_audit_log")
'''


def _blobs_on_disk(app: Any) -> set[str]:
    root = Path(app.config["STORAGE_PATH"])
    return {p.name for p in root.rglob("*") if p.is_file() and not p.name.endswith(".part")}


def _journal(app: Any) -> list[str]:
    with app.extensions["trellis"].engine.connect() as connection:
        return list(connection.exec_driver_sql("SELECT reason FROM storage_pending_blobs").scalars())


def test_a_migration_failing_during_an_older_restore_leaves_the_previous_state(make_app, tmp_path):
    import shutil

    from trellis.backups import create
    from trellis.migrate import DEFAULT_SCRIPT_LOCATION

    migrations = tmp_path / "migrations"
    shutil.copytree(DEFAULT_SCRIPT_LOCATION, migrations, ignore=shutil.ignore_patterns("__pycache__"))
    number = max(int(p.name[:4]) for p in (migrations / "versions").glob("[0-9][0-9][0-9][0-9]_*.py"))
    head, new_head = f"core_{number:04d}", f"core_{number + 1:04d}"  # the core's last migration, and one after
    (migrations / "versions" / f"{number + 1:04d}_test_audit_once.py").write_text(
        FAILING_MIGRATION.replace("{new}", new_head).replace("{head}", head)
    )
    old = make_app(database_kind(), MIGRATIONS_PATH=str(migrations))
    _make_older(old, head)
    _fill(old)
    assert old.test_client().put("/config/backups", headers=ADMIN, json={"keep": 4}).status_code == 200
    _make_older(old, *OLDER)
    archive = tmp_path / "older.zip"
    _backup(old, archive)

    new = make_app(database_kind(), MIGRATIONS_PATH=str(migrations))
    data = _fill(new)  # its own file, user and documents: the state that must stay
    client = new.test_client()
    assert client.post("/database/Product", headers=ADMIN, json={"title": "Kept", "price": 1}).status_code == 201
    counts, blobs = _counts(new), _blobs_on_disk(new)
    with new.extensions["trellis"].engine.connect() as connection:
        heads = create.current_heads(connection)
    assert new_head in heads
    with pytest.raises(sa.exc.IntegrityError):
        _restore(new, archive)
    assert _counts(new) == counts
    with new.extensions["trellis"].engine.connect() as connection:
        assert create.current_heads(connection) == heads
        assert "ip" in {c["name"] for c in sa.inspect(connection).get_columns("auth_sessions")}
    # The archive's file was written before the migration failed, and removed again; nothing left journaled.
    assert _blobs_on_disk(new) == blobs == {data["file"]}
    assert _journal(new) == []
    assert _latest_restore(new)["status"] == "failed"
    assert "Kept" in {t for t, _ in _products(new)}
    assert client.post("/authentication/local", json=data["account"]).status_code == 200


def test_admin_routes_start_list_download_upload_restore_delete(make_app, tmp_path):
    from trellis.testing.waiting import wait_until

    app = make_app(database_kind())
    _fill(app)
    client = app.test_client()
    started = client.post("/admin/backups", headers=ADMIN)
    assert started.status_code == 202 and started.get_json()["status"] == "running"
    name = started.get_json()["name"]

    def done() -> bool:
        return client.get("/admin/backups", headers=ADMIN).get_json()["backups"][0]["status"] == "done"

    wait_until(done, "the backup is done", timeout=30)
    listed = client.get("/admin/backups", headers=ADMIN).get_json()
    assert listed["count"] == 1 and listed["backups"][0]["size"] > 0
    whole = client.get(f"/admin/backups/{name}", headers=ADMIN)
    assert whole.status_code == 200 and whole.data[:2] == b"PK"
    part = client.get(f"/admin/backups/{name}", headers={**ADMIN, "Range": "bytes=0-9"})
    assert part.status_code == 206 and part.data == whole.data[:10]
    uploaded = client.post("/admin/backups/upload", headers=ADMIN, data={"file": (io.BytesIO(whole.data), "copy.zip")})
    assert uploaded.status_code == 201 and uploaded.get_json()["name"] == "copy.zip"
    audited = client.get("/admin/audit?module=backups&action=backup.upload", headers=ADMIN).get_json()
    assert audited["count"] == 1
    client.post("/database/Product", headers=ADMIN, json={"title": "Chair", "price": 40})
    restored = client.post("/admin/backups/copy.zip/restore", headers=ADMIN)
    assert restored.status_code == 202, restored.get_json()
    assert restored.get_json() == {"name": "copy.zip", "status": "running"}
    state = _restore_finished(client)
    assert state["status"] == "done" and state["name"] == "copy.zip" and "error" not in state, state
    assert [t for t, _ in _products(app)] == ["Pen", "Lamp", "Desk"]
    assert client.delete(f"/admin/backups/{name}", headers=ADMIN).status_code == 204
    assert client.get(f"/admin/backups/{name}", headers=ADMIN).status_code == 404
    assert client.post("/admin/backups/nope.zip/restore", headers=ADMIN).status_code == 404
    audited = client.get("/admin/audit?module=backups", headers=ADMIN).get_json()["entries"]
    # The upload's entry went with the restore (the audit log is restored too); the restore's own is there.
    assert {e["action"] for e in audited} >= {"backup.create", "restore", "backup.delete"}
    assert client.get("/admin/backups/..%2Fsecrets.json", headers=ADMIN).status_code in (400, 404)


def _restore_finished(client: Any) -> dict[str, Any]:
    from trellis.testing.waiting import wait_until

    def finished() -> dict[str, Any] | None:
        state = client.get("/admin/backups", headers=ADMIN).get_json()["restore"]
        return state if state and state["status"] != "running" else None

    return wait_until(finished, "the restore has finished", timeout=60)


def test_one_restore_at_a_time_and_a_damaged_entry_fails_in_the_background(make_app, tmp_path):
    from trellis.backups import jobs, records, restore_lock

    app = make_app(database_kind())
    _fill(app)
    with app.app_context():
        name = jobs.backup_now(app)[0]
    archive = tmp_path / "good.zip"
    archive.write_bytes((Path(app.config["BACKUP_PATH"]) / name).read_bytes())
    client = app.test_client()
    assert client.get("/admin/backups", headers=ADMIN).get_json()["restore"] is None
    # Another holder (as another process would) has the lock: a restore and a backup are refused meanwhile.
    with app.app_context():
        holder = restore_lock.acquire("elsewhere.zip")
    try:
        assert client.get("/admin/backups", headers=ADMIN).get_json()["restore"]["status"] == "running"
        refused = client.post(f"/admin/backups/{name}/restore", headers=ADMIN)
        assert refused.status_code == 409 and "restore" in refused.get_json()["message"]
        assert client.post("/admin/backups", headers=ADMIN).status_code == 409
    finally:
        with app.app_context():
            restore_lock.release(holder, "done")
    # A backup being written (its record running, its writer alive): no restore meanwhile.
    with app.app_context():
        records.start_record("writing.zip", False)
    refused = client.post(f"/admin/backups/{name}/restore", headers=ADMIN)
    assert refused.status_code == 409 and "backup" in refused.get_json()["message"]
    with app.app_context():
        records.finish("writing.zip", status="failed", error="given up by the test")
    # An entry damaged after the upload passes the quick check (202) but not the checksums: the restore
    # fails before it changes anything, and says why.
    client.post("/database/Product", headers=ADMIN, json={"title": "Chair", "price": 40})
    counts = _counts(app)
    flipped = _damaged(archive, tmp_path)["flipped"]
    (Path(app.config["BACKUP_PATH"]) / name).write_bytes(flipped.read_bytes())
    started = client.post(f"/admin/backups/{name}/restore", headers=ADMIN)
    assert started.status_code == 202, started.get_json()
    state = _restore_finished(client)
    assert state["status"] == "failed" and "damaged" in state["error"], state
    assert _counts(app) == counts and len(_products(app)) == 4
    # A foreign file under a done archive's name is refused at once, before the lock is taken.
    (Path(app.config["BACKUP_PATH"]) / name).write_bytes(b"PK not a zip at all")
    assert client.post(f"/admin/backups/{name}/restore", headers=ADMIN).status_code == 400
    assert client.get("/admin/backups", headers=ADMIN).get_json()["restore"]["status"] == "failed"


def test_a_write_during_the_backup_is_wholly_out(make_app, tmp_path, monkeypatch):
    from trellis.backups import create

    app = make_app(database_kind())
    _fill(app)
    client = app.test_client()
    writes: list[int] = []

    def write_meanwhile() -> None:
        if not writes:  # once the snapshot is taken: a committed write of a document and its event
            writes.append(
                client.post("/database/Product", headers=ADMIN, json={"title": "Late", "price": 1}).status_code
            )

    monkeypatch.setattr(create, "HEARTBEAT_SECONDS", 0.0)
    archive = tmp_path / "during.zip"
    from trellis.backups import jobs, records, runs

    with app.app_context():
        records.start_record("during.zip", False)
        jobs.run_backup(app, "during.zip", archive)
        # run_backup's heartbeat is the one hook into the write loop: drive it from there
    assert not writes or writes == [201]
    monkeypatch.setattr(runs, "heartbeat", lambda _name: write_meanwhile())
    with app.app_context():
        records.start_record("during2.zip", False)
        manifest = jobs.run_backup(app, "during2.zip", tmp_path / "during2.zip")
    assert writes == [201]
    runtime = [t for t in manifest["tables"] if t.get("runtime")]
    assert [t["rows"] for t in runtime] == [3]  # the late document is not in
    assert len(_products(app)) == 4  # yet it was committed


def test_schedule_runs_once_across_two_processes(make_app):
    from trellis.backups import schedule

    app = make_app(database_kind())
    other_url = app.config["DATABASE_URL"]
    from trellis import create_app

    second = create_app(
        {
            **{k: app.config[k] for k in ("DATABASE_URL", "MASTER_KEY", "SECRET_KEY")},
            "TESTING": True,
            "ASYNC_MODE": "threading",
            "PASSWORD_PROFILE": "test",
            "BACKUP_PATH": app.config["BACKUP_PATH"],
            "STORAGE_PATH": app.config["STORAGE_PATH"],
        }
    )
    assert second.config["DATABASE_URL"] == other_url
    client = app.test_client()
    assert client.put("/config/backups", headers=ADMIN, json={"schedule": "every day"}).status_code == 400
    assert client.put("/config/backups", headers=ADMIN, json={"schedule": "*/5 * * * *"}).status_code == 200
    now = datetime(2026, 11, 27, 3, 5, 30, tzinfo=UTC)
    with app.app_context():
        first = schedule.check(app, now)
    with second.app_context():
        again = schedule.check(second, now)
    assert first == "trellis-20261127-030500-scheduled.zip" and again is None
    try:
        from trellis.testing.waiting import wait_until

        wait_until(
            lambda: client.get("/admin/backups", headers=ADMIN).get_json()["backups"][0]["status"] == "done",
            "the scheduled backup is done",
            timeout=30,
        )
    finally:
        second.extensions["trellis_events"].stop()
        second.extensions["trellis"].engine.dispose()


# ---- real server processes -------------------------------------------------------------------------------


@pytest.fixture()
def serve(tmp_path: Path) -> Iterator[Callable[[Any], Any]]:
    """``serve(app)``: a real server process (eventlet) on ``app``'s database, folders and secrets; all are
    stopped at the end (those killed already included)."""
    from trellis.testing.plugin import LiveServer, free_port, live_server_env

    started: list[Any] = []

    def start(app: Any) -> Any:
        port = free_port()
        config = {k: app.config[k] for k in ("DATABASE_URL", "MASTER_KEY", "SECRET_KEY", "STORAGE_PATH")}
        env = live_server_env(
            {**config, "PASSWORD_PROFILE": "test"}, tmp_path, port, TRELLIS_BACKUP_PATH=app.config["BACKUP_PATH"]
        )
        server = LiveServer(env, port, tmp_path / f"server-{port}.log")
        started.append(server)
        server.wait_ready()
        return server

    yield start
    for server in started:
        server.stop()


def _latest_restore(app: Any) -> dict[str, Any] | None:
    from trellis.backups import jobs

    with app.app_context():
        return jobs.restore_state()


def test_two_processes_serve_the_restored_state_at_once(make_app, serve):
    import requests

    from trellis.backups import jobs
    from trellis.testing.waiting import wait_until

    app = make_app(database_kind())
    data = _fill(app)
    with app.app_context():
        name = jobs.backup_now(app)[0]
    client = app.test_client()
    # The state moves on after the backup: a schema, a document, a config, a user, a deleted file.
    assert client.post("/admin/database/schemas", headers=ADMIN, json={"name": "Later", "fields": {"n": "Number"}})
    assert client.post("/database/Product", headers=ADMIN, json={"title": "Chair", "price": 40}).status_code == 201
    assert client.put("/config/backups", headers=ADMIN, json={"keep": 9}).status_code == 200
    later = {"email": "bob@example.com", "password": "bob-password-1"}
    assert client.post("/authentication/local/new", json=later).status_code in (200, 201)
    assert client.delete(f"/storage/file/{data['file']}", headers=data["user"]).status_code in (200, 204)

    a, b = serve(app), serve(app)

    def through(server: Any) -> dict[str, Any]:
        """What a client sees of schemas, config, users, documents and files through one process."""
        schemas = requests.get(f"{server.url}/admin/database/schemas", headers=ADMIN, timeout=30).json()
        products = requests.get(f"{server.url}/database/Product?sort=price", headers=ADMIN, timeout=30).json()
        signed = requests.post(f"{server.url}/authentication/local", json=data["account"], timeout=30)
        token = signed.json().get("accessToken")
        file = requests.get(
            f"{server.url}/storage/download/{data['file']}", headers={"Authorization": f"Bearer {token}"}, timeout=30
        )
        return {
            "schemas": sorted({s["name"] for s in schemas["schemas"]} & {"Later", "Product"}),
            "keep": requests.get(f"{server.url}/config/backups", headers=ADMIN, timeout=30).json()["keep"],
            "bob": requests.post(f"{server.url}/authentication/local", json=later, timeout=30).status_code,
            "products": [(d["title"], d["price"]) for d in products["documents"]],
            "file": (file.status_code, file.content[:19]),
        }

    moved_on = {
        "schemas": ["Later", "Product"],
        "keep": 9,
        "bob": 200,
        "products": [("Pen", 2), ("Lamp", 9.5), ("Chair", 40), ("Desk", 180)],
        "file": (404, b'{"code":404,"messag'[:19]),
    }
    seen = through(b)  # b's caches now hold the state after the backup
    assert {k: v for k, v in seen.items() if k != "file"} == {k: v for k, v in moved_on.items() if k != "file"}
    assert seen["file"][0] == 404
    started = requests.post(f"{a.url}/admin/backups/{name}/restore", headers=ADMIN, timeout=30)
    assert started.status_code == 202, started.text
    wait_until(
        lambda: (
            requests.get(f"{a.url}/admin/backups", headers=ADMIN, timeout=30).json()["restore"]["status"] != "running"
        ),
        "the restore has finished",
        timeout=120,
    )
    assert requests.get(f"{b.url}/admin/backups", headers=ADMIN, timeout=30).json()["restore"]["status"] == "done"
    restored = {
        "schemas": ["Product"],
        "keep": 3,
        "bob": 401,
        "products": [("Pen", 2), ("Lamp", 9.5), ("Desk", 180)],
        "file": (200, b"hello from a backup"),
    }
    # At once, through the other process and through the one that restored: nothing waits or retries.
    assert through(b) == restored
    assert through(a) == restored


def _writer_holds_the_database(app: Any) -> bool:
    """Whether a transaction of another connection is writing: SQLite's write lock is taken, or (PostgreSQL)
    a restore holds its EXCLUSIVE table locks."""
    url = app.config["DATABASE_URL"]
    if url.startswith("sqlite"):
        import sqlite3

        connection = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=0, isolation_level=None)
        try:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("ROLLBACK")
            return False
        except sqlite3.OperationalError:
            return True
        finally:
            connection.close()
    engine = app.extensions["trellis"].engine
    query = (
        "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
        "WHERE l.mode = 'ExclusiveLock' AND l.granted AND c.relname = 'database_schemas'"
    )
    with engine.connect() as connection:
        return connection.exec_driver_sql(query).scalar() > 0


def _many_documents(app: Any, count: int) -> None:
    """``count`` more Product documents, a thousand per request (a list body creates many)."""
    client = app.test_client()
    for start in range(0, count, 1000):
        batch = [{"title": f"Bulk {i}", "price": 1000 + i} for i in range(start, min(count, start + 1000))]
        assert client.post("/database/Product/many", headers=ADMIN, json={"docs": batch}).status_code == 201


KILL_DOCUMENTS = 30_000  # enough for a restore to take seconds on a busy 2-core machine


@pytest.mark.long
def test_kill_9_mid_restore_leaves_the_previous_state_no_orphan_blob_and_its_lock_is_recovered(make_app, serve):
    import signal

    import requests

    from trellis.backups import jobs
    from trellis.testing.waiting import wait_until

    app = make_app(database_kind())
    data = _fill(app)
    _many_documents(app, KILL_DOCUMENTS)
    with app.app_context():
        name = jobs.backup_now(app)[0]
    client = app.test_client()
    assert client.post("/database/Product", headers=ADMIN, json={"title": "After", "price": 0}).status_code == 201
    # The file goes after the backup: the restore writes its blob back, for a record not committed yet.
    (blob,) = Path(app.config["STORAGE_PATH"]).rglob(data["file"])
    assert client.delete(f"/storage/file/{data['file']}", headers=data["user"]).status_code in (200, 204)
    assert not blob.exists()
    before = _counts(app)
    server = serve(app)
    assert requests.post(f"{server.url}/admin/backups/{name}/restore", headers=ADMIN, timeout=30).status_code == 202
    # Killed while the restore's transaction writes (its lock row says running, its writes hold the database),
    # its blob written.
    wait_until(
        lambda: (_writer_holds_the_database(app) and blob.exists()) or _latest_restore(app)["status"] != "running",
        "the restore is writing",
        timeout=120,
        interval=0.01,
    )
    assert _latest_restore(app)["status"] == "running", _latest_restore(app)
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait(10)
    state = _latest_restore(app)
    assert state["status"] == "failed" and "interrupted" in state["error"], state
    assert _counts(app) == before  # nothing of the restore is in: the previous state, "After" included
    assert "After" in {t for t, _ in _products(app)}
    assert client.get(f"/storage/download/{data['file']}", headers=data["user"]).status_code == 404
    # The blob it wrote is an orphan now, but journaled: the next process's sweep (at its start) removes it.
    assert blob.exists() and "restore" in _journal(app)
    other = serve(app)
    wait_until(lambda: not blob.exists() and _journal(app) == [], "the orphan blob is swept", timeout=60)
    # The lock went with the process: another process restores at once.
    assert requests.post(f"{other.url}/admin/backups/{name}/restore", headers=ADMIN, timeout=30).status_code == 202
    wait_until(lambda: _latest_restore(app)["status"] != "running", "the second restore has finished", timeout=180)
    assert _latest_restore(app)["status"] == "done"
    assert "After" not in {t for t, _ in _products(app)}
    listed = app.test_client().get("/database/Product?limit=1", headers=ADMIN).get_json()
    assert listed["count"] == 3 + KILL_DOCUMENTS
    download = client.get(f"/storage/download/{data['file']}", headers=data["user"])
    assert download.status_code == 200 and download.data == b"hello from a backup\n" * 500
    assert _blobs_on_disk(app) == {data["file"]} and _journal(app) == []


def test_the_storage_sweep_leaves_a_live_restores_blobs_and_removes_a_dead_ones(make_app):
    """A restore's journaled blobs have no committed record until it commits: the sweep of any process leaves
    them while the restore's holder lives, and removes the unreferenced ones once it is gone."""
    from trellis import db
    from trellis.backups import restore_lock
    from trellis_storage import journal, placement
    from trellis_storage.backends import key_for
    from trellis_storage.models import PendingBlob

    app = make_app(database_kind())
    with app.app_context():
        backend = placement.active_backend()
        key = key_for(uuid.uuid4().hex)
        writer = backend.writer(key, "application/octet-stream")
        writer.write(b"written back by a restore")
        writer.commit()
        writer.close()
        entry = {"id": db.new_id(), "reason": "restore", "backend": backend.name, "key": key, "created_at": db.utcnow()}
        with app.extensions["trellis"].engine.begin() as connection:
            connection.execute(PendingBlob.__table__.insert().values(**entry))
        holder = restore_lock.acquire("elsewhere.zip")  # a live restore (this process)
        db.session.remove()  # the sweep runs in an app context of its own: its reads start now
        try:
            assert journal.sweep() == 0
            assert backend.keys() == [key] and _journal(app) == ["restore"]
        finally:
            restore_lock.release(holder, "failed", "given up by the test")
        assert journal.sweep() == 1
        assert backend.keys() == [] and _journal(app) == []


def test_kill_9_mid_backup_leaves_no_archive_listed_as_done(make_app, serve):
    import signal

    import requests

    from trellis.backups import jobs
    from trellis.testing.waiting import wait_until

    app = make_app(database_kind())
    _fill(app)
    _many_documents(app, KILL_DOCUMENTS)
    server = serve(app)
    started = requests.post(f"{server.url}/admin/backups", headers=ADMIN, timeout=30)
    assert started.status_code == 202
    name = started.json()["name"]
    part = Path(app.config["BACKUP_PATH"]) / f"{name}.part"
    wait_until(part.exists, "the backup is being written", timeout=60, interval=0.01)
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait(10)
    client = app.test_client()
    listed = {b["name"]: b for b in client.get("/admin/backups", headers=ADMIN).get_json()["backups"]}
    assert listed[name]["status"] == "failed" and "interrupted" in listed[name]["error"], listed
    assert not (Path(app.config["BACKUP_PATH"]) / name).exists()
    assert client.get(f"/admin/backups/{name}", headers=ADMIN).status_code == 404
    assert client.post(f"/admin/backups/{name}/restore", headers=ADMIN).status_code == 404
    with app.app_context():
        assert not jobs.blobs_held()  # deleted files' blobs are no longer held for the dead backup
    # The next backup clears the dead one's part file, and is done.
    again = client.post("/admin/backups", headers=ADMIN).get_json()["name"]
    assert not part.exists()
    wait_until(
        lambda: client.get("/admin/backups", headers=ADMIN).get_json()["backups"][0]["status"] == "done",
        f"backup {again} is done",
        timeout=120,
    )


def test_archives_kept_in_s3_through_the_storage_module(make_app, tmp_path):
    """``backups.storage: s3``: the archive goes to the Storage module's bucket (moto's S3 server on
    127.0.0.1), is listed, downloaded and restored from there, and deleted from it."""
    import boto3
    from moto.server import ThreadedMotoServer

    from trellis.testing.plugin import free_port
    from trellis.testing.waiting import wait_until

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        keys = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing-secret"}
        s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1", **keys)
        s3.create_bucket(Bucket="trellis-backups-test")
        app = make_app(database_kind())
        data = _fill(app)
        client = app.test_client()
        settings = {
            "bucket": "trellis-backups-test",
            "region": "us-east-1",
            "endpointUrl": f"http://127.0.0.1:{port}",
            "accessKeyId": keys["aws_access_key_id"],
            "secretAccessKey": keys["aws_secret_access_key"],
        }
        assert client.put("/config/storage", headers=ADMIN, json={"s3": settings}).status_code == 200
        assert client.put("/config/backups", headers=ADMIN, json={"storage": "s3"}).status_code == 200
        name = client.post("/admin/backups", headers=ADMIN).get_json()["name"]

        def finished() -> dict[str, Any] | None:
            shown = client.get("/admin/backups", headers=ADMIN).get_json()["backups"][0]
            return shown if shown["status"] != "running" else None

        assert wait_until(finished, "the backup has finished", timeout=60)["status"] == "done"
        stored = s3.list_objects_v2(Bucket="trellis-backups-test")["Contents"]
        assert len(stored) == 1  # the archive (the user's file stayed in the local backend)
        assert not (Path(app.config["BACKUP_PATH"]) / name).exists()  # kept in S3 only
        remote = s3.get_object(Bucket="trellis-backups-test", Key=stored[0]["Key"])["Body"].read()
        download = client.get(f"/admin/backups/{name}", headers=ADMIN)
        assert download.status_code == 200 and download.data == remote and remote[:2] == b"PK"
        client.post("/database/Product", headers=ADMIN, json={"title": "Chair", "price": 40})
        assert client.post(f"/admin/backups/{name}/restore", headers=ADMIN).status_code == 202
        assert _restore_finished(client)["status"] == "done"
        assert [t for t, _ in _products(app)] == ["Pen", "Lamp", "Desk"]
        file = client.get(f"/storage/download/{data['file']}", headers=data["user"])
        assert file.data == b"hello from a backup\n" * 500
        assert client.delete(f"/admin/backups/{name}", headers=ADMIN).status_code == 204
        assert s3.list_objects_v2(Bucket="trellis-backups-test").get("Contents", []) == []
        assert not (Path(app.config["BACKUP_PATH"]) / name).exists()
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("source", "target"), [("sqlite", "sqlite"), ("sqlite", "postgresql"), ("postgresql", "sqlite")]
)
def test_searchable_documents_are_found_after_a_restore(make_app, tmp_path, source, target):
    """The search index is not in the archive: a restore builds it again (SQLite: the FTS5 table and its
    triggers, dropped with the old table and created before the rows go in), on either database."""
    first = make_app(source)
    client = first.test_client()
    fields = {"title": {"type": "String", "searchable": True}, "n": "Number"}
    body = {"name": "Note", "fields": fields, "modelOptions": {"search": {"language": "english"}}}
    assert client.post("/admin/database/schemas", headers=ADMIN, json=body).status_code == 201
    docs = [{"title": "running late", "n": 1}, {"title": "walking home", "n": 2}]
    assert client.post("/database/Note/many", headers=ADMIN, json={"docs": docs}).status_code == 201
    archive = tmp_path / "search.zip"
    _backup(first, archive)
    assert client.post("/database/Note", headers=ADMIN, json={"title": "runs after the backup"}).status_code == 201
    second = first if target == source else make_app(target)
    _restore(second, archive)
    client = second.test_client()

    def found(words: str) -> list[str]:
        answer = client.get("/database/Note", headers=ADMIN, query_string={"search": words}).get_json()
        return [doc["title"] for doc in answer["documents"]]

    assert found("run") == ["running late"]  # the document written after the backup is gone from the index too
    assert found("walk hom") == ["walking home"]
    assert client.post("/database/Note", headers=ADMIN, json={"title": "runs again"}).status_code == 201
    assert sorted(found("runs")) == ["running late", "runs again"]
