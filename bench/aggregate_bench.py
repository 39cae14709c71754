"""Aggregation: ``GET /database/Doc/aggregate?groupBy=category&count=true&sum=price`` beside the very same
SQL ``GROUP BY`` run through psycopg2, as the admin and as a user under access rules.

    flock /work/bench.lock .venv/bin/python -m bench.aggregate_bench            # 4 rounds, 2 s + 10 s runs
    flock /work/bench.lock .venv/bin/python -m bench.aggregate_bench --rounds 2 --duration 5 --no-write

Data: the access benchmark's (``bench/access_bench.py``: 100,000 ``Doc`` documents under access control
loaded through ``POST /database/Doc/many``, 10,000 users, 1,000 teams, an owner tuple per document and
20,000 grants; the measured user reads ~2%), each document with a ``category`` among 20 as well as its
``price``. One Trellis server process (eventlet, PostgreSQL on a throwaway database, its own
``redis-server`` child as in production; an aggregate keeps nothing there).

The raw side is the statement Trellis itself runs for the request, captured from its own code (an app in
this process on the same database) with its parameters, then executed by ``CONNECTIONS`` threads with a
psycopg2 connection each, as fast as they can: what the database alone gives for this query, so the
ratio is what Trellis (HTTP, routing, the token, the access predicate's parameters, JSON) costs on top.
Trellis is loaded by ``wrk`` with as many connections. Each round measures, per caller, both sides
(which goes first alternates); the ratio Trellis ÷ raw (req/s) is taken within a round and the median
over rounds reported, with the load average of the machine before each run (2 cores shared with other
engineers' work).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import threading
import time
from typing import Any

import psycopg2
import requests

from bench.access_bench import (
    _Recording,
    arguments,
    provenance,
    recording_app,
    seed,
)
from bench.access_data import _dsn
from bench.common import PG_ADMIN_DSN, ROOT, Server, bench_server, redis_child, report_header, wrk
from bench.cpu_window import pg_backends, process_cpu

RESULTS = ROOT / "bench" / "results" / "aggregate.md"
MODULES = "authentication,authorization,database,email,sms"
FIELDS = {"title": "String", "price": "Number", "category": "String"}
CATEGORIES = 20
QUERY = "/database/Doc/aggregate?groupBy=category&count=true&sum=price"
CONNECTIONS = 4  # both sides: enough to keep the 2 cores busy with a ~10-50 ms statement
GOAL = 0.7


def _document(i: int, rnd: random.Random) -> dict[str, Any]:
    return {"title": f"Doc {i}", "price": round(rnd.uniform(0, 1000), 2), "category": f"c{rnd.randrange(CATEGORIES)}"}


def captured_statement(server: Server, headers: dict[str, str]) -> tuple[str, Any, dict[str, Any]]:
    """``(sql, parameters, answer)``: the aggregate statement the server's code runs for ``QUERY`` as the
    caller of ``headers`` (an app in this process on the same database, its psycopg2 cursors recording)."""
    with recording_app(server) as app:
        _Recording.log.clear()
        response = app.test_client().get(QUERY, headers=headers)
        assert response.status_code == 200, response.get_json()
        found = [(sql, parameters) for sql, parameters in _Recording.log if "GROUP BY" in sql]
    assert len(found) == 1, found  # one statement, one round trip
    return found[0][0], found[0][1], response.get_json()


def raw(dsn: str, sql: str, parameters: Any, seconds: float, connections: int = CONNECTIONS) -> dict[str, float]:
    """``connections`` threads running ``sql`` for ``seconds``: req/s, latency percentiles (ms) and the CPU
    their PostgreSQL backends spent per statement (µs)."""
    latencies: list[list[float]] = [[] for _ in range(connections)]
    backends: list[int] = []
    start, finish, release = (threading.Barrier(connections + 1) for _ in range(3))
    deadline = [float("inf")]  # set once every connection is open

    def worker(mine: list[float]) -> None:
        with contextlib.closing(psycopg2.connect(dsn)) as connection, connection.cursor() as cursor:
            connection.autocommit = True  # as Trellis's read connection
            cursor.execute("SELECT pg_backend_pid()")
            backends.append(cursor.fetchone()[0])
            start.wait()
            while time.monotonic() < deadline[0]:
                began = time.perf_counter()
                cursor.execute(sql, parameters)
                cursor.fetchall()
                mine.append(time.perf_counter() - began)
            finish.wait()  # the backends' CPU is read before they go
            release.wait()

    threads = [threading.Thread(target=worker, args=(mine,)) for mine in latencies]
    for thread in threads:
        thread.start()
    start.wait()
    cpu = sum(process_cpu(pid) for pid in backends)
    began = time.monotonic()
    deadline[0] = began + seconds
    finish.wait()
    elapsed = time.monotonic() - began
    cpu = sum(process_cpu(pid) for pid in backends) - cpu
    release.wait()
    for thread in threads:
        thread.join()
    every = sorted(x for mine in latencies for x in mine)
    return {
        "rps": round(len(every) / elapsed, 1),
        "p50_ms": round(every[len(every) // 2] * 1000, 2),
        "p99_ms": round(every[min(len(every) - 1, int(len(every) * 0.99))] * 1000, 2),
        "non_2xx": 0.0,
        "cpu_us": cpu / max(len(every), 1) * 1e6,
    }


def trellis(server: Server, headers: dict[str, str], seconds: int) -> dict[str, float]:
    """wrk's figures, and the CPU per request (µs) of the server process and its PostgreSQL backends."""
    database = server.database_url.rsplit("/", 1)[1]
    pids = [server.process.pid, *pg_backends(PG_ADMIN_DSN, database)]
    cpu = sum(process_cpu(pid) for pid in pids)
    stats = wrk(server.url, connections=CONNECTIONS, duration=seconds, threads=1, headers=headers, paths=[QUERY])
    cpu = sum(process_cpu(pid) for pid in pids) - cpu
    return {**stats, "cpu_us": cpu / max(stats["rps"] * seconds, 1) * 1e6}


def run(args: argparse.Namespace) -> dict[str, Any]:
    rnd = random.Random(33)
    with redis_child() as redis_url, bench_server("postgresql", modules=MODULES, TRELLIS_REDIS_URL=redis_url) as server:
        seeded, callers, load_seconds = seed(server, args, rnd, FIELDS, _document)
        statements = {caller: captured_statement(server, headers) for caller, headers in callers.items()}
        for caller, headers in callers.items():  # the server answers what the captured statement gives
            answer = requests.get(server.url + QUERY, headers=headers, timeout=60).json()
            assert answer == statements[caller][2], (caller, answer)
        dsn = _dsn(server)
        plans = {}
        with contextlib.closing(psycopg2.connect(dsn)) as connection, connection.cursor() as cursor:
            for caller, (sql, parameters, _) in statements.items():
                for _ in range(2):
                    cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, parameters)
                    plan = "\n".join(row[0] for row in cursor.fetchall())
                plans[caller] = cursor.mogrify(sql, parameters).decode() + "\n\n" + plan
        rows: list[dict[str, Any]] = []
        for number in range(1, args.rounds + 1):
            for caller, headers in callers.items():
                sql, parameters, _ = statements[caller]
                row: dict[str, Any] = {"round": number, "caller": caller}
                sides = ["trellis", "raw"] if (number + len(rows)) % 2 else ["raw", "trellis"]
                for side in sides:
                    if args.warmup and side == "trellis":
                        trellis(server, headers, args.warmup)
                    elif args.warmup:
                        raw(dsn, sql, parameters, args.warmup)
                    load = os.getloadavg()[0]
                    result = (
                        trellis(server, headers, args.duration)
                        if side == "trellis"
                        else raw(dsn, sql, parameters, args.duration)
                    )
                    row[side] = {**result, "load": load}
                rows.append(row)
                print(
                    f"round {number} {caller}: trellis {row['trellis']['rps']} req/s, raw {row['raw']['rps']} req/s "
                    f"→ {row['trellis']['rps'] / row['raw']['rps']:.2f}× (CPU µs/req {row['trellis']['cpu_us']:,.0f} / "
                    f"{row['raw']['cpu_us']:,.0f}, load {row['trellis']['load']:.1f} / {row['raw']['load']:.1f}, "
                    f"non-2xx {int(row['trellis']['non_2xx'])})",
                    flush=True,
                )
    return {
        "rows": rows,
        "plans": plans,
        "seeded": seeded,
        "load_seconds": load_seconds,
        "answers": {c: s[2] for c, s in statements.items()},
    }


def report(result: dict[str, Any], args: argparse.Namespace, command: str, revision: str) -> str:
    rows, seeded = result["rows"], result["seeded"]
    share = len(seeded["readable"]) / args.documents * 100
    lines = [
        *report_header(
            "Aggregation benchmark", command, revision, "load: the 1-minute load average when a run started"
        ),
        f"Data: {args.documents:,} `Doc` documents (`category` among {CATEGORIES}, `price`) under access control, "
        f"{args.users:,} users, 1,000 teams, {seeded['owners']:,} owner tuples and {seeded['grants']:,} grants "
        f"(the access benchmark's seeding; loaded in {result['load_seconds']:.0f} s). The user reads "
        f"{len(seeded['readable']):,} documents ({share:.1f}%). Request: `GET {QUERY}`. Trellis: one server "
        f"process (eventlet), `wrk -t1 -c{CONNECTIONS}`; raw: the statement Trellis runs (below), "
        f"{CONNECTIONS} psycopg2 connections in threads. {args.warmup} s warm-up + {args.duration} s per run, "
        f"{args.rounds} interleaved rounds (the side that goes first alternates).",
        "",
        "| caller | Trellis ÷ raw (median) | per round | Trellis req/s | raw req/s | Trellis p50 / p99 ms "
        "| raw p50 / p99 ms | CPU µs/req Trellis (server + PostgreSQL) / raw (PostgreSQL) | load | goal |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for caller in ("admin", "user"):
        mine = [r for r in rows if r["caller"] == caller]
        ratios = [r["trellis"]["rps"] / r["raw"]["rps"] for r in mine]

        def med(side: str, key: str, rows_: list[dict[str, Any]] = mine) -> float:
            return statistics.median(r[side][key] for r in rows_)

        loads = [r[side]["load"] for r in mine for side in ("trellis", "raw")]
        lines.append(
            f"| {caller} | **{statistics.median(ratios):.2f}** | {', '.join(f'{x:.2f}' for x in ratios)} "
            f"| {med('trellis', 'rps'):,.1f} | {med('raw', 'rps'):,.1f} "
            f"| {med('trellis', 'p50_ms'):.1f} / {med('trellis', 'p99_ms'):.1f} "
            f"| {med('raw', 'p50_ms'):.1f} / {med('raw', 'p99_ms'):.1f} "
            f"| {med('trellis', 'cpu_us'):,.0f} / {med('raw', 'cpu_us'):,.0f} | {min(loads):.1f}–{max(loads):.1f} | ≥ {GOAL} |"
        )
    bad = [(r["caller"], int(r["trellis"]["non_2xx"] + r["trellis"].get("socket_errors", 0))) for r in rows]
    lines += [
        "",
        "Non-2xx answers and socket errors (Trellis): " + ("; ".join(f"{c}: {n}" for c, n in bad if n) or "none."),
        "",
        "Groups answered (first two of each caller): "
        + "; ".join(f"{c}: `{a['groups'][:2]}` of {a['count']}" for c, a in result["answers"].items()),
        "",
        "## EXPLAIN (ANALYZE, BUFFERS)",
        "",
        "The statement the server runs for the request, captured from its own code (second run shown).",
    ]
    for caller, plan in result["plans"].items():
        lines += ["", f"### {caller}", "", "```", plan, "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = arguments(__doc__.splitlines()[0], RESULTS, argv)
    command, revision = provenance("bench.aggregate_bench", argv)
    text = report(run(args), args, command, revision)
    print(text)
    if not args.no_write:
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()
