"""Full-text search on PostgreSQL: a two-word search beside a ``title[$contains]`` list, as the admin and as
a user under access control, and (re)building the index on 100,000 documents while writes go on.

    flock /work/bench.lock .venv/bin/python -m bench.search_bench            # 4 rounds, 2 s warm-up + 8 s
    flock /work/bench.lock .venv/bin/python -m bench.search_bench --rounds 2 --duration 5 --documents 20000

One Trellis server process (eventlet, PostgreSQL on a throwaway database, no Redis: every exact count is
computed, the cost a search's count has when it is new). The data:

- 100,000 documents of ``Doc {title: String, body: String, price: Number}`` under access control, loaded
  through ``POST /database/Doc/many``; title 3–8 words and body 20–40 words drawn from a 5,000-word
  vocabulary with Zipf-like frequencies (word ``i`` with weight 1/(i+10)), so common and rare words both
  exist;
- the users, teams and tuples of ``bench/access_bench.py`` (``seed_access``: the measured user reads ~2%
  of the documents).

Index build: the schema is created with ``searchable`` off and the documents loaded; then ``PUT`` makes
``title`` and ``body`` searchable (``CREATE INDEX CONCURRENTLY`` after the change commits) while a
writer thread creates documents one at a time; the request's duration and the writes' latencies during
it are reported. The same is done for a language change (``simple`` → ``english``: a new index beside the
old). For comparison, the time ``ALTER TABLE … ADD COLUMN … GENERATED ALWAYS AS (tsvector) STORED``
takes (in a transaction rolled back; it holds an ACCESS EXCLUSIVE lock all along). And SQLite's rebuild
(the FTS5 table filled in the change's transaction) on as many rows, through the module's DDL.

Cases, each as the user and the admin (Bearer tokens), interleaved in rounds (who goes first alternates):

- search: ``GET /database/Doc?search=<w1> <w2>&limit=20`` (ranked, exact count), two words from the
  vocabulary's ranks 20–400 (each in ~0.3–5% of the documents);
- contains: ``GET /database/Doc?title[$contains]=<w1>&limit=20`` (exact count), the same first words.

Ratios are search ÷ contains req/s within a round, per caller; the median over rounds is reported.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg2
import requests

from bench.access_bench import load_documents, measure
from bench.access_data import _dsn, seed_access, sign_in
from bench.common import PG_ADMIN_DSN, ROOT, Server, bench_server, paired_line
from bench.cpu_window import pg_backends

RESULTS = ROOT / "bench" / "results" / "search.md"
MODULES = "authentication,authorization,database,email,sms"
FIELDS = {"title": "String", "body": "String", "price": "Number"}
SEARCHABLE = {"title": {"type": "String", "searchable": True}, "body": {"type": "String", "searchable": True}}
VOCABULARY = 5000


def _words(rnd: random.Random) -> list[str]:
    """Pronounceable made-up words (no stop words, no stemming surprises across languages)."""
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "du", "sa", "fo", "gi", "be", "ho"]
    found: dict[str, None] = {}
    while len(found) < VOCABULARY:
        found["".join(rnd.choice(syllables) for _ in range(rnd.randint(2, 4)))] = None
    return list(found)


def load(server: Server, documents: int, rnd: random.Random, vocabulary: list[str]) -> list[str]:
    weights = [1 / (i + 10) for i in range(len(vocabulary))]

    def text(rnd: random.Random, low: int, high: int) -> str:
        return " ".join(rnd.choices(vocabulary, weights, k=rnd.randint(low, high)))

    def make(_index: int, rnd: random.Random) -> dict[str, Any]:
        return {"title": text(rnd, 3, 8), "body": text(rnd, 20, 40), "price": round(rnd.uniform(0, 1000), 2)}

    return load_documents(server, documents, rnd, FIELDS, make)


class Writer(threading.Thread):
    """Creates documents one at a time until stopped; records each write's latency (ms)."""

    def __init__(self, server: Server) -> None:
        super().__init__(daemon=True)
        self.server, self.latencies, self.failures = server, [], 0
        self.stop = threading.Event()

    def run(self) -> None:
        http = requests.Session()
        while not self.stop.is_set():
            started = time.perf_counter()
            response = http.post(
                f"{self.server.url}/database/Doc",
                json={"title": "written during the build", "price": 1},
                headers=self.server.admin_headers,
                timeout=120,
            )
            self.latencies.append((time.perf_counter() - started) * 1000)
            self.failures += response.status_code != 201


def change_schema(server: Server, body: dict[str, Any]) -> dict[str, Any]:
    """A schema change timed with a writer running beside it."""
    writer = Writer(server)
    writer.start()
    time.sleep(1)  # the writer is going
    before = len(writer.latencies)
    started = time.perf_counter()
    response = requests.put(
        f"{server.url}/admin/database/schemas/Doc", json=body, headers=server.admin_headers, timeout=600
    )
    seconds = time.perf_counter() - started
    during = writer.latencies[before:]
    writer.stop.set()
    writer.join(30)
    response.raise_for_status()
    return {
        "seconds": round(seconds, 2),
        "writes": len(during),
        "write_p50_ms": round(statistics.median(during), 1) if during else None,
        "write_max_ms": round(max(during), 1) if during else None,
        "write_failures": writer.failures,
    }


def generated_column_seconds(server: Server) -> float:
    """How long adding a STORED generated tsvector column would hold its exclusive lock (rolled back)."""
    with contextlib.closing(psycopg2.connect(_dsn(server))) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT storage->>'table' FROM database_schemas WHERE name = 'Doc'")
        table = cursor.fetchone()[0]
        started = time.perf_counter()
        cursor.execute(
            f'ALTER TABLE "{table}" ADD COLUMN bench_tsv tsvector GENERATED ALWAYS AS ('
            "coalesce(to_tsvector('simple'::regconfig, data -> 'title'), ''::tsvector) || "
            "coalesce(to_tsvector('simple'::regconfig, data -> 'body'), ''::tsvector)) STORED"
        )
        seconds = time.perf_counter() - started
        connection.rollback()
    return round(seconds, 2)


def sqlite_rebuild_seconds(documents: int, rnd: random.Random, vocabulary: list[str]) -> dict[str, float]:
    """SQLite: how long making ``title`` and ``body`` searchable takes on ``documents`` rows (the FTS5 table,
    its triggers and the copy of every row, in one transaction: the one writer waits meanwhile), through
    the module's own DDL (``tables.create_table``, ``search.create``) on a file database."""
    import tempfile

    import sqlalchemy as sa

    from trellis_database import search, tables
    from trellis_database.fields import parse_field

    fields = {name: parse_field(name, definition) for name, definition in {**FIELDS, **SEARCHABLE}.items()}
    weights = [1 / (i + 10) for i in range(len(vocabulary))]
    with tempfile.TemporaryDirectory() as folder:
        engine = sa.create_engine(f"sqlite:///{folder}/rebuild.db")
        with engine.begin() as connection:
            tables.create_table(connection, "dbdoc_bench", fields)
            rows = [
                {
                    "id": f"{i:032x}",
                    "data": json.dumps(
                        {
                            "title": " ".join(rnd.choices(vocabulary, weights, k=rnd.randint(3, 8))),
                            "body": " ".join(rnd.choices(vocabulary, weights, k=rnd.randint(20, 40))),
                        }
                    ),
                }
                for i in range(documents)
            ]
            connection.execute(
                sa.text(
                    "INSERT INTO dbdoc_bench (id, data, created_at, updated_at, version) "
                    "VALUES (:id, :data, '2026-01-01', '2026-01-01', 0)"
                ),
                rows,
            )
        state = search.desired("dbdoc_bench", fields, {"search": {"language": "english"}}, "sqlite")
        with engine.begin() as connection:
            started = time.perf_counter()
            search.create(connection, "dbdoc_bench", state)
            built = time.perf_counter() - started
        with engine.begin() as connection:
            started = time.perf_counter()
            search.drop(connection, state)
            dropped = time.perf_counter() - started
        engine.dispose()
    return {"build_seconds": round(built, 2), "drop_seconds": round(dropped, 2)}


def explain(server: Server, query: str) -> str:
    """The plan of the admin's search page, as the server builds it (from pg_stat_statements-free EXPLAIN
    of the same SQL the route runs: the route's statement is rebuilt here through the module)."""
    with contextlib.closing(psycopg2.connect(_dsn(server))) as connection, connection.cursor() as cursor:
        cursor.execute(
            "SELECT storage->>'table', storage->'search'->>'language' FROM database_schemas WHERE name = 'Doc'"
        )
        table, language = cursor.fetchone()
        vector = (
            f"(coalesce(to_tsvector('{language}'::regconfig, data -> 'body'), ''::tsvector) || "
            f"coalesce(to_tsvector('{language}'::regconfig, data -> 'title'), ''::tsvector))"
        )
        tsquery = f"to_tsquery('{language}'::regconfig, %s)"
        cursor.execute(
            f'EXPLAIN (ANALYZE, BUFFERS) SELECT id FROM "{table}" WHERE {vector} @@ {tsquery} '
            f"ORDER BY ts_rank({vector}, {tsquery}) DESC, id LIMIT 20",
            (query, query),
        )
        return "\n".join(row[0] for row in cursor.fetchall())


def run(args: argparse.Namespace) -> dict[str, Any]:
    rnd = random.Random(33)
    vocabulary = _words(rnd)
    sqlite = sqlite_rebuild_seconds(args.documents, random.Random(34), vocabulary)
    print({"sqlite": sqlite}, flush=True)
    with bench_server("postgresql", modules=MODULES) as server:
        started = time.monotonic()
        doc_ids = load(server, args.documents, rnd, vocabulary)
        measured, user_token, admin_token = sign_in(server)
        seeded = seed_access(server, doc_ids, measured, args.users, args.grants, rnd)
        load_seconds = time.monotonic() - started
        builds = {
            "generated column (ALTER TABLE, exclusive lock)": {"seconds": generated_column_seconds(server)},
            "add searchable (simple)": change_schema(server, {"fields": {**FIELDS, **SEARCHABLE}}),
            "language simple → english": change_schema(server, {"modelOptions": {"search": {"language": "english"}}}),
        }
        print(builds, flush=True)
        with contextlib.closing(psycopg2.connect(_dsn(server))) as connection, connection.cursor() as cursor:
            connection.autocommit = True
            cursor.execute("VACUUM ANALYZE")
        callers = {
            "user": {"Authorization": f"Bearer {user_token}"},
            "admin": {"Authorization": f"Bearer {admin_token}"},
        }
        pairs = [(rnd.choice(vocabulary[20:400]), rnd.choice(vocabulary[20:400])) for _ in range(5000)]
        cases = {
            "search": [f"/database/Doc?search={a}%20{b}&limit=20" for a, b in pairs],
            "contains": [f"/database/Doc?title[$contains]={a}&limit=20" for a, _ in pairs],
        }
        sample = {}
        for name, paths in cases.items():
            for caller, headers in callers.items():
                response = requests.get(server.url + paths[0], headers=headers, timeout=60)
                assert response.status_code == 200, (name, caller, response.text)
                sample[f"{name} {caller}"] = response.json()["count"]
        plan = explain(server, f"{pairs[0][0]} & {pairs[0][1]}:*")
        database = server.database_url.rsplit("/", 1)[1]
        rows: list[dict[str, Any]] = []
        for number in range(1, args.rounds + 1):
            for caller, headers in callers.items():
                order = ["search", "contains"] if (number + len(rows)) % 2 else ["contains", "search"]
                row: dict[str, Any] = {"round": number, "caller": caller}
                for name in order:
                    pids = [server.process.pid, *pg_backends(PG_ADMIN_DSN, database)]
                    row[name] = measure(server.url, cases[name], headers, pids, args.warmup, args.duration)
                rows.append(row)
                print(paired_line(number, caller, ("search", row["search"]), ("contains", row["contains"])), flush=True)
    return {
        "rows": rows,
        "builds": builds,
        "seeded": seeded,
        "load_seconds": load_seconds,
        "sample": sample,
        "plan": plan,
        "sqlite": sqlite,
    }


def report(result: dict[str, Any], args: argparse.Namespace) -> str:
    revision = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    load = os.getloadavg()
    lines = [
        "# Full-text search (PostgreSQL)",
        "",
        f"`{' '.join(['python -m bench.search_bench', *sys.argv[1:]])}` at {revision.strip()}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average at the end "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (2 cores shared with other engineers).",
        "",
        f"{args.documents:,} documents under access control, loaded and seeded in {result['load_seconds']:.0f} s; "
        f"the measured user reads {len(result['seeded']['readable']):,} of them. One server process, no Redis "
        "(every exact count computed). Counts of the first request of each case: "
        + ", ".join(f"{k} {v}" for k, v in result["sample"].items())
        + ".",
        "",
        "## (Re)building the index while writes go on",
        "",
        "| change | seconds | writes during it | write p50 ms | write max ms | failed writes |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, b in result["builds"].items():
        lines.append(
            f"| {name} | {b['seconds']} | {b.get('writes', '—')} | {b.get('write_p50_ms', '—')} | "
            f"{b.get('write_max_ms', '—')} | {b.get('write_failures', '—')} |"
        )
    sqlite = result["sqlite"]
    lines += [
        "",
        f"SQLite (for comparison; the module's own DDL on a file database, {args.documents:,} rows): building the "
        f"FTS5 table, its triggers and copying every row took {sqlite['build_seconds']} s in one transaction "
        f"(SQLite's one writer waits for it); dropping it {sqlite['drop_seconds']} s.",
        "",
        "## Search beside `title[$contains]` (limit 20, exact count)",
        "",
        "| round | caller | search req/s | p50 ms | p99 ms | contains req/s | p50 ms | p99 ms | search ÷ contains |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    ratios: dict[str, list[float]] = {}
    for row in result["rows"]:
        s, c = row["search"], row["contains"]
        ratio = s["rps"] / c["rps"] if c["rps"] else float("nan")
        ratios.setdefault(row["caller"], []).append(ratio)
        lines.append(
            f"| {row['round']} | {row['caller']} | {s['rps']} | {s['p50_ms']} | {s['p99_ms']} | {c['rps']} | "
            f"{c['p50_ms']} | {c['p99_ms']} | {ratio:.2f}× |"
        )
    lines += [""]
    for caller, values in ratios.items():
        lines.append(f"- {caller}: median search ÷ contains {statistics.median(values):.2f}× over {len(values)} rounds")
    lines += ["", "## Plan of a search page (admin, as the route's SQL)", "", "```", result["plan"], "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--grants", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args(argv)
    result = run(args)
    # The raw figures first: a report that fails to render must not lose a run that took minutes.
    Path(args.output).with_suffix(".json").write_text(json.dumps(result, default=str, indent=1))
    text = report(result, args)
    with open(args.output, "w") as out:
        out.write(text)
    print(text)


if __name__ == "__main__":
    main()
