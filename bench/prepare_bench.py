"""Statements prepared on the server, two ways, under eventlet: psycopg2 with SQL ``PREPARE``/``EXECUTE``
(``trellis.statements``) and psycopg 3 with its automatic preparation (protocol-level, after
``prepare_threshold`` runs), each beside the same statement unprepared.

    .venv/bin/python -m bench.prepare_bench                      # 5 rounds of 2,000 lists per way
    PSYCOPG_WAIT_FUNC=wait_select .venv/bin/python -m bench.prepare_bench   # what psycopg 3 needs (below)

Needs psycopg 3 (``pip install "psycopg[binary]"``; not a dependency of Trellis). The process is
monkey-patched by eventlet like the server, psycopg2 made cooperative as ``trellis.db`` does. First a
check that psycopg 3 does not block the hub: four greenlets each run ``pg_sleep(0.3)`` on their own
connection; cooperative waiting takes ~0.3 s, blocking waiting ~1.2 s. psycopg 3 picks its C wait function
(``wait_c``: ``poll()`` in C, which eventlet cannot patch) unless told otherwise; it recognises gevent's
patching but not eventlet's, so it needs ``PSYCOPG_WAIT_FUNC=wait_select`` (eventlet's green ``select``).

The data: 100,000 rows shaped like a document table (``id``, ``data`` jsonb, a generated ``f_price``
column indexed with ``id``, timestamps, version) in a throwaway database; the statement is a list page
as ``documents.find_json`` sends it (``WHERE f_price < $1 ORDER BY f_price DESC NULLS LAST, id DESC
LIMIT 20``, data as text, timestamps formatted by PostgreSQL). Per way and round: wall time per
statement, this process's CPU per statement, and the PostgreSQL backend's (``/proc/<pid>/stat`` of
``pg_backend_pid()``); rounds interleave the ways.
"""

from __future__ import annotations

import eventlet

eventlet.monkey_patch()

import argparse  # noqa: E402 (after the monkey-patching, as in the server)
import os  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import psycopg2  # noqa: E402
from eventlet.support import psycopg2_patcher  # noqa: E402

from bench.common import throwaway_database  # noqa: E402
from bench.cpu_window import process_cpu  # noqa: E402
from trellis.statements import run_prepared  # noqa: E402

psycopg2_patcher.make_psycopg_green()

SETUP = """
CREATE TABLE docs (
    id varchar(32) PRIMARY KEY,
    data jsonb NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    version integer NOT NULL,
    f_price numeric GENERATED ALWAYS AS (CASE WHEN jsonb_typeof(data->'price') = 'number'
        THEN (data->>'price')::numeric END) STORED
);
INSERT INTO docs (id, data, created_at, updated_at, version)
SELECT md5(i::text), jsonb_build_object('title', 'Item number ' || i, 'price', round((random() * 1000)::numeric, 2),
    'tags', '["red","sale"]'::jsonb, 'owner', 'user' || (i % 1000)), now(), now(), 0
FROM generate_series(1, 100000) AS i;
CREATE INDEX docs_price ON docs (f_price NULLS FIRST, id);
"""
LIST = (
    "SELECT docs.id, CAST(docs.data AS TEXT) AS data, "
    "to_char(timezone('UTC', docs.created_at), 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS c, "
    "to_char(timezone('UTC', docs.updated_at), 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS u, docs.version "
    "FROM docs WHERE docs.f_price < %(p0)s ORDER BY docs.f_price DESC NULLS LAST, docs.id DESC "
    "LIMIT %(limit)s OFFSET %(skip)s"
)


def hub_check(dsn: str) -> float:
    """Seconds four greenlets take for ``pg_sleep(0.3)`` each on psycopg 3 connections of their own."""
    import psycopg

    def sleep(_: int) -> None:
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute("SELECT pg_sleep(0.3)")

    started = time.monotonic()
    list(eventlet.GreenPool().imap(sleep, range(4)))
    return time.monotonic() - started


def ways(dsn: str) -> dict[str, tuple[Callable[[dict[str, Any]], list[Any]], int]]:
    """name → (run one list, the backend's pid)."""
    import psycopg

    found: dict[str, tuple[Callable[[dict[str, Any]], list[Any]], int]] = {}

    def psycopg2_way(prepared: bool) -> tuple[Callable[[dict[str, Any]], list[Any]], int]:
        connection = psycopg2.connect(dsn)
        connection.autocommit = True
        info: dict[str, Any] = {}

        def run(values: dict[str, Any]) -> list[Any]:
            with connection.cursor() as cursor:
                if prepared:
                    run_prepared(cursor, info, LIST, values)
                else:
                    cursor.execute(LIST, values)
                return cursor.fetchall()

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return run, cursor.fetchone()[0]

    def psycopg3_way(prepared: bool) -> tuple[Callable[[dict[str, Any]], list[Any]], int]:
        # prepare_threshold: None never prepares; 5 is psycopg's default (prepared from the sixth run on).
        connection = psycopg.connect(dsn, autocommit=True, prepare_threshold=5 if prepared else None)

        def run(values: dict[str, Any]) -> list[Any]:
            return connection.execute(LIST, values).fetchall()

        return run, connection.execute("SELECT pg_backend_pid()").fetchone()[0]

    found["psycopg2, unprepared"] = psycopg2_way(False)
    found["psycopg2, PREPARE/EXECUTE"] = psycopg2_way(True)
    found["psycopg 3, unprepared"] = psycopg3_way(False)
    found["psycopg 3, automatic preparation"] = psycopg3_way(True)
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--statements", type=int, default=2000, help="lists per way and round")
    args = parser.parse_args(argv)
    with throwaway_database() as url:
        dsn = url.replace("postgresql+psycopg2://", "postgresql://")
        setup = psycopg2.connect(dsn)
        setup.autocommit = True
        with setup.cursor() as cursor:
            cursor.execute(SETUP)
            cursor.execute("VACUUM ANALYZE docs")  # alone: VACUUM cannot run in a multi-statement query
        setup.close()
        print(f"psycopg 3 wait function: {os.environ.get('PSYCOPG_WAIT_FUNC', 'its default')}")
        print(f"4 × pg_sleep(0.3) in greenlets on psycopg 3: {hub_check(dsn):.2f} s (cooperative ≈ 0.3 s)")
        found = ways(dsn)
        rnd = random.Random(36)
        results: dict[str, list[dict[str, float]]] = {name: [] for name in found}
        for number in range(1, args.rounds + 1):
            names = list(found) if number % 2 else list(reversed(found))
            for name in names:
                run, backend = found[name]
                values = [{"p0": rnd.randint(1, 950), "limit": 20, "skip": 0} for _ in range(args.statements)]
                for warm in values[:20]:
                    assert len(run(warm)) == 20
                ours, theirs, started = time.process_time(), process_cpu(backend), time.monotonic()
                for value in values:
                    run(value)
                n = len(values)
                row = {
                    "wall_us": (time.monotonic() - started) / n * 1e6,
                    "client_us": (time.process_time() - ours) / n * 1e6,
                    "pg_us": (process_cpu(backend) - theirs) / n * 1e6,
                }
                results[name].append(row)
                print(
                    f"round {number} {name:34} wall {row['wall_us']:6.0f} µs  client CPU {row['client_us']:5.0f} µs  "
                    f"PostgreSQL CPU {row['pg_us']:5.0f} µs per list",
                    flush=True,
                )
        print("\n| way | wall µs/list | client CPU µs | PostgreSQL CPU µs (per round) |")
        print("|---|---:|---:|---|")
        for name, rows in results.items():
            pg = ", ".join(f"{r['pg_us']:.0f}" for r in rows)
            print(
                f"| {name} | {statistics.median(r['wall_us'] for r in rows):,.0f} "
                f"| {statistics.median(r['client_us'] for r in rows):,.0f} "
                f"| {statistics.median(r['pg_us'] for r in rows):,.0f} ({pg}) |"
            )
        print(f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
