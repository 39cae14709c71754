"""CPU used during a benchmark's measured run, read from ``/proc``: of a process, of the PostgreSQL backends
serving a database, and of the whole machine (what other engineers' work took meanwhile)."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import psycopg2


def _machine_busy() -> float:
    """Busy CPU seconds of the whole machine since boot (all cores)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    try:
        parts = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def pg_backends(dsn: str, database: str) -> list[int]:
    """PostgreSQL backends connected to ``database`` (none when the server refuses one more client:
    their CPU then counts as foreign, which overstates the load from others)."""
    try:
        with contextlib.closing(psycopg2.connect(dsn)) as connection, connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", (database,)
            )
            return [row[0] for row in cursor.fetchall()]
    except psycopg2.OperationalError:
        return []


class CpuWindow:
    """CPU used during one measured run: ours (server, PostgreSQL backends, wrk) and everyone else's."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.machine = _machine_busy()
        self.ours = sum(process_cpu(pid) for pid in pids)
        self.children = self._children()
        self.started = time.monotonic()

    @staticmethod
    def _children() -> float:
        usage = os.times()
        return usage.children_user + usage.children_system

    def close(self) -> dict[str, float]:
        elapsed = time.monotonic() - self.started
        machine = _machine_busy() - self.machine
        ours = sum(process_cpu(pid) for pid in self.pids) - self.ours + self._children() - self.children
        cores = os.cpu_count() or 1
        return {
            "foreign_pct": max(0.0, (machine - ours) / (elapsed * cores) * 100),
            "ours_pct": ours / (elapsed * cores) * 100,
        }
