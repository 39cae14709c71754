"""Scale-out: what the per-request cache check costs on the cheapest document read.

    .venv/bin/python -m bench.scaleout_bench                    # 5 rounds of 10 s per case
    .venv/bin/python -m bench.scaleout_bench --rounds 3 --duration 5

Three Trellis processes (eventlet, modules `authentication,database`) share one throwaway PostgreSQL
database holding 10,000 documents of `Product`; `wrk -t2 -c16` reads random ids (`GET
/database/Product/{id}`, the route the check weighs most on):

- *check, Redis*: the default with `TRELLIS_REDIS_URL` set: one Redis GET of the change token per
  request (the production set-up);
- *no check*: `TRELLIS_CACHE_SHARED=false`, a process that trusts its caches (what one process alone
  could do, and what the code did between its 1 s re-reads before the check);
- *check, Redis down*: `TRELLIS_REDIS_URL` pointing at a closed port: the fallback reads the
  generations table once per request.

The cases run in interleaved rounds (the machine drifts, and other work shares its two cores); the
cost is the median of the per-round ratios check/no check.
"""
from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

from bench.common import ROOT, bench_server, serve, wrk

RESULTS = ROOT / "bench" / "results" / "scaleout.md"
REDIS_URL = "redis://127.0.0.1:6379/13"
CHECK, ALONE, DOWN = "check, Redis", "no check (TRELLIS_CACHE_SHARED=false)", "check, Redis down (database read)"


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run(rounds: int, duration: int, documents: int) -> tuple[dict[str, list[dict[str, float]]], list[str]]:
    modules = "authentication,database"
    with bench_server("postgresql", modules=modules, TRELLIS_REDIS_URL=REDIS_URL) as checked, \
            tempfile.TemporaryDirectory(prefix="trellis-bench-") as tmp, \
            serve(checked.env, tmp, TRELLIS_CACHE_SHARED="false") as alone, \
            serve(checked.env, tmp, TRELLIS_REDIS_URL=f"redis://127.0.0.1:{_closed_port()}/0") as down:
        headers = checked.admin_headers
        created = requests.post(f"{checked.url}/admin/database/schemas", headers=headers, timeout=60,
                                json={"name": "Product", "fields": {"title": "String", "price": "Number"}})
        created.raise_for_status()
        ids: list[str] = []
        for start in range(0, documents, 1000):
            docs = [{"title": f"Product {i}", "price": i % 1000} for i in range(start, min(start + 1000, documents))]
            response = requests.post(f"{checked.url}/database/Product/many", json={"docs": docs}, headers=headers,
                                     timeout=300)
            response.raise_for_status()
            ids += [doc["_id"] for doc in response.json()["docs"]]
        paths = [f"/database/Product/{i}" for i in random.Random(3).sample(ids, min(10_000, len(ids)))]
        servers = {CHECK: checked, ALONE: alone, DOWN: down}
        for server in servers.values():  # warm every process (snapshot built, connections open)
            wrk(f"{server.url}/database/Product/x", connections=16, duration=2, paths=paths)
        measured: dict[str, list[dict[str, float]]] = {name: [] for name in servers}
        lines = []
        for number in range(1, rounds + 1):
            order = list(servers) if number % 2 else list(reversed(servers))  # no case always runs first
            for name in order:
                measured[name].append(wrk(f"{servers[name].url}/database/Product/x", connections=16,
                                          duration=duration, paths=paths))
            figures = ", ".join(f"{name} {measured[name][-1]['rps']}" for name in servers)
            lines.append(f"round {number}: {figures} req/s")
            print(lines[-1], flush=True)
    return measured, lines


def _ratios(measured: dict[str, list[dict[str, float]]], case: str) -> list[float]:
    return [c["rps"] / a["rps"] for c, a in zip(measured[case], measured[ALONE])]


def report(measured: dict[str, list[dict[str, float]]], lines: list[str], rounds: int, duration: int,
           documents: int, command: str, load: str) -> str:
    check = statistics.median(_ratios(measured, CHECK))
    down = statistics.median(_ratios(measured, DOWN))
    rows = ["| case | median req/s | median p50 ms | median p99 ms | non-2xx |", "|---|---:|---:|---:|---:|"]
    for name, results in measured.items():
        rows.append(f"| {name} | {statistics.median(r['rps'] for r in results):.0f} | "
                    f"{statistics.median(r['p50_ms'] for r in results)} | "
                    f"{statistics.median(r['p99_ms'] for r in results)} | {int(sum(r['non_2xx'] for r in results))} |")
    return f"""# Scale-out: the per-request cache check

`{command}` on {platform.node()} ({os.cpu_count()} cores, Python {platform.python_version()}), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.
Load on the machine when the run started (other work shares it): {load}.

Three processes on one PostgreSQL database ({documents:,} documents), `GET /database/Product/{{id}}` with
random ids, `wrk -t2 -c16`, {rounds} interleaved rounds of {duration} s per case.

{chr(10).join(rows)}

- **Cost of the check with Redis: {(1 - check) * 100:.1f}%** of get-by-id throughput (median of the per-round
  ratios check / no check = {check:.3f}; target ≤ 3%).
- With Redis down the fallback reads the generations table on every request: {(1 - down) * 100:.1f}% (ratio
  {down:.3f}); exact, dearer, and only while Redis is unreachable.

Round by round: {'; '.join(lines)}.
"""


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--documents", type=int, default=10_000)
    args = parser.parse_args(argv)
    load = "load average " + " ".join(Path("/proc/loadavg").read_text().split()[:3])
    measured, lines = run(args.rounds, args.duration, args.documents)
    command = "python -m bench.scaleout_bench " + " ".join(argv if argv is not None else sys.argv[1:])
    text = report(measured, lines, args.rounds, args.duration, args.documents, command.strip(), load)
    RESULTS.write_text(text)
    print(text)
    return text


if __name__ == "__main__":
    main()
