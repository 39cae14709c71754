"""Where the long requests come from: the peer benchmark's operations, as the admin, against one Trellis process
that records what ran meanwhile (``bench/tails_probe``), and the slowest 1% of requests matched against it.

    .venv/bin/python -m bench.tails                                 # 100,000 Items, 2 s warm-up + 10 s per operation
    .venv/bin/python -m bench.tails --documents 10000 --duration 5 --only create

The Items are the peer benchmark's (Parse's ``seed.sh`` makes them; see ``bench/peer_bench.py``), loaded the
same way, driven by the same ``wrk -t1 -c16``. The probe notes, on the machine's monotonic clock: each request
Flask answered (start, duration), each garbage collection (generation, duration), each event log pass, and each
greenthread that ran more than 3 ms before yielding (every other request waited meanwhile), with where it
yielded and how much of its wall time was CPU (the rest: the OS ran another process: PostgreSQL, wrk).
For each operation the report gives wrk's p50/p99 beside the server's own (the difference is time spent
before Flask saw the request: the accept queue and the hub's turn), and for the requests at or above the
server's p99 which share overlapped each kind of record, beside the share of all requests that did: a kind
that the slow requests overlap far more often than the others is where the tail comes from.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, bench_server, redis_child
from bench.peer_bench import PLAIN_MODULES, load_trellis, wrk
from bench.peer_cases import trellis_cases
from bench.peer_parse import parse_server

PROBE = ROOT / "bench" / "tails_probe"
RESULTS = ROOT / "bench" / "results" / "tails.md"
KINDS = ("gc 0", "gc 1", "gc 2", "pass", "slice")


def _records(path: Path, start: float, end: float) -> list[list[Any]]:
    if not path.exists():
        return []
    found = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if start <= record[2] <= end:
            found.append(record)
    return found


def _kind(record: list[Any]) -> str:
    return f"gc {record[1]}" if record[0] == "gc" else record[0]


def _slices(records: list[list[Any]]) -> list[tuple[str, int, float, float, int, int]]:
    """Long slices by where they yielded: (where, how many, total wall ms, total CPU ms, how many the OS
    preempted, how many a system call blocked), longest total first."""
    by: dict[str, list[float]] = {}
    for record in records:
        if record[0] == "slice":
            found = by.setdefault(record[1], [0, 0.0, 0.0, 0, 0])
            found[0] += 1
            found[1] += record[3] * 1000
            found[2] += record[4] * 1000
            found[3] += record[5] > 0
            found[4] += record[6] > 0
    return sorted(
        ((w, int(n), wall, cpu, int(p), int(b)) for w, (n, wall, cpu, p, b) in by.items()), key=lambda x: -x[2]
    )


def analyse(records: list[list[Any]]) -> dict[str, Any]:
    """The server's latency figures and, per kind of record, the share of slow and of all requests it overlapped."""
    requests = [(r[2], r[3]) for r in records if r[0] == "request"]
    others = sorted((r[2], r[2] + r[3], _kind(r)) for r in records if r[0] != "request")
    durations = sorted(d for _, d in requests)
    if not durations:
        return {}
    p99 = durations[int(len(durations) * 0.99) - 1]
    starts = [s for s, _, _ in others]
    longest = max((e - s for s, e, _ in others), default=0.0)

    def overlapped(begin: float, length: float) -> set[str]:
        # Records that started before the request ended and ended after it began (none is longer than ``longest``).
        first = bisect.bisect_left(starts, begin - longest)
        last = bisect.bisect_right(starts, begin + length)
        return {kind for s, e, kind in others[first:last] if e > begin}

    slow = [(s, d) for s, d in requests if d >= p99]
    shares: dict[str, tuple[float, float]] = {}
    seen_slow = [overlapped(s, d) for s, d in slow]
    seen_all = [overlapped(s, d) for s, d in requests]
    for kind in KINDS:
        shares[kind] = (
            sum(kind in k for k in seen_slow) / len(slow),
            sum(kind in k for k in seen_all) / len(requests),
        )
    per_kind = {kind: [e - s for s, e, k in others if k == kind] for kind in KINDS}
    return {
        "requests": len(requests),
        "server_p50_ms": statistics.median(durations) * 1000,
        "server_p99_ms": p99 * 1000,
        "server_max_ms": durations[-1] * 1000,
        "slow": len(slow),
        "shares": shares,
        "counts": {kind: (len(v), sum(v) * 1000, max(v, default=0.0) * 1000) for kind, v in per_kind.items()},
        "none": sum(not k for k in seen_slow) / len(slow),
        "slices": _slices(records)[:6],
    }


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    rnd = random.Random(15)
    rows = []
    with contextlib.ExitStack() as stack:
        stack.enter_context(parse_server(args.documents))
        redis_url = stack.enter_context(redis_child())
        probe = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="trellis-tails-"))) / "probe.jsonl"
        path = os.pathsep.join([str(PROBE), *filter(None, [os.environ.get("PYTHONPATH")])])
        trellis = stack.enter_context(
            bench_server(
                "postgresql",
                modules=PLAIN_MODULES,
                TRELLIS_REDIS_URL=redis_url,
                TRELLIS_TAILS_PROBE=str(probe),
                PYTHONPATH=path,
            )
        )
        ids = load_trellis(trellis.url, trellis.admin_headers)
        cases = trellis_cases(ids, rnd)
        for name in [n for n in cases if not args.only or n in args.only]:
            case = cases[name]
            load = (trellis.url, case["paths"])
            options = (case.get("method", "GET"), case.get("body"), case.get("headers"))
            wrk(*load, args.warmup, *options)
            time.sleep(1.5)  # the probe flushes every second
            start = time.monotonic()
            stats = wrk(*load, args.duration, *options)
            end = time.monotonic()
            time.sleep(1.5)
            found = analyse(_records(probe, start, end))
            rows.append({"operation": name, "wrk": stats, **found})
            print(name, json.dumps({k: v for k, v in rows[-1].items() if k != "wrk"}), stats, flush=True)
    return rows


def report(rows: list[dict[str, Any]], command: str) -> str:
    lines = [
        f"## Run of {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        f"Command: `{command}`.",
        "",
        "| operation | wrk p50 / p99 ms | server p50 / p99 / max ms | slow requests (≥ server p99) "
        "| overlapped by, slow ÷ all: gen-0 GC | gen-1 GC | gen-2 GC | event log pass | a slice > 3 ms | none |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        if "shares" not in row:
            continue
        shares = " | ".join(f"{row['shares'][k][0]:.0%} ÷ {row['shares'][k][1]:.0%}" for k in KINDS)
        lines.append(
            f"| {row['operation']} | {row['wrk']['p50_ms']:.1f} / {row['wrk']['p99_ms']:.1f} "
            f"| {row['server_p50_ms']:.1f} / {row['server_p99_ms']:.1f} / {row['server_max_ms']:.0f} "
            f"| {row['slow']} of {row['requests']} | {shares} | {row['none']:.0%} |"
        )
    lines += [
        "",
        "What ran during each measured run (count, total ms, longest ms):",
        "",
        "| operation | " + " | ".join(KINDS) + " |",
        "|---|" + "---:|" * len(KINDS),
    ]
    for row in rows:
        if "counts" in row:
            cells = " | ".join(f"{n}, {total:.0f}, {top:.1f}" for n, total, top in row["counts"].values())
            lines.append(f"| {row['operation']} | {cells} |")
    lines += ["", "The longest slices (a greenthread running > 3 ms before it yielded), by where it yielded:", ""]
    lines += [
        "| operation | yielded at | slices | wall ms | CPU ms | preempted by the OS | blocked in a system call |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        for where, count, wall, cpu, preempted, blocked in row.get("slices", []):
            lines.append(
                f"| {row['operation']} | `{where}` | {count} | {wall:.0f} | {cpu:.0f} | {preempted} | {blocked} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--only", action="append")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    command = " ".join([".venv/bin/python -m bench.tails", *(argv if argv is not None else sys.argv[1:])])
    text = report(run(args), command)
    print(text)
    if not args.no_write:
        with RESULTS.open("a") as out:
            out.write("\n" + text)


if __name__ == "__main__":
    main()
