"""Trellis beside Parse Server 9.10 (its PostgreSQL adapter): four paired ratios, interleaved rounds.

    .venv/bin/python -m bench.peer_bench                      # 4 rounds, 3 s warm-up + 15 s per run
    .venv/bin/python -m bench.peer_bench --rounds 4 --warmup 2 --duration 8

Parse comes from ``/work/shared/peers/parse`` (``TRELLIS_PEER_PARSE`` changes it; its README says how to
set it up: ``npm ci`` there once, PostgreSQL role and database ``bench``). Both servers are one process
on the same PostgreSQL and are driven by the same ``wrk -t1 -c16``. Both hold the same 100,000 ``Item``
documents: Parse's ``seed.sh`` makes them, and the same rows (title, price, tags, owner) are loaded into
Trellis through ``POST /database/Item/many``. Trellis runs with its own throwaway ``redis-server`` (counts
are kept there, as in production) on a free port.

Operations (Trellis ÷ Parse, req/s):
- get by id: ``GET /database/Item/<id>`` vs ``GET /parse/classes/Item/<id>`` (5,000 random ids);
- list with its exact count: ``?price[$lt]=X&sort=-price&limit=20`` vs
  ``?where={"price":{"$lt":X}}&order=-price&limit=20&count=1`` (X random in 1..950 per request);
- the same list without a count (``count=none``; Parse without ``count=1``), when Trellis accepts it;
- create: ``POST`` a small Item; update: ``PATCH /database/Item/<id> {price}`` vs ``PUT`` on Parse;
- and get by id against a bare Flask JSON route served the same way (the ceiling).

Each round runs every operation on both servers, alternating which goes first; ratios are taken
within a round and the median over rounds is reported. "Foreign CPU" is the share of the machine's
two cores used during a measured run by processes that are not part of it (other engineers' tests):
total busy time from ``/proc/stat`` minus the server under test, wrk, and the PostgreSQL backends
connected to the server's database.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg2
import requests

from bench.common import ROOT, _free_port, bench_server, ceiling_server, paired_line, parse_wrk

PARSE_DIR = Path(os.environ.get("TRELLIS_PEER_PARSE", "/work/shared/peers/parse"))
PARSE_URL = "http://127.0.0.1:1337/parse"
PARSE_DSN = "postgresql://bench:bench@127.0.0.1:5432/bench"
PARSE_HEADERS = {"X-Parse-Application-Id": "bench", "X-Parse-Master-Key": "bench-master"}
RESULTS = ROOT / "bench" / "results" / "peer.md"
SCHEMA = {"title": "String", "price": "Number", "tags": ["String"], "owner": "String"}
NEW_ITEM = {"title": "Bench item", "price": 12.5, "tags": ["new", "sale"], "owner": "user1"}
CONNECTIONS = 16


# ---- CPU accounting -------------------------------------------------------------------------------


def _machine_busy() -> float:
    """Busy CPU seconds of the whole machine since boot (all cores)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _process_cpu(pid: int) -> float:
    try:
        parts = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def _backends(dsn: str, database: str) -> list[int]:
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
        self.ours = sum(_process_cpu(pid) for pid in pids)
        self.children = self._children()
        self.started = time.monotonic()

    @staticmethod
    def _children() -> float:
        usage = os.times()
        return usage.children_user + usage.children_system

    def close(self) -> dict[str, float]:
        elapsed = time.monotonic() - self.started
        machine = _machine_busy() - self.machine
        ours = sum(_process_cpu(pid) for pid in self.pids) - self.ours + self._children() - self.children
        cores = os.cpu_count() or 1
        return {
            "foreign_pct": max(0.0, (machine - ours) / (elapsed * cores) * 100),
            "ours_pct": ours / (elapsed * cores) * 100,
        }


# ---- servers ------------------------------------------------------------------------------------


@contextlib.contextmanager
def parse_server(documents: int) -> Iterator[list[str]]:
    """Parse started, seeded with ``documents`` Items; yields existing object ids. Stopped afterwards."""
    if not (PARSE_DIR / "node_modules").is_dir():
        raise SystemExit(f"Parse is not installed: cd {PARSE_DIR} && npm ci --no-audit --no-fund")
    _bench_role()
    subprocess.run([str(PARSE_DIR / "start.sh")], check=True, capture_output=True)
    try:
        seeded = subprocess.run([str(PARSE_DIR / "seed.sh"), str(documents)], capture_output=True, text=True)
        if seeded.returncode:
            raise SystemExit(f"Parse's seed.sh failed: {seeded.stderr.strip()[-500:]}")
        ids = (PARSE_DIR.parent / "data" / "parse_ids.txt").read_text().split()
        yield ids
    finally:
        subprocess.run([str(PARSE_DIR / "stop.sh")], capture_output=True)


def _bench_role() -> None:
    """The role and database Parse's README asks for, made once per machine. ``seed.sh`` ends with a
    CHECKPOINT, which PostgreSQL 15 allows only to superusers and members of ``pg_checkpoint``."""
    admin = psycopg2.connect("postgresql://postgres@127.0.0.1:5432/postgres")
    admin.autocommit = True  # CREATE DATABASE runs outside a transaction: no ``with admin`` (psycopg2 ≥ 2.9 opens one)
    with admin.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = 'bench'")
        if cursor.fetchone() is None:
            cursor.execute("CREATE ROLE bench LOGIN PASSWORD 'bench'")
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = 'bench'")
        if cursor.fetchone() is None:
            cursor.execute("CREATE DATABASE bench OWNER bench")
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = 'pg_checkpoint'")
        if cursor.fetchone() is not None:
            cursor.execute("GRANT pg_checkpoint TO bench")
    admin.close()


def parse_pid() -> int:
    return int((PARSE_DIR.parent / "run" / "parse.pid").read_text())


@contextlib.contextmanager
def redis_child() -> Iterator[str]:
    """A throwaway redis-server on a free port (the shared one on 6379 is left alone)."""
    port = _free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(50):
            with contextlib.suppress(OSError):
                import socket

                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(10)


def load_trellis(url: str, headers: dict[str, str]) -> list[str]:
    """The rows Parse's seed made, loaded into Trellis in the same order; returns the new ids."""
    requests.post(
        f"{url}/admin/database/schemas", json={"name": "Item", "fields": SCHEMA}, headers=headers, timeout=60
    ).raise_for_status()
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


def vacuum(database_url: str) -> None:
    dsn = database_url.replace("postgresql+psycopg2://", "postgresql://")
    with contextlib.closing(psycopg2.connect(dsn)) as connection:
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")


# ---- load ---------------------------------------------------------------------------------------

_SCRIPT = """
wrk.method = {method}
wrk.body = {body}
{headers}
local paths = {{}}
for line in io.lines({paths_file}) do paths[#paths + 1] = line end
local i = math.random(#paths)
request = function()
  i = i + 1
  return wrk.format(nil, paths[(i % #paths) + 1])
end
"""


def wrk(
    base: str,
    paths: list[str],
    seconds: int,
    method: str = "GET",
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> dict[str, float]:
    headers = dict(headers or {})
    if body is not None:
        headers["Content-Type"] = "application/json"
    lua_headers = "\n".join(f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in headers.items())
    with tempfile.TemporaryDirectory() as tmp:
        paths_file = Path(tmp) / "paths.txt"
        paths_file.write_text("\n".join(paths))
        script = Path(tmp) / "run.lua"
        script.write_text(
            _SCRIPT.format(
                method=json.dumps(method),
                body=json.dumps(json.dumps(body)) if body else "nil",
                headers=lua_headers,
                paths_file=json.dumps(str(paths_file)),
            )
        )
        result = subprocess.run(
            ["wrk", "-t1", f"-c{CONNECTIONS}", f"-d{seconds}s", "--latency", "-s", str(script), base],
            capture_output=True,
            text=True,
            check=True,
        )
    return parse_wrk(result.stdout)


def trellis_cases(ids: list[str], rnd: random.Random, with_no_count: bool) -> dict[str, dict[str, Any]]:
    sample = rnd.sample(ids, min(5000, len(ids)))
    xs = [rnd.randint(1, 950) for _ in range(20_000)]
    cases = {
        "get by id": {"paths": [f"/database/Item/{i}" for i in sample]},
        "list + exact count": {"paths": [f"/database/Item?price[$lt]={x}&sort=-price&limit=20" for x in xs]},
        "create": {"paths": ["/database/Item"], "method": "POST", "body": NEW_ITEM},
        "update": {"paths": [f"/database/Item/{i}" for i in sample], "method": "PATCH", "body": {"price": 99.5}},
    }
    if with_no_count:
        cases["list, no count"] = {
            "paths": [f"/database/Item?price[$lt]={x}&sort=-price&limit=20&count=none" for x in xs]
        }
    return cases


def parse_cases(ids: list[str], rnd: random.Random) -> dict[str, dict[str, Any]]:
    sample = rnd.sample(ids, min(5000, len(ids)))
    xs = [rnd.randint(1, 950) for _ in range(20_000)]

    def where(x: int) -> str:
        return urllib.parse.quote(json.dumps({"price": {"$lt": x}}, separators=(",", ":")))

    common = {"headers": PARSE_HEADERS}
    return {
        "get by id": {**common, "paths": [f"/parse/classes/Item/{i}" for i in sample]},
        "list + exact count": {
            **common,
            "paths": [f"/parse/classes/Item?where={where(x)}&order=-price&limit=20&count=1" for x in xs],
        },
        "list, no count": {
            **common,
            "paths": [f"/parse/classes/Item?where={where(x)}&order=-price&limit=20" for x in xs],
        },
        "create": {**common, "paths": ["/parse/classes/Item"], "method": "POST", "body": NEW_ITEM},
        "update": {
            **common,
            "paths": [f"/parse/classes/Item/{i}" for i in sample],
            "method": "PUT",
            "body": {"price": 99.5},
        },
    }


def measure(base: str, case: dict[str, Any], pids: list[int], warmup: int, seconds: int) -> dict[str, float]:
    """wrk's figures, the CPU shares of the run, and the server process's CPU per request (``pids[0]``:
    its own work, which other engineers' load moves far less than req/s)."""
    if warmup:
        wrk(base, case["paths"], warmup, case.get("method", "GET"), case.get("body"), case.get("headers"))
    window = CpuWindow(pids)
    server = _process_cpu(pids[0])
    stats = wrk(base, case["paths"], seconds, case.get("method", "GET"), case.get("body"), case.get("headers"))
    cpu_us = (_process_cpu(pids[0]) - server) / max(stats["rps"] * seconds, 1) * 1e6
    return {**stats, **window.close(), "server_cpu_us": cpu_us}


def run(rounds: int, warmup: int, seconds: int, documents: int) -> tuple[list[dict[str, Any]], bool]:
    rnd = random.Random(15)
    results: list[dict[str, Any]] = []
    with (
        parse_server(documents) as parse_ids,
        redis_child() as redis_url,
        bench_server("postgresql", modules="authentication,database,email,sms", TRELLIS_REDIS_URL=redis_url) as trellis,
        ceiling_server() as ceiling,
    ):
        trellis_ids = load_trellis(trellis.url, trellis.admin_headers)
        vacuum(trellis.database_url)
        probe = requests.get(f"{trellis.url}/database/Item?limit=1&count=none", timeout=10)
        with_no_count = probe.status_code == 200 and "count" not in probe.json()
        ours = trellis_cases(trellis_ids, rnd, with_no_count)
        theirs = parse_cases(parse_ids, rnd)
        trellis_db = trellis.database_url.rsplit("/", 1)[1]
        for number in range(1, rounds + 1):
            for name in ours:
                order = ["trellis", "parse"] if (number + len(results)) % 2 else ["parse", "trellis"]
                row: dict[str, Any] = {"round": number, "operation": name}
                for side in order:
                    if side == "trellis":
                        pids = [trellis.process.pid, *_backends(PARSE_DSN, trellis_db)]
                        row["trellis"] = measure(trellis.url, ours[name], pids, warmup, seconds)
                    else:
                        pids = [parse_pid(), *_backends(PARSE_DSN, "bench")]
                        row["parse"] = measure(PARSE_URL.rsplit("/parse", 1)[0], theirs[name], pids, warmup, seconds)
                results.append(row)
                _print_row(row)
            ceiling_case = {"paths": ["/item"]}
            top = measure(ceiling.url, ceiling_case, [ceiling.process.pid], warmup, seconds)
            get = next(r for r in reversed(results) if r["operation"] == "get by id")
            results.append({"round": number, "operation": "ceiling", "ceiling": top, "trellis": get["trellis"]})
            print(
                f"round {number}: ceiling {top['rps']} req/s (foreign CPU {top['foreign_pct']:.0f}%), "
                f"get by id {get['trellis']['rps'] / top['rps'] * 100:.0f}% of it",
                flush=True,
            )
    return results, with_no_count


def _print_row(row: dict[str, Any]) -> None:
    print(paired_line(row["round"], row["operation"], ("trellis", row["trellis"]), ("parse", row["parse"])), flush=True)


GOALS = {"get by id": 2.0, "list + exact count": 1.5, "create": 1.5, "update": 1.5}


def report(results: list[dict[str, Any]], command: str, args: argparse.Namespace, revision: str) -> str:
    lines = [
        "# Trellis beside Parse Server 9.10",
        "",
        f"Command: `{command}` (revision `{revision}`). {args.documents:,} Items on each side, one process each, "
        f"same PostgreSQL, `wrk -t1 -c{CONNECTIONS}`, {args.warmup} s warm-up + {args.duration} s measured per run, "
        f"{args.rounds} interleaved rounds. Machine: {os.cpu_count()} cores shared with other engineers' work "
        "(foreign CPU = share of both cores used by other processes during the measured run).",
        "",
        "| operation | Trellis ÷ Parse, median | per round | Trellis req/s (median) | Parse req/s (median) "
        "| foreign CPU % (min–max) | goal |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    names = list(dict.fromkeys(r["operation"] for r in results if r["operation"] != "ceiling"))
    for name in names:
        rows = [r for r in results if r["operation"] == name]
        ratios = [r["trellis"]["rps"] / r["parse"]["rps"] for r in rows]
        foreign = [r[s]["foreign_pct"] for r in rows for s in ("trellis", "parse")]
        goal = GOALS.get(name)
        lines.append(
            f"| {name} | **{statistics.median(ratios):.2f}** | {', '.join(f'{x:.2f}' for x in ratios)} "
            f"| {statistics.median(r['trellis']['rps'] for r in rows):,.0f} "
            f"| {statistics.median(r['parse']['rps'] for r in rows):,.0f} "
            f"| {min(foreign):.0f}–{max(foreign):.0f} | {f'≥ {goal}' if goal else '—'} |"
        )
    ceilings = [r for r in results if r["operation"] == "ceiling"]
    shares = [r["trellis"]["rps"] / r["ceiling"]["rps"] for r in ceilings]
    lines.append(
        f"| get by id ÷ bare Flask route | **{statistics.median(shares):.2f}** | {', '.join(f'{x:.2f}' for x in shares)} "
        f"| {statistics.median(r['trellis']['rps'] for r in ceilings):,.0f} "
        f"| ceiling {statistics.median(r['ceiling']['rps'] for r in ceilings):,.0f} "
        f"| {min(r['ceiling']['foreign_pct'] for r in ceilings):.0f}–"
        f"{max(r['ceiling']['foreign_pct'] for r in ceilings):.0f} | ≥ 0.70 |"
    )
    lines += [
        "",
        "p50 latency (ms) and server-process CPU per request (µs; Trellis's Python process, Parse's node "
        "process, PostgreSQL not included), medians over rounds:",
        "",
        "| operation | Trellis p50 | Parse p50 | Trellis CPU/request | Parse CPU/request | Parse ÷ Trellis CPU |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in names:
        rows = [r for r in results if r["operation"] == name]
        ours = statistics.median(r["trellis"]["server_cpu_us"] for r in rows)
        theirs = statistics.median(r["parse"]["server_cpu_us"] for r in rows)
        lines.append(
            f"| {name} | {statistics.median(r['trellis']['p50_ms'] for r in rows):.1f} "
            f"| {statistics.median(r['parse']['p50_ms'] for r in rows):.1f} "
            f"| {ours:,.0f} | {theirs:,.0f} | {theirs / ours:.2f} |"
        )
    ceiling_cpu = statistics.median(r["ceiling"]["server_cpu_us"] for r in ceilings)
    lines.append(f"| bare Flask route (ceiling) | | | {ceiling_cpu:,.0f} | | |")
    errors = [
        (r["operation"], side, int(r[side]["non_2xx"]))
        for r in results
        for side in ("trellis", "parse")
        if side in r and r[side]["non_2xx"]
    ]
    if errors:
        lines += ["", "Non-2xx answers: " + "; ".join(f"{op} ({side}): {n}" for op, side, n in errors)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=3, help="seconds of load before each measured run")
    parser.add_argument("--duration", type=int, default=15, help="measured seconds per run")
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--output", type=Path, default=RESULTS, help="where to write the markdown table")
    args = parser.parse_args(argv)
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
    results, _ = run(args.rounds, args.warmup, args.duration, args.documents)
    text = report(results, command, args, revision)
    print(text)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)


if __name__ == "__main__":
    main()
