"""The change counter's hot row: one counter row per family vs the slot of each backend, at concurrency 16.

    flock /work/bench.lock .venv/bin/python -m bench.counter_contention --rounds 4 --seconds 5

``pgbench`` (16 clients, one thread each, simple protocol, each statement its own transaction as the
one-statement writes run) on a throwaway database with the real tables (migrated by Trellis) runs the
create statement's shape: a document INSERT, its event row and the counter bump, in one statement. Two
variants, alternating which goes first in each round: the bump on ``slot = 0`` (one row per family:
every writer queues on its lock until the previous one's commit is flushed) and on
``pg_backend_pid() % SLOTS`` (what ``trellis.events`` does). Reports transactions/s per variant and the
paired ratio per round.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import ADMIN, MASTER_KEY, ROOT, SECRET_KEY, throwaway_database
from trellis.events import SLOTS

_SCRIPT = """
WITH written AS (
  INSERT INTO bench_docs (id, data) VALUES (md5(random()::text), '{{"title": "Bench item"}}') RETURNING id
), event AS (
  INSERT INTO core_events_pending (topic, family, payload, created_at)
  SELECT 'database.Item.create', 'database.Item', '{{"document": {{}}}}', now() FROM written
), counted AS (
  INSERT INTO core_event_counters (family, slot, changes)
  SELECT 'database.Item', {slot}, 1 WHERE EXISTS (SELECT 1 FROM written)
  ON CONFLICT (family, slot) DO UPDATE SET changes = core_event_counters.changes + 1
)
SELECT id FROM written;
"""


def pgbench() -> str:
    found = shutil.which("pgbench") or next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin/pgbench"))), None)
    if found is None:
        raise SystemExit("pgbench is not installed (Debian's postgresql-client)")
    return str(found)


def run(dsn: str, slot: str, seconds: int, folder: Path) -> float:
    script = folder / f"bump-{abs(hash(slot))}.sql"
    script.write_text(_SCRIPT.format(slot=slot))
    result = subprocess.run(
        [pgbench(), "-n", "-c16", "-j1", f"-T{seconds}", "-f", str(script), dsn],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(re.search(r"tps = ([\d.]+)", result.stdout).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=5)
    args = parser.parse_args()
    variants = {"one row (slot 0)": "0", f"backend's slot (pid % {SLOTS})": f"pg_backend_pid() % {SLOTS}"}
    with throwaway_database("postgresql") as url, tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "TRELLIS_DATABASE_URL": url,
            "TRELLIS_MASTER_KEY": MASTER_KEY,
            "TRELLIS_SECRET_KEY": SECRET_KEY,
            "TRELLIS_ADMIN_USERNAME": ADMIN[0],
            "TRELLIS_ADMIN_PASSWORD": ADMIN[1],
            "TRELLIS_INSTANCE_PATH": f"{tmp}/instance",
        }
        init = [sys.executable, "-m", "flask", "--app", str(ROOT / "wsgi.py"), "trellis", "init"]
        subprocess.run(init, env=env, check=True, capture_output=True, cwd=tmp)
        dsn = url.replace("postgresql+psycopg2://", "postgresql://")
        subprocess.run(["psql", dsn, "-qc", "CREATE TABLE bench_docs (id text PRIMARY KEY, data jsonb)"], check=True)
        ratios = []
        for number in range(1, args.rounds + 1):
            names = list(variants) if number % 2 else list(reversed(variants))
            tps = {name: run(dsn, variants[name], args.seconds, Path(tmp)) for name in names}
            one, striped = tps[list(variants)[0]], tps[list(variants)[1]]
            ratios.append(striped / one)
            print(
                f"round {number}: one row {one:7.0f} tps, striped {striped:7.0f} tps, ratio {striped / one:.2f}"
                f"   load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        print(f"striped ÷ one row: median {statistics.median(ratios):.2f} ({', '.join(f'{r:.2f}' for r in ratios)})")


if __name__ == "__main__":
    main()
