"""PostgreSQL: a single-document write a trigger watches keeps its one statement. The before-triggers run
first; the document, its event and its after-triggers' runs are then written by one statement that commits
alone (no BEGIN/COMMIT travels), an update only if the document is still the version its triggers saw.
A trigger that reads or writes through ``ctx.db`` opens the session's transaction, which the write joins.
Concurrent updates of one document each run their triggers on the very version they replace."""

from __future__ import annotations

import json
import textwrap
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from trellis.testing.pg_proxy import PostgresProxy, proxied_app
from trellis.testing.plugin import database_kind, wipe_data

from .conftest import ADMIN, Api, eventually

TRIGGERS = """
    from trellis_functions import after_create, after_update, before_create, before_update, function

    RUNS = {"stamp": 0}

    @before_create("Item")
    @before_update("Item")
    def stamp(ctx, doc, previous=None):
        RUNS["stamp"] += 1
        doc["seen"] = previous["__v"] if previous else -1

    @function("stamped", auth="admin")
    def stamped(ctx, params):
        return RUNS["stamp"]

    @after_create("Item")
    @after_update("Item")
    def noted(ctx, doc, previous=None):
        ctx.db.as_admin().create("Note", {"v": doc["__v"], "seen": doc["seen"], "previous": (previous or {}).get("__v", -1)})

    @after_create("Quiet")
    def quiet(ctx, doc):
        ctx.log(f"quiet {doc['n']}")

    @before_create("Counted")
    def counts(ctx, doc):
        doc["seen"] = ctx.db.count("Item")
"""

on_postgresql = pytest.mark.skipif(database_kind() != "postgresql", reason="round trips are a PostgreSQL matter")


@pytest.fixture()
def functions_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "functions"
    folder.mkdir()
    # A name of its own: a file's module stays imported in this process under its name.
    (folder / f"items_{uuid.uuid4().hex[:8]}.py").write_text(textwrap.dedent(TRIGGERS))
    return folder


@pytest.fixture()
def proxied(app, app_config, functions_folder) -> Iterator[tuple[Any, PostgresProxy]]:
    """An app on the test database, outside the test transaction, loading the triggers, whose every
    connection goes through a recording proxy."""
    wipe_data(app)
    try:
        with proxied_app({**app_config, "FUNCTIONS_PATH": str(functions_folder)}) as (other, proxy):
            yield other, proxy
    finally:
        wipe_data(app)


def _queued(app: Any) -> list[dict[str, Any]]:
    with app.extensions["trellis"].engine.connect() as connection:
        rows = connection.execute(sa.text("SELECT trigger, payload, actor FROM functions_jobs ORDER BY created_at"))
        return [
            {"trigger": trigger, "payload": json.loads(payload), "actor": actor} for trigger, payload, actor in rows
        ]


@on_postgresql
def test_a_watched_write_is_one_statement_with_its_event_and_runs(proxied):
    app, proxy = proxied
    client = app.test_client()
    for name, fields in {
        "Item": {"n": "Number", "seen": "Number"},
        "Note": {"v": "Number", "seen": "Number", "previous": "Number"},
    }.items():
        made = client.post("/admin/database/schemas", json={"name": name, "fields": fields}, headers=ADMIN)
        assert made.status_code == 201, made.get_json()
    client.get("/database/Item?limit=1", headers=ADMIN)  # warm: schema snapshot, pools

    def sent(method: str, path: str, body: Any, status: int) -> tuple[dict[str, Any], list[tuple[int, str]]]:
        proxy.taken_statements()
        response = client.open(path, method=method, json=body, headers=ADMIN)
        assert response.status_code == status, response.get_json()
        return response.get_json(), proxy.taken_statements()

    created, statements = sent("POST", "/database/Item", {"n": 1}, 201)
    assert created["seen"] == -1  # the before-trigger's change, stored
    writes = [(number, sql) for number, sql in statements if "INSERT INTO core_events_pending" in sql]
    assert len(writes) == 1, "\n\n".join(sql for _, sql in writes)
    writer, statement = writes[0]
    assert "functions_jobs" in statement and statement.lstrip().startswith("WITH"), statement
    on_writer = {sql.strip().upper() for number, sql in statements if number == writer}
    assert not {"BEGIN", "COMMIT", "ROLLBACK"} & on_writer, on_writer

    patched, statements = sent("PATCH", f"/database/Item/{created['_id']}", {"n": 2}, 200)
    assert patched["seen"] == 0 and patched["__v"] == 1 and patched["n"] == 2
    writes = [(number, sql) for number, sql in statements if "INSERT INTO core_events_pending" in sql]
    assert len(writes) == 1 and "functions_jobs" in writes[0][1], statements
    assert not {"BEGIN", "COMMIT"} & {sql.strip().upper() for number, sql in statements if number == writes[0][0]}

    # The runs are queued with what the after-trigger is given (this app runs no runners: they wait).
    runs = _queued(app)
    assert [run["trigger"].split(":", 1)[1] for run in runs] == ["noted:after_create:Item", "noted:after_update:Item"]
    create_run, update_run = runs
    assert create_run["payload"] == {"user": None, "document": created} and create_run["actor"] == "admin"
    assert update_run["payload"]["document"] == patched
    assert update_run["payload"]["previous"] == created


@on_postgresql
def test_a_trigger_using_ctx_db_makes_the_write_join_its_transaction(proxied):
    app, proxy = proxied
    client = app.test_client()
    for name, fields in {"Item": {"n": "Number", "seen": "Number"}, "Counted": {"seen": "Number"}}.items():
        assert (
            client.post("/admin/database/schemas", json={"name": name, "fields": fields}, headers=ADMIN).status_code
            == 201
        )
    for n in range(3):
        assert client.post("/database/Item", json={"n": n}, headers=ADMIN).status_code == 201
    proxy.taken_statements()
    counted = client.post("/database/Counted", json={}, headers=ADMIN)
    assert counted.status_code == 201, counted.get_json()
    assert counted.get_json()["seen"] == 3
    statements = proxy.taken_statements()
    writer = next(number for number, sql in statements if "INSERT INTO core_events_pending" in sql)
    on_writer = [sql.strip().upper() for number, sql in statements if number == writer]
    assert "BEGIN" in on_writer and "COMMIT" in on_writer, on_writer
    assert client.get(f"/database/Counted/{counted.get_json()['_id']}", headers=ADMIN).status_code == 200


@on_postgresql
def test_runs_that_end_well_end_together_in_one_statement(proxied):
    """Runs whose triggers read and wrote nothing through ``ctx.db`` end together: their jobs out and their
    log entries in, one statement for the lot."""
    app, proxy = proxied
    client = app.test_client()
    assert (
        client.post(
            "/admin/database/schemas", json={"name": "Quiet", "fields": {"n": "Number"}}, headers=ADMIN
        ).status_code
        == 201
    )
    for n in range(3):
        assert client.post("/database/Quiet", json={"n": n}, headers=ADMIN).status_code == 201
    proxy.taken_statements()
    with app.app_context():
        from trellis_functions import jobs

        assert jobs.run_due(8) == 3  # this app runs no runners: its runs wait, due, for a claim
    ended = [sql for _, sql in proxy.taken_statements() if "DELETE FROM functions_jobs" in sql]
    assert len(ended) == 1 and "INSERT INTO functions_log" in ended[0], ended
    assert _queued(app) == []
    log = client.get("/admin/functions/log", query_string={"function": "quiet"}, headers=ADMIN).get_json()["entries"]
    assert sorted((entry["status"], entry["message"], entry["attempt"]) for entry in log) == [
        ("ok", f"quiet {n}", 1) for n in range(3)
    ]


@pytest.mark.live
def test_concurrent_updates_each_run_their_triggers_on_the_version_they_replace(live_server_factory, functions_folder):
    """Eight clients PATCH one document at once: each update's before-trigger saw the very version it
    replaced (on PostgreSQL a lost race runs the triggers again on the newer one), every update answers
    200, and each after-trigger ran once, with that version as ``previous``."""
    server = live_server_factory(TRELLIS_FUNCTIONS_PATH=str(functions_folder))
    api = Api(server.url)
    api.schema({"n": "Number", "seen": "Number"}, name="Item")
    api.schema({"v": "Number", "seen": "Number", "previous": "Number"}, name="Note")
    doc = api.call("POST", "/database/Item", 201, json={"n": 0}).json()
    patches = 64

    def patch(n: int) -> dict[str, Any]:
        return Api(server.url).call("PATCH", f"/database/Item/{doc['_id']}", 200, json={"n": n}).json()

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(patch, range(1, patches + 1)))
    assert sorted(answer["__v"] for answer in answers) == list(range(1, patches + 1))
    assert all(answer["seen"] == answer["__v"] - 1 for answer in answers), answers
    # The create and each update ran the before-trigger once at least. PostgreSQL: some updates lost the race
    # and ran it again; SQLite: each waited for the one write lock and ran it once.
    runs = api.call("POST", "/functions/stamped", 200).json()["result"]
    assert runs > 1 + patches if database_kind() == "postgresql" else runs == 1 + patches
    notes = eventually(lambda: (found := api.documents("Note")) and len(found) == patches + 1 and found)
    updates = sorted((note["v"], note["seen"], note["previous"]) for note in notes if note["previous"] >= 0)
    assert updates == [(v, v - 1, v - 1) for v in range(1, patches + 1)]
