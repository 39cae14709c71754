"""Instructions the Trellis server process executes per request, counted by valgrind's callgrind.

    .venv/bin/python -m bench.request_instructions                    # the peer benchmark's five operations
    .venv/bin/python -m bench.request_instructions --only create --requests 400 --keep /tmp/cg
    .venv/bin/python -m bench.request_instructions --base af02701 --rounds 3 --concurrency 16

Time per request moves ±15–20% from round to round on these shared machines, so a cut worth 2% of a
request cannot be seen in req/s or CPU seconds without dozens of rounds. An instruction count does not
depend on the machine's speed or on others' load: the same request on the same build counts the same
(±1–3% between runs), give or take the work that runs on a timer (the work queues' polls, the event log's
pass, the cache lease's renewal), which is counted in a quiet window before each case and taken off pro
rata of the time. Under valgrind a request lasts ~50× longer, so that timer work weighs ~50× more than in
real life; the cache lease is set to 6 s (renewed every 2 s, not every 67 ms) to keep it small. perf's
hardware counters are not available on these virtual machines; callgrind counts in software (~50× slower,
so a few hundred requests a case).

Compare writes with ``--concurrency 16`` (as ``peer_bench``'s wrk): one at a time, every write gets an
event log pass of its own, which is not what a loaded server does (results/instructions.md).

What it counts is the server process's user-space work: Python, the C libraries, the driver; not the
kernel (system calls, loopback TCP) and not PostgreSQL. On a fast machine the server process is the one
that saturates (peer.md, 2026-11-28), so this is the part a write's rate follows there.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import re
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests

from bench.common import (
    Callgrind,
    bench_server,
    callgrind_prefix,
    ceiling_server,
    checkout,
    interpreter,
    redis_child,
)
from bench.peer_bench import PLAIN_MODULES, TRIGGERS
from bench.peer_cases import LIKE_PARSE, NEW_ITEM, trellis_cases

CASES = ["get by id", "list, no count", "list + exact count", "create", "update"]


def _seed(url: str, headers: dict[str, str], documents: int, rnd: random.Random, triggers: bool) -> list[str]:
    fields = {**LIKE_PARSE, "stamped": {"type": "Boolean", "index": False}} if triggers else LIKE_PARSE
    schema = {"name": "Item", "fields": fields}
    requests.post(f"{url}/admin/database/schemas", json=schema, headers=headers, timeout=600).raise_for_status()
    ids: list[str] = []
    for start in range(0, documents, 500):
        docs = [
            {**NEW_ITEM, "title": f"item {n}", "price": rnd.randint(1, 1000)}
            for n in range(start, min(documents, start + 500))
        ]
        response = requests.post(f"{url}/database/Item/many", json={"docs": docs}, headers=headers, timeout=600)
        response.raise_for_status()
        ids += [doc["_id"] for doc in response.json()["docs"]]
    return ids


def count(grind: Callgrind, send: Callable[[], None], args: argparse.Namespace, label: str) -> dict[str, float]:
    """Instructions per request of ``send``, raw and without the work that runs on a timer: that is
    counted in a quiet window just after the warm-up, while the requests' timers still run (the cache
    lease renews every 67 ms for 10 s after the last request), and taken off pro rata of the time."""
    _send_all(send, args.warmup, args.concurrency)
    grind.zero()
    time.sleep(args.idle)
    idle_per_s = grind.dump(label + "-idle") / args.idle
    grind.zero()
    started = time.monotonic()
    _send_all(send, args.requests, args.concurrency)
    elapsed = time.monotonic() - started
    total = grind.dump(label)
    idle = idle_per_s * elapsed
    return {"per_request": (total - idle) / args.requests, "raw": total / args.requests, "idle_share": idle / total}


def _send_all(send: Callable[[], None], requests_: int, concurrency: int) -> None:
    """``requests_`` requests, ``concurrency`` at a time (each client thread on its own connection)."""
    if concurrency == 1:
        for _ in range(requests_):
            send()
        return
    with ThreadPoolExecutor(concurrency) as pool:
        for _ in pool.map(lambda _: send(), range(requests_)):
            pass


def _sender(url: str, case: dict[str, Any], rnd: random.Random) -> Callable[[], None]:
    method, body, paths = case.get("method", "GET"), case.get("body"), case["paths"]
    sessions = threading.local()  # a keep-alive connection per client thread

    def send() -> None:
        if not hasattr(sessions, "session"):
            sessions.session = requests.Session()
        response = sessions.session.request(method, url + rnd.choice(paths), json=body, timeout=600)
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {response.url}: {response.status_code} {response.text[:200]}")

    return send


def _count_all(
    server: Any, folder: Path, cases: dict[str, dict[str, Any]], args: argparse.Namespace, rnd: random.Random
) -> list[dict[str, Any]]:
    grind = Callgrind(server.process.pid, folder, server.env.get("HOST"))
    rows = []
    for name, case in cases.items():
        label = re.sub(r"\W+", "-", name)
        row = count(grind, _sender(server.url, case, rnd), args, label)
        rows.append({"case": name, **row})
        print(
            f"{name:20} {row['raw'] / 1e6:7.3f} M instructions/request, {row['per_request'] / 1e6:7.3f} M without "
            f"the idle rate ({row['idle_share']:.1%})"
        )
    return rows


def run(args: argparse.Namespace, folder: Path, pythonpath: str | None = None) -> list[dict[str, Any]]:
    """One count of every case; ``pythonpath``: where the server imports Trellis from (another revision)."""
    rnd = random.Random(args.seed)
    rows = []
    if args.floor:
        with ceiling_server(callgrind_prefix(folder)) as bare:
            rows += _count_all(bare, folder, {"bare Flask route": {"paths": ["/item"]}}, args, rnd)
    # As peer_bench runs it: the admin, a Redis of its own (cache generations, rate limits).
    functions = {"TRELLIS_FUNCTIONS_PATH": str(args.functions or TRIGGERS)} if args.triggers else {}
    with (
        redis_child() as redis_url,
        bench_server(
            modules=PLAIN_MODULES + (",functions" if args.triggers else ""),
            **functions,
            prefix=callgrind_prefix(folder),
            TRELLIS_REDIS_URL=redis_url,
            TRELLIS_CACHE_LEASE_SECONDS="6",
            **dict(setting.split("=", 1) for setting in args.env),
            **({"PYTHONPATH": pythonpath} if pythonpath else {}),
        ) as server,
    ):
        ids = _seed(server.url, server.admin_headers, args.documents, rnd, args.triggers)
        cases = trellis_cases(ids, rnd, server.admin_headers)
        rows += _count_all(server, folder, {name: cases[name] for name in args.only or CASES}, args, rnd)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", choices=CASES)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--documents", type=int, default=2000)
    parser.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help="requests in flight (16: as peer_bench's wrk; the event log's passes then batch several writes)",
    )
    parser.add_argument("--idle", type=float, default=5.0, help="seconds of the quiet window before each count")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE of the server's environment")
    parser.add_argument("--floor", action="store_true", help="count the bare Flask route first (ceiling_server)")
    parser.add_argument("--keep", type=Path, help="keep callgrind's files here (callgrind_annotate reads them)")
    parser.add_argument("--base", help="a revision counted in alternation with this tree, round by round")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--triggers", action="store_true", help="one trivial before- and after-trigger per write")
    parser.add_argument("--functions", type=Path, help="with --triggers: the functions folder instead")
    args = parser.parse_args(argv)
    print(f"interpreter: {interpreter()}")
    with contextlib.ExitStack() as stack:
        folder = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="trellis-callgrind-")))
        folder.mkdir(parents=True, exist_ok=True)
        base = stack.enter_context(checkout(args.base)) if args.base else None
        counted: dict[str, list[list[dict[str, Any]]]] = {"base": [], "this tree": []}
        for round_ in range(1, args.rounds + 1):
            for side in ("base", "this tree") if base else ("this tree",):
                print(f"== {side}, round {round_}", flush=True)
                counted[side].append(run(args, folder, base if side == "base" else None))
        if base:
            print(_compare(counted["base"], counted["this tree"]))


def _compare(base: list[list[dict[str, Any]]], this: list[list[dict[str, Any]]]) -> str:
    """Per case: the median of the rounds on each side (without the idle rate) and this ÷ base per round."""
    lines = ["", "| case | base, M instructions | this tree | this ÷ base, per round |", "|---|---:|---:|---|"]
    for index, row in enumerate(base[0]):
        before = [rows[index]["per_request"] for rows in base]
        after = [rows[index]["per_request"] for rows in this]
        ratios = ", ".join(f"{a / b:.3f}" for a, b in zip(after, before, strict=True))
        lines.append(
            f"| {row['case']} | {statistics.median(before) / 1e6:.3f} | {statistics.median(after) / 1e6:.3f} | {ratios} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
