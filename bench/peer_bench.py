"""Trellis beside Parse Server 9.10 (its PostgreSQL adapter): four paired ratios, interleaved rounds.

    .venv/bin/python -m bench.peer_bench                      # 4 rounds, 3 s warm-up + 15 s per run
    .venv/bin/python -m bench.peer_bench --rounds 4 --warmup 2 --duration 8

Parse comes from ``/work/shared/peers/parse`` (``TRELLIS_PEER_PARSE`` changes it; its README says how to
set it up: ``npm ci`` there once, PostgreSQL role and database ``bench``). Both servers are one process
on the same PostgreSQL and are driven by the same ``wrk -t1 -c16``. Both hold the same 100,000 ``Item``
documents: Parse's ``seed.sh`` makes them, and the same rows (title, price, tags, owner) are loaded into
Trellis through ``POST /database/Item/many``, with the same indexes (price only; ``--index-all`` indexes
every field, Trellis's default). Trellis runs with its own throwaway ``redis-server`` (counts
are kept there, as in production) on a free port.

Operations (Trellis ÷ Parse, req/s):
- get by id: ``GET /database/Item/<id>`` vs ``GET /parse/classes/Item/<id>`` (5,000 random ids);
- list with its exact count: ``?price[$lt]=X&sort=-price&limit=20`` vs
  ``?where={"price":{"$lt":X}}&order=-price&limit=20&count=1`` (X random in 1..950 per request);
- the same list without a count (``count=none``; Parse without ``count=1``), when Trellis accepts it;
- create: ``POST`` a small Item; update: ``PATCH /database/Item/<id> {price}`` vs ``PUT`` on Parse;
- and get by id against a bare Flask JSON route served the same way (the ceiling).

Each round runs every operation on both servers, alternating which goes first; ratios are taken
within a round and the median over rounds is reported. ``--as-user`` calls Trellis as a user under access
control and Parse as a user under its ACLs, both given the access benchmark's data (10,000 users, 1,000
teams three levels deep, an owner per Item and 20,000 grants to users and teams: the measured user reads
~2% of the Items; on Parse the teams are roles, sub-teams in their parent's ``roles`` relation, and each
Item's ``_rperm``/``_wperm`` name the same users and roles), and runs an admin's Trellis (access off) in the
same rounds: user ÷ admin is then paired too. ``--without-event-log`` runs a third
Trellis (the admin's, ``TRELLIS_EVENTS=false``) in the same rounds: every write of ours records an event,
Parse's none, and this prices that difference beside Parse. "Foreign CPU" is the share of the machine's
two cores used during a measured run by processes that are not part of it (other engineers' tests):
total busy time from ``/proc/stat`` minus the server under test, wrk, and the PostgreSQL backends
connected to the server's database. ``--base REV`` runs, in the same rounds, the admin on a Trellis of
revision REV (a git worktree first on that server's ``PYTHONPATH``): this tree ÷ base, paired by round,
is the before/after of a change beside the same Parse.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import psycopg2
import requests

from bench import common
from bench.access_data import seed_access, sign_in
from bench.common import ROOT, bench_server, ceiling_server, checkout, paired_line, redis_child
from bench.cpu_window import CpuWindow, pg_backends, process_cpu
from bench.peer_cases import ACCESS, CONNECTIONS, LIKE_PARSE, NEW_ITEM, SCHEMA, trellis_cases
from bench.peer_parse import PARSE_DSN, PARSE_URL, ParseUser, parse_cases, parse_pid, parse_server, parse_under_access
from bench.peer_report import load_average, report

RESULTS = ROOT / "bench" / "results" / "peer.md"
TRIGGERS = ROOT / "bench" / "peer_triggers"  # the same two triggers on both sides (--triggers)


# ---- CPU accounting -------------------------------------------------------------------------------


# ---- servers ------------------------------------------------------------------------------------


def load_trellis(
    url: str, headers: dict[str, str], options: dict[str, Any] | None = None, fields: dict[str, Any] = LIKE_PARSE
) -> list[str]:
    """The rows Parse's seed made, loaded into Trellis in the same order; returns the new ids. ``options``:
    the schema's ``modelOptions`` (access control); ``fields``: the schema's fields (their indexes)."""
    schema = {"name": "Item", "fields": fields, **({"modelOptions": options} if options else {})}
    requests.post(f"{url}/admin/database/schemas", json=schema, headers=headers, timeout=60).raise_for_status()
    with contextlib.closing(psycopg2.connect(PARSE_DSN)) as connection, connection.cursor() as cursor:
        cursor.execute('SELECT title, price, tags, owner FROM "Item" ORDER BY "createdAt" DESC, "objectId"')
        rows = cursor.fetchall()
    ids: list[str] = []
    session = requests.Session()
    for start in range(0, len(rows), 1000):
        docs = [{"title": t, "price": p, "tags": tags, "owner": o} for t, p, tags, o in rows[start : start + 1000]]
        response = session.post(f"{url}/database/Item/many", json={"docs": docs}, headers=headers, timeout=300)
        response.raise_for_status()
        ids += [doc["_id"] for doc in response.json()["docs"]]
    return ids


def forget_created(database_url: str) -> None:
    """The Items the last round's creates made, and their grants, deleted by SQL: a user owns what it
    creates, so without this the measured user's ~2% would grow by a round's creates (~5,000) every round,
    on Trellis the set its pages test membership of with them. The change numbers do not move, which is
    safe here: no count was kept under the current one since those creates, and the next is of what is left."""
    dsn = database_url.replace("postgresql+psycopg2://", "postgresql://")
    with contextlib.closing(psycopg2.connect(dsn)) as connection, connection.cursor() as cursor:
        if dsn == PARSE_DSN:
            cursor.execute('DELETE FROM "Item" WHERE title = %s', (NEW_ITEM["title"],))
        else:
            cursor.execute("SELECT to_regclass('authz_relations') IS NOT NULL")
            granted = cursor.fetchone()[0]
            cursor.execute("SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'dbdoc%%'")
            for (table,) in cursor.fetchall():
                gone = f"DELETE FROM {table} WHERE data ->> 'title' = %s RETURNING id"
                if granted:
                    gone = (
                        f"WITH gone AS ({gone}) DELETE FROM authz_relations WHERE resource_id IN (SELECT id FROM gone)"
                    )
                cursor.execute(gone, (NEW_ITEM["title"],))
        connection.commit()


def vacuum(database_url: str) -> None:
    dsn = database_url.replace("postgresql+psycopg2://", "postgresql://")
    with contextlib.closing(psycopg2.connect(dsn)) as connection:
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")


# ---- load ---------------------------------------------------------------------------------------


def wrk(
    base: str,
    paths: list[str],
    seconds: int,
    method: str = "GET",
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> dict[str, float]:
    """One measured load: ``wrk -t1 -c16`` on ``paths`` (each request the next path)."""
    return common.wrk(
        base,
        connections=CONNECTIONS,
        duration=seconds,
        threads=1,
        method=method,
        headers=headers,
        body=body,
        paths=paths,
    )


def measure(
    base: str, case: dict[str, Any], server_pid: int, backends: Callable[[], list[int]], warmup: int, seconds: int
) -> dict[str, float]:
    """wrk's figures, the CPU shares of the run, and per request the server process's CPU and its
    PostgreSQL backends' (listed after the warm-up, when the pools have opened their connections):
    their own work, which other engineers' load moves far less than req/s."""
    if warmup:
        wrk(base, case["paths"], warmup, case.get("method", "GET"), case.get("body"), case.get("headers"))
    pg = backends()
    window = CpuWindow([server_pid, *pg])
    server, pg_before = process_cpu(server_pid), {pid: process_cpu(pid) for pid in pg}
    stats = wrk(base, case["paths"], seconds, case.get("method", "GET"), case.get("body"), case.get("headers"))
    requests_done = max(stats["rps"] * seconds, 1)
    cpu_us = (process_cpu(server_pid) - server) / requests_done * 1e6
    # Backends listed again: one opened during the run counts whole, one closed during it is lost (its
    # CPU is no longer readable), so a pool that churns connections is undercounted, never negative.
    after = {pid: process_cpu(pid) for pid in backends()}
    pg_us = sum(max(0.0, cpu - pg_before.get(pid, 0.0)) for pid, cpu in after.items()) / requests_done * 1e6
    churn = len(set(pg) ^ set(after))
    return {**stats, **window.close(), "server_cpu_us": cpu_us, "pg_cpu_us": pg_us, "backends_churned": churn}


# ---- running as a user under access control ---------------------------------------------------------

ACCESS_MODULES = "authentication,authorization,database,email,sms"
PLAIN_MODULES = "authentication,database,email,sms"


def as_user(url: str, admin_headers: dict[str, str], database_url: str, doc_ids: list[str]) -> dict[str, str]:
    """A signed-up user who may edit (so read) every Item, as Parse's master key may: one ``editor`` tuple
    per document, written by bulk SQL into the Authorization module's table. Returns its headers."""
    body = {"email": "peer@example.com", "password": "peer-bench-password-1"}
    requests.post(f"{url}/authentication/users", json=body, headers=admin_headers, timeout=30).raise_for_status()
    tokens = requests.post(f"{url}/authentication/local", json=body, timeout=30)
    tokens.raise_for_status()
    subject = f"User:{tokens.json()['userId']}"
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    dsn = database_url.replace("postgresql+psycopg2://", "postgresql://")
    with contextlib.closing(psycopg2.connect(dsn)) as connection, connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO authz_relations (id, subject, relation, resource_type, resource_id, created_at) "
            "SELECT md5(random()::text || d), %s, 'editor', 'Item', d, %s::timestamptz FROM unnest(%s::varchar[]) AS d",
            (subject, now, doc_ids),
        )
        connection.commit()
    return {"Authorization": f"Bearer {tokens.json()['accessToken']}"}


# ---- a user under access control on both sides -----------------------------------------------------

USERS, GRANTS = 10_000, 20_000  # the access benchmark's sizes (bench/access_bench.py)


class UnderAccess(NamedTuple):
    """Trellis's measured user (headers, Items it may read and edit) and Parse's twin."""

    headers: dict[str, str]
    readable: list[str]
    editable: list[str]
    parse: ParseUser


def under_access(trellis: Any, trellis_ids: list[str], rnd: random.Random) -> UnderAccess:
    """The access benchmark's users, teams and grants (``bench.access_bench.seed_access``: the measured user
    reads ~2% of the Items, through its own grants and its team's, its team's parent's and root's) on
    Trellis, and the same access given on Parse (:func:`parse_under_access`)."""
    measured, token, _ = sign_in(trellis)
    plan = seed_access(trellis, trellis_ids, measured, USERS, GRANTS, rnd, resource="Item")
    subjects = {f"User:{measured}", *(f"Team:{team}" for team in plan["teams"])}
    readable = sorted({d for s, _, d in plan["relations"] if s in subjects})
    editable = sorted({d for s, r, d in plan["relations"] if s in subjects and r != "reader"})
    if set(readable) != set(plan["readable"]):
        raise SystemExit("the measured user's readable Items differ from what authz_relations gives it")
    return UnderAccess(
        {"Authorization": f"Bearer {token}"},
        readable,
        editable,
        parse_under_access(plan, measured, trellis_ids, readable, editable),
    )


def run(
    rounds: int,
    warmup: int,
    seconds: int,
    documents: int,
    user: bool = False,
    only: list[str] | None = None,
    fields: dict[str, Any] = LIKE_PARSE,
    without_log: bool = False,
    base: str | None = None,
    triggers: bool = False,
) -> list[dict[str, Any]]:
    """Every round: each operation on each side, the sides' order turning round by round. With ``user``
    the user's Trellis (access control on) runs beside Parse's user under ACLs (:func:`under_access`) *and*
    beside an admin's Trellis (a second
    server, access off, its own database and Redis), so that user ÷ admin is a ratio of the same round.
    With ``without_log`` a third Trellis (the admin's, ``TRELLIS_EVENTS=false``, its own database and
    Redis) runs in the same rounds: what the event log costs against Parse, which records no event. With
    ``base`` (a revision) another admin's Trellis runs that revision's code (a worktree first on its
    ``PYTHONPATH``) in the same rounds: this tree ÷ base is a ratio of the same round. With ``triggers``
    Parse runs ``peer_triggers/triggers.js`` (a beforeSave and an afterSave on Item) and Trellis the same
    two triggers (``peer_triggers/triggers.py``), and a Trellis without triggers (the Functions module
    loaded, no file) runs in the same rounds: with ÷ without is a ratio of the same round."""
    rnd = random.Random(15)
    results: list[dict[str, Any]] = []
    modules = ACCESS_MODULES if user else PLAIN_MODULES
    functions: dict[str, str] = {}
    if triggers:
        modules += ",functions"
        functions = {"TRELLIS_FUNCTIONS_PATH": str(TRIGGERS)}
        fields = {**fields, "stamped": {"type": "Boolean", "index": False}}
    with contextlib.ExitStack() as stack:
        parse_ids = stack.enter_context(parse_server(documents, TRIGGERS / "triggers.js" if triggers else None))
        redis_url = stack.enter_context(redis_child())
        trellis = stack.enter_context(
            bench_server("postgresql", modules=modules, TRELLIS_REDIS_URL=redis_url, **functions)
        )
        ceiling = stack.enter_context(ceiling_server())
        trellis_ids = load_trellis(trellis.url, trellis.admin_headers, ACCESS if user else None, fields)
        access = under_access(trellis, trellis_ids, rnd) if user else None
        ours = (
            trellis_cases(access.readable, rnd, access.headers, access.editable)
            if access
            else trellis_cases(trellis_ids, rnd)
        )
        sides = {
            "trellis": _Side(trellis.url, ours, trellis.process.pid, trellis.database_url),
            "parse": _Side(
                PARSE_URL.rsplit("/parse", 1)[0],
                parse_cases(parse_ids, rnd, access.parse if access else None),
                parse_pid(),
                PARSE_DSN,
            ),
        }
        if user:
            admin_redis = stack.enter_context(redis_child())
            admin = stack.enter_context(
                bench_server("postgresql", modules=PLAIN_MODULES, TRELLIS_REDIS_URL=admin_redis)
            )
            admin_ids = load_trellis(admin.url, admin.admin_headers, None, fields)
            sides["admin"] = _Side(admin.url, trellis_cases(admin_ids, rnd), admin.process.pid, admin.database_url)
        if without_log:
            bare_redis = stack.enter_context(redis_child())
            bare = stack.enter_context(
                bench_server("postgresql", modules=PLAIN_MODULES, TRELLIS_REDIS_URL=bare_redis, TRELLIS_EVENTS="false")
            )
            bare_ids = load_trellis(bare.url, bare.admin_headers, None, fields)
            sides["unlogged"] = _Side(bare.url, trellis_cases(bare_ids, rnd), bare.process.pid, bare.database_url)
        if triggers:
            plain_redis = stack.enter_context(redis_child())
            plain = stack.enter_context(bench_server("postgresql", modules=modules, TRELLIS_REDIS_URL=plain_redis))
            plain_ids = load_trellis(plain.url, plain.admin_headers, None, fields)
            sides["plain"] = _Side(plain.url, trellis_cases(plain_ids, rnd), plain.process.pid, plain.database_url)
        if base is not None:
            pythonpath = stack.enter_context(checkout(base))
            base_redis = stack.enter_context(redis_child())
            before = stack.enter_context(
                bench_server("postgresql", modules=PLAIN_MODULES, TRELLIS_REDIS_URL=base_redis, PYTHONPATH=pythonpath)
            )
            base_ids = load_trellis(before.url, before.admin_headers, None, fields)
            sides["base"] = _Side(before.url, trellis_cases(base_ids, rnd), before.process.pid, before.database_url)
        names = [name for name in sides["trellis"].cases if only is None or name in only]
        for number in range(1, rounds + 1):
            # Every database starts every round vacuumed: a round's lists otherwise follow the previous
            # round's ~25,000 creates and updates, whose cleared visibility map sends every count to the heap
            # (on both sides: 2.39× in round 1, 1.61× and 0.84× after, with autovacuum running meanwhile).
            for side in sides.values():
                if user:
                    forget_created(side.database_url)
                vacuum(side.database_url)
            for name in names:
                turn = (number + len(results)) % len(sides)
                order = [*sides][turn:] + [*sides][:turn]
                row: dict[str, Any] = {"round": number, "operation": name}
                for label in order:
                    row[label] = sides[label].measure(name, warmup, seconds)
                results.append(row)
                _print_row(row)
            top = measure(ceiling.url, {"paths": ["/item"]}, ceiling.process.pid, list, warmup, seconds)
            results.append({"round": number, "operation": "floor", "floor": top})
            print(
                f"round {number}: bare Flask route (the floor) {top['rps']} req/s, "
                f"{top['server_cpu_us']:.0f} µs/request (foreign CPU {top['foreign_pct']:.0f}%)",
                flush=True,
            )
    return results


class _Side(NamedTuple):
    """One server of the comparison: its base URL, cases (:func:`_cases`), process and database."""

    url: str
    cases: dict[str, dict[str, Any]]
    pid: int
    database_url: str

    def measure(self, name: str, warmup: int, seconds: int) -> dict[str, float]:
        database = self.database_url.rsplit("/", 1)[1]
        return measure(self.url, self.cases[name], self.pid, lambda: pg_backends(PARSE_DSN, database), warmup, seconds)


def _print_row(row: dict[str, Any]) -> None:
    print(paired_line(row["round"], row["operation"], ("trellis", row["trellis"]), ("parse", row["parse"])), flush=True)
    print(
        "    µs/request server + PostgreSQL: trellis {:.0f} + {:.0f}, parse {:.0f} + {:.0f} "
        "(backends opened or closed during the run: {}, {})".format(
            row["trellis"]["server_cpu_us"],
            row["trellis"]["pg_cpu_us"],
            row["parse"]["server_cpu_us"],
            row["parse"]["pg_cpu_us"],
            row["trellis"]["backends_churned"],
            row["parse"]["backends_churned"],
        ),
        flush=True,
    )
    if "admin" in row:
        print(
            paired_line(row["round"], row["operation"], ("user", row["trellis"]), ("admin", row["admin"])), flush=True
        )
    if "unlogged" in row:
        print(
            paired_line(row["round"], row["operation"], ("without the log", row["unlogged"]), ("parse", row["parse"])),
            flush=True,
        )
    if "base" in row:
        print(
            paired_line(row["round"], row["operation"], ("this tree", row["trellis"]), ("base", row["base"])),
            flush=True,
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=3, help="seconds of load before each measured run")
    parser.add_argument("--duration", type=int, default=15, help="measured seconds per run")
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--as-user", action="store_true", help="call Trellis as a user under access control")
    parser.add_argument("--only", action="append", help="an operation to run (repeat it; default: all)")
    parser.add_argument(
        "--index-all",
        action="store_true",
        help="index every field of Item (Trellis's default), not only price as Parse",
    )
    parser.add_argument(
        "--without-event-log",
        action="store_true",
        help="also run, in every round, a Trellis with TRELLIS_EVENTS=false beside Parse (what the log costs)",
    )
    parser.add_argument(
        "--base",
        help="also run, in every round, the admin on a Trellis of this revision (this tree ÷ base, paired)",
    )
    parser.add_argument(
        "--triggers",
        action="store_true",
        help="a trivial before- and after-trigger per write on both sides, and a Trellis without them in every round",
    )
    parser.add_argument("--output", type=Path, default=RESULTS, help="the markdown file the dated section is added to")
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    args = parser.parse_args(argv)
    if args.base and args.as_user:
        parser.error("--base compares the admin's Trellis: leave out --as-user")
    for tool in ("wrk", "redis-server", "psql", "node"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed (make bench-deps installs wrk)")
    command = " ".join([".venv/bin/python -m bench.peer_bench", *(argv if argv is not None else sys.argv[1:])])
    revision = (
        os.environ.get("TRELLIS_BENCH_REVISION")
        or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    )
    args.load_before = load_average()
    fields = SCHEMA if args.index_all else LIKE_PARSE
    results = run(
        args.rounds,
        args.warmup,
        args.duration,
        args.documents,
        args.as_user,
        args.only,
        fields,
        args.without_event_log,
        args.base,
        args.triggers,
    )
    text = report(results, command, args, revision)
    print(text)
    if not args.no_write:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        with args.output.open("a") as out:
            out.write("\n" + text)


if __name__ == "__main__":
    main()
