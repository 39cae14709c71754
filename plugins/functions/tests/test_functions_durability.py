"""What must happen once, or at least once, across processes: an after-trigger whose process is killed
mid-run (``kill -9``) runs again on another process; one that raises is retried, then marked failed; a
schedule's due time is taken by one process of two."""

from __future__ import annotations

import signal
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from .conftest import Api, eventually

pytestmark = pytest.mark.live

SLOW = """
    import os
    import time
    from pathlib import Path
    from trellis_functions import after_create

    @after_create("Order")
    def ship(ctx, doc):
        if ctx.attempt == 1:
            (Path(__file__).parent / "running.pid").write_text(str(os.getpid()))
            time.sleep(60)  # killed meanwhile
        ctx.db.as_admin().create("Shipment", {"order": doc["_id"], "attempt": ctx.attempt})
"""


def test_an_after_trigger_runs_again_elsewhere_when_its_process_is_killed(start, folder):
    folder.write("slow.py", SLOW)
    env = {"TRELLIS_FUNCTIONS_LEASE_SECONDS": "3", "TRELLIS_FUNCTIONS_TIME_LIMIT_SECONDS": "120"}
    servers = [start(**env), start(**env)]
    api = Api(servers[0].url)
    api.schema({"item": "String"}, name="Order")
    api.schema({"order": "String", "attempt": "Number"}, name="Shipment")
    order = api.call("POST", "/database/Order", 201, json={"item": "book"}).json()
    pid = int(eventually(lambda: (folder.path / "running.pid").exists() and (folder.path / "running.pid").read_text()))
    (victim,) = [server for server in servers if server.process.pid == pid]
    victim.process.send_signal(signal.SIGKILL)
    survivor = Api(next(server for server in servers if server is not victim).url)
    shipments = eventually(lambda: survivor.documents("Shipment"), seconds=20)
    assert [(s["order"], s["attempt"]) for s in shipments] == [(order["_id"], 2)]
    entry = eventually(lambda: survivor.log(function="ship"))[0]
    assert (entry["status"], entry["attempt"], entry["kind"]) == ("ok", 2, "after_create")


def test_an_after_trigger_that_raises_is_retried_then_marked_failed(start, folder, app_config):
    folder.write(
        "flaky.py",
        """
        from trellis_functions import after_delete

        @after_delete("*")
        def remember(ctx, doc):
            raise RuntimeError(f"attempt {ctx.attempt} of {doc['_id']}")
        """,
    )
    api = Api(start(TRELLIS_FUNCTIONS_RETRY_SECONDS="0.2,0.2", TRELLIS_FUNCTIONS_POLL_SECONDS="0.2").url)
    name = api.schema({"title": "String"})
    doc = api.call("POST", f"/database/{name}", 201, json={"title": "x"}).json()
    api.call("DELETE", f"/database/{name}/{doc['_id']}", 200)
    failures = eventually(lambda: len(found := api.log(function="remember")) == 3 and found)
    assert sorted(e["attempt"] for e in failures) == [1, 2, 3]
    assert all(e["status"] == "error" and doc["_id"] in e["message"] for e in failures)
    engine = sa.create_engine(app_config["DATABASE_URL"])
    try:
        with engine.connect() as connection:
            status = eventually(
                lambda: connection.execute(sa.text("SELECT status, attempts FROM functions_jobs")).all() or None
            )
        assert [tuple(row) for row in status] == [("failed", 3)]
    finally:
        engine.dispose()


def test_a_schedule_runs_once_per_due_time_with_two_processes(committing_app_factory, tmp_path):
    """Two apps (as two processes would) look for the same due time: one runs it; a missed run after
    downtime runs once, not once per missed slot."""
    folder = tmp_path / "functions"
    folder.mkdir()
    (folder / "tick.py").write_text(
        "from trellis_functions import schedule\n\n@schedule('*/5 * * * *')\ndef tick(ctx):\n    ctx.log('tick')\n"
    )
    apps = [committing_app_factory(FUNCTIONS_PATH=str(folder)) for _ in range(2)]
    from trellis_functions import schedules

    first = datetime(2026, 11, 29, 10, 1, tzinfo=UTC)
    ran = []
    for moment in (first, datetime(2026, 11, 29, 10, 6, tzinfo=UTC), datetime(2026, 11, 29, 10, 7, tzinfo=UTC),
                   datetime(2026, 11, 29, 11, 2, tzinfo=UTC)):  # fmt: skip
        for app in apps:
            with app.app_context():
                ran.append(schedules.check(moment))
    # first seen at 10:01 (no run), due 10:05 taken once, nothing new at 10:07, 11:00 once (10:10 … 10:55 missed)
    assert ran == [0, 0, 1, 0, 0, 0, 1, 0]
    with apps[1].app_context():
        from trellis import db

        runs = db.session.execute(sa.text("SELECT status FROM functions_log WHERE function = 'tick'")).all()
        assert [tuple(row) for row in runs] == [("ok",), ("ok",)]
