"""SQLite under eventlet (the embedded server): a connection waiting for the write lock leaves the hub free,
so the greenlet of the same process that holds the lock commits and the waiter goes on (``sqlite_waits``).

Each case runs in its own interpreter: eventlet's monkey-patching is for the whole process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = r"""
import eventlet
eventlet.monkey_patch()
import json, sys, time
import sqlalchemy as sa
from trellis import db

engine = db.make_engine("sqlite:///" + sys.argv[1], "eventlet")
with engine.begin() as c:
    c.exec_driver_sql("CREATE TABLE t (x INTEGER)")
mode = sys.argv[2]
ticks, seen = [], {}

def ticker():
    while "waiter" not in seen:
        ticks.append(time.monotonic())
        eventlet.sleep(0.01)

def holder():
    with engine.begin() as c:
        if mode == "snapshot":
            c.exec_driver_sql("SELECT count(*) FROM t").scalar()
        c.exec_driver_sql("INSERT INTO t VALUES (1)")
        seen["holding"] = time.monotonic()
        eventlet.sleep(0.5)  # a green yield inside the write transaction (a socket)

def waiter():
    while "holding" not in seen:
        eventlet.sleep(0.001)
    started = time.monotonic()
    try:
        with engine.begin() as c:
            if mode == "snapshot":  # read before the holder commits: a snapshot it then makes stale
                c.exec_driver_sql("SELECT count(*) FROM t").scalar()
                eventlet.sleep(0.7)
            c.exec_driver_sql("INSERT INTO t VALUES (2)")
        seen["outcome"] = "committed"
    except sa.exc.OperationalError as exc:
        seen["outcome"] = exc.orig.sqlite_errorname
    seen["waiter"] = time.monotonic() - started

pool = [eventlet.spawn(f) for f in (ticker, holder, waiter)]
for g in pool:
    g.wait()
with engine.connect() as c:
    rows = sorted(c.exec_driver_sql("SELECT x FROM t").scalars())
gaps = [b - a for a, b in zip(ticks, ticks[1:])]
print(json.dumps({"waited": seen["waiter"], "outcome": seen["outcome"], "rows": rows, "gap": max(gaps)}))
"""


def _run(tmp_path: Path, mode: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "waits.db"), mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_writer_waits_for_the_lock_of_a_greenlet_that_yielded_holding_it(tmp_path: Path) -> None:
    seen = _run(tmp_path, "plain")
    # Blocking in SQLite's C wait, the waiter held the hub for the busy timeout (30 s) and then failed.
    assert seen["outcome"] == "committed"
    assert seen["rows"] == [1, 2]
    assert seen["waited"] < 10
    assert seen["gap"] < 2  # the other greenlets kept running while it waited


def test_a_stale_snapshot_fails_at_once_as_sqlite_would(tmp_path: Path) -> None:
    seen = _run(tmp_path, "snapshot")
    assert seen["outcome"] == "SQLITE_BUSY_SNAPSHOT"
    assert seen["rows"] == [1]
    assert seen["gap"] < 2
