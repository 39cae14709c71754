"""PostgreSQL restarted under reads and writes: a throwaway cluster (initdb) on its own port, never the
shared server. Pooled connections die with the restart; whatever a request meets answers at most a
503 with ``Retry-After`` in the error shape, never a 500, and service comes back by itself."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from trellis import create_app, events
from trellis.testing.pg_cluster import BINARIES
from trellis.testing.plugin import TEST_MASTER_KEY

pytestmark = pytest.mark.skipif(not BINARIES, reason="PostgreSQL server binaries are not installed")


def test_a_restart_under_reads_and_writes_answers_at_most_503(pg_cluster, app_config, tmp_path):
    from trellis.admins import ensure_first_admin
    from trellis.migrate import upgrade

    application = create_app({**app_config, "DATABASE_URL": pg_cluster.url, "STORAGE_PATH": str(tmp_path)})
    upgrade(application)
    with application.app_context():
        ensure_first_admin()
    admin = {"masterkey": TEST_MASTER_KEY}
    created = application.test_client().post(
        "/admin/database/schemas", headers=admin, json={"name": "Restarted", "fields": {"n": "Number"}}
    )
    assert created.status_code == 201, created.get_json()

    answers: list[tuple[str, int, dict, str | None]] = []
    stop = threading.Event()

    def worker(number: int) -> None:
        client = application.test_client()
        while not stop.is_set():
            for method, path, body in (
                ("POST", "/database/Restarted", {"n": number}),
                ("GET", "/database/Restarted?limit=3", None),
            ):
                response = client.open(path, method=method, json=body, headers=admin)
                answers.append((method, response.status_code, response.get_json(), response.headers.get("Retry-After")))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(1.0)
        before = len(answers)
        pg_cluster.pg_ctl("restart")
        time.sleep(2.0)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    # A write acknowledged is durable: every 201 (each a single statement committed on its own) is there,
    # with its event, after the restart.
    acknowledged = {body["_id"] for method, status, body, _r in answers if method == "POST" and status == 201}
    # This load runs on the reads' autocommit pool (single-statement writes, reads, the sequencer's pass):
    # nothing met the main pool's connections, which died with the restart. A fresh one for the check.
    application.extensions["trellis"].engine.dispose()
    with application.app_context(), application.extensions["trellis"].engine.connect() as connection:
        table = connection.execute(sa.text("SELECT id FROM database_schemas WHERE name = 'Restarted'")).scalar_one()
        stored = set(connection.execute(sa.text(f"SELECT id FROM dbdoc_{table}")).scalars())
        recorded = events.recorded()  # numbered or still pending
        logged = connection.execute(
            sa.select(sa.func.count()).select_from(recorded).where(recorded.c.family == "database.Restarted")
        ).scalar_one()
    application.extensions["trellis_events"].stop()  # its loop would outlive the cluster
    application.extensions["trellis"].engine.dispose()
    assert acknowledged and acknowledged <= stored, len(acknowledged - stored)
    assert logged == len(stored)  # no document without its event, no event without its document

    assert before > 0 and len(answers) > before
    statuses = [status for _m, status, _b, _r in answers]
    assert set(statuses) <= {200, 201, 503}, [a for a in answers if a[1] not in (200, 201, 503)][:3]
    for _method, status, body, retry_after in answers:
        if status == 503:
            assert body["name"] == "SERVICE_UNAVAILABLE" and retry_after == "1", body
    assert statuses[-8:] and set(statuses[-8:]) <= {200, 201}, statuses[-20:]  # back by itself
    print(
        f"\nrestart: {len(answers)} answers, {statuses.count(503)} × 503, "
        f"{sum(s in (200, 201) for s in statuses)} × 2xx"
    )
