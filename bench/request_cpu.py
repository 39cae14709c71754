"""CPU seconds per request of each server process, Trellis and Parse, under the peer benchmark's load.

    .venv/bin/python -m bench.request_cpu                       # Trellis only, 10,000 Items, 6 s per operation
    .venv/bin/python -m bench.request_cpu --parse --documents 100000

req/s on a shared machine moves with everyone else's load; the CPU a server spends per request moves far
less (it is its own work, whoever else runs), so this is the figure to compare before/after a change while
other engineers' tests run. Read from ``/proc/<pid>/stat`` (user + system) of the server process alone and
of the PostgreSQL backends serving it, over a measured wrk run (``wrk -t1 -c16``, as ``peer_bench``). On a
quiet machine req/s ≈ 1 / (server CPU + the share of backend CPU that competes for the same 2 cores).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import subprocess
import sys
import time
from pathlib import Path

import requests

from bench.common import bench_server, ceiling_server, redis_child
from bench.cpu_window import pg_backends, process_cpu
from bench.peer_bench import ACCESS_MODULES, TRIGGERS, as_user, load_trellis, vacuum, wrk
from bench.peer_cases import ACCESS, LIKE_PARSE, SCHEMA, trellis_cases
from bench.peer_parse import PARSE_DSN, PARSE_URL, parse_cases, parse_pid, parse_server


def measure(
    base: str, case: dict, server_pid: int, database: str, warmup: int, seconds: int, profile: Path | None = None
) -> dict:
    args = (base, case["paths"])
    extra = (case.get("method", "GET"), case.get("body"), case.get("headers"))
    if warmup:
        wrk(*args, warmup, *extra)
    backends = pg_backends(PARSE_DSN, database)  # after the warm-up: the pools have opened their connections
    server, pg = process_cpu(server_pid), sum(process_cpu(p) for p in backends)
    started = time.monotonic()
    spy = None
    if profile is not None:  # py-spy samples the server during the measured run (collapsed stacks)
        # --nonblocking: pausing the process for each sample cost a user's get by id 60% of its requests
        # (904 against 2,303 req/s: the paused process has idle tpool threads to walk as well).
        spy = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "py-spy"),
                "record",
                "--nonblocking",
                "-p",
                str(server_pid),
                "-d",
                str(seconds),
                "-r",
                "200",
                "-f",
                "raw",
                "-o",
                str(profile),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    stats = wrk(*args, seconds, *extra)
    if spy is not None:
        spy.wait(30)
    elapsed = time.monotonic() - started
    done = stats["rps"] * seconds or 1
    return {
        "rps": stats["rps"],
        "server_us": (process_cpu(server_pid) - server) / done * 1e6,
        "pg_us": (sum(process_cpu(p) for p in backends) - pg) / done * 1e6,
        "non_2xx": stats["non_2xx"],
        "elapsed": elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--duration", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--parse", action="store_true", help="also measure Parse (needs the shared peer)")
    parser.add_argument("--only", action="append", help="an operation to measure (repeat it; default: all)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--profile", type=Path, help="a folder for py-spy's collapsed stacks of each Trellis run")
    parser.add_argument("--as-user", action="store_true", help="Trellis called by a user under access control")
    parser.add_argument("--index-all", action="store_true", help="index every field of Item (Trellis's default)")
    parser.add_argument("--triggers", action="store_true", help="one trivial before- and after-trigger per write")
    parser.add_argument("--functions", type=Path, help="with --triggers: Trellis's functions folder instead")
    args = parser.parse_args()
    rnd = random.Random(15)
    only = set(args.only or ())
    with contextlib.ExitStack() as stack:
        cloud = TRIGGERS / "triggers.js" if args.triggers else None
        parse_ids = stack.enter_context(parse_server(args.documents, cloud))  # both sides load the same rows
        redis_url = stack.enter_context(redis_child())
        modules = ACCESS_MODULES if args.as_user else "authentication,database,email,sms"
        fields = SCHEMA if args.index_all else LIKE_PARSE
        functions = {}
        if args.triggers:  # as peer_bench --triggers: the same two triggers on both sides
            modules += ",functions"
            functions = {"TRELLIS_FUNCTIONS_PATH": str(args.functions or TRIGGERS)}
            fields = {**fields, "stamped": {"type": "Boolean", "index": False}}
        trellis = stack.enter_context(
            bench_server("postgresql", modules=modules, TRELLIS_REDIS_URL=redis_url, **functions)
        )
        ids = load_trellis(trellis.url, trellis.admin_headers, ACCESS if args.as_user else None, fields)
        headers = as_user(trellis.url, trellis.admin_headers, trellis.database_url, ids) if args.as_user else None
        vacuum(trellis.database_url)
        requests.get(f"{trellis.url}/database/Item?limit=1&count=none", timeout=10)
        cases = trellis_cases(ids, rnd, headers)
        sides = [("trellis", trellis.url, cases, trellis.process.pid, trellis.database_url)]
        ceiling = stack.enter_context(ceiling_server())
        sides.append(("ceiling", ceiling.url, {"get by id": {"paths": ["/item"]}}, ceiling.process.pid, "/none"))
        if args.parse:
            sides.append(
                ("parse", PARSE_URL.rsplit("/parse", 1)[0], parse_cases(parse_ids, rnd), parse_pid(), "/bench")
            )  # Parse's database
        for number in range(1, args.rounds + 1):
            for side, base, cases, pid, url in sides:
                for name, case in cases.items():
                    if only and name not in only:
                        continue
                    profile = None
                    if args.profile and side == "trellis":
                        args.profile.mkdir(parents=True, exist_ok=True)
                        profile = args.profile / f"{name.replace(' ', '_').replace(',', '')}-{number}.txt"
                    r = measure(base, case, pid, url.rsplit("/", 1)[1], args.warmup, args.duration, profile)
                    print(
                        f"{number} {side:8} {name:20} {r['rps']:8.0f} req/s  server {r['server_us']:6.0f} µs/req  "
                        f"PostgreSQL {r['pg_us']:5.0f} µs/req  non-2xx {int(r['non_2xx'])}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
