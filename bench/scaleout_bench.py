"""Scale-out: what the per-request cache check costs on the cheapest document read.

    .venv/bin/python -m bench.scaleout_bench                    # 5 rounds of 10 s per case
    .venv/bin/python -m bench.scaleout_bench --rounds 3 --duration 5

Four Trellis processes (eventlet, modules `authentication,database`) share one throwaway PostgreSQL
database holding 10,000 documents of `Product`; `wrk -t2 -c16` reads random ids (`GET
/database/Product/{id}`, the route the check weighs most on):

- *check, lease*: the default with `TRELLIS_REDIS_URL` set (production): a read of the change token
  vouches for 0.2 s and is renewed in the background, requests read nothing;
- *check, GET per request*: `TRELLIS_CACHE_LEASE_SECONDS=0`, one Redis GET of the token per request;
- *no check*: `TRELLIS_CACHE_SHARED=false`, a process that trusts its caches (what one process alone
  could do, and what the code did between its 1 s re-reads before the check);
- *check, Redis down*: `TRELLIS_REDIS_URL` pointing at a closed port: the fallback reads the
  generations table once per request.

The cases run in interleaved rounds (the machine drifts, and other work shares its two cores). Two
figures per case: requests/s, and the server process's CPU time per request (utime + stime from
/proc over the run, divided by the requests wrk completed), which foreign load disturbs far less.
The cost is the median of the per-round ratios, check against no check.
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

from bench.common import ROOT, Server, bench_server, serve, wrk

RESULTS = ROOT / "bench" / "results" / "scaleout.md"
REDIS_URL = "redis://127.0.0.1:6379/13"
CHECK = "check, Redis, lease 0.2 s (the default)"
PER_REQUEST = "check, Redis GET per request (TRELLIS_CACHE_LEASE_SECONDS=0)"
ALONE = "no check (TRELLIS_CACHE_SHARED=false)"
DOWN = "check, Redis down (database read per request)"


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run(rounds: int, duration: int, documents: int) -> tuple[dict[str, list[dict[str, float]]], list[str]]:
    modules = "authentication,database,email,sms"
    # The loader process writes the documents; the measured processes start afterwards, alike.
    with bench_server("postgresql", modules=modules, TRELLIS_REDIS_URL=REDIS_URL) as loader:
        headers = loader.admin_headers
        created = requests.post(
            f"{loader.url}/admin/database/schemas",
            headers=headers,
            timeout=60,
            json={"name": "Product", "fields": {"title": "String", "price": "Number"}},
        )
        created.raise_for_status()
        ids: list[str] = []
        for start in range(0, documents, 1000):
            docs = [{"title": f"Product {i}", "price": i % 1000} for i in range(start, min(start + 1000, documents))]
            response = requests.post(
                f"{loader.url}/database/Product/many", json={"docs": docs}, headers=headers, timeout=300
            )
            response.raise_for_status()
            ids += [doc["_id"] for doc in response.json()["docs"]]
        with (
            tempfile.TemporaryDirectory(prefix="trellis-bench-") as tmp,
            serve(loader.env, tmp) as checked,
            serve(loader.env, tmp, TRELLIS_CACHE_SHARED="false") as alone,
            serve(loader.env, tmp, TRELLIS_CACHE_LEASE_SECONDS="0") as per_request,
            serve(loader.env, tmp, TRELLIS_REDIS_URL=f"redis://127.0.0.1:{_closed_port()}/0") as down,
        ):
            return _measure(ids, rounds, duration, {CHECK: checked, PER_REQUEST: per_request, ALONE: alone, DOWN: down})


def _measure(
    ids: list[str], rounds: int, duration: int, servers: dict[str, Server]
) -> tuple[dict[str, list[dict[str, float]]], list[str]]:
    paths = [f"/database/Product/{i}" for i in random.Random(3).sample(ids, min(10_000, len(ids)))]
    for server in servers.values():  # warm every process (snapshot built, connections open)
        wrk(f"{server.url}/database/Product/x", connections=16, duration=2, paths=paths)
    measured: dict[str, list[dict[str, float]]] = {name: [] for name in servers}
    lines = []
    for number in range(1, rounds + 1):
        order = list(servers) if number % 2 else list(reversed(servers))  # no case always runs first
        for name in order:
            before = _cpu_seconds(servers[name].process.pid)
            stats = wrk(f"{servers[name].url}/database/Product/x", connections=16, duration=duration, paths=paths)
            stats["cpu_us"] = (_cpu_seconds(servers[name].process.pid) - before) / (stats["rps"] * duration) * 1e6
            measured[name].append(stats)
        figures = ", ".join(
            f"{name} {measured[name][-1]['rps']} req/s {measured[name][-1]['cpu_us']:.0f} µs" for name in servers
        )
        lines.append(f"round {number}: {figures}")
        print(lines[-1], flush=True)
    return measured, lines


def _ratios(measured: dict[str, list[dict[str, float]]], case: str, key: str = "rps") -> list[float]:
    return [c[key] / a[key] for c, a in zip(measured[case], measured[ALONE])]


def report(
    measured: dict[str, list[dict[str, float]]],
    lines: list[str],
    rounds: int,
    duration: int,
    documents: int,
    command: str,
    load: str,
) -> str:
    check = statistics.median(_ratios(measured, CHECK))
    down = statistics.median(_ratios(measured, DOWN))
    check_cpu = statistics.median(_ratios(measured, CHECK, "cpu_us"))
    get = statistics.median(_ratios(measured, PER_REQUEST))
    get_cpu = statistics.median(_ratios(measured, PER_REQUEST, "cpu_us"))
    down_cpu = statistics.median(_ratios(measured, DOWN, "cpu_us"))
    rows = [
        "| case | median req/s | median CPU µs/request | median p50 ms | median p99 ms | non-2xx |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, results in measured.items():
        rows.append(
            f"| {name} | {statistics.median(r['rps'] for r in results):.0f} | "
            f"{statistics.median(r['cpu_us'] for r in results):.0f} | "
            f"{statistics.median(r['p50_ms'] for r in results)} | "
            f"{statistics.median(r['p99_ms'] for r in results)} | {int(sum(r['non_2xx'] for r in results))} |"
        )
    return f"""# Scale-out: the per-request cache check

`{command}` on {platform.node()} ({os.cpu_count()} cores, Python {platform.python_version()}), {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}.
Load on the machine when the run started (other work shares it): {load}.

Four processes on one PostgreSQL database ({documents:,} documents), `GET /database/Product/{{id}}` with
random ids, `wrk -t2 -c16`, {rounds} interleaved rounds of {duration} s per case.

{chr(10).join(rows)}

- **Cost of the check with Redis (lease, the default): {(check_cpu - 1) * 100:+.1f}% CPU per request** (median of the per-round
  ratios check / no check = {check_cpu:.3f}), throughput {(check - 1) * 100:+.1f}% (ratio {check:.3f});
  target ≤ 3%.
- With a Redis GET per request instead (no lease): {(get_cpu - 1) * 100:+.1f}% CPU per request,
  throughput {(get - 1) * 100:+.1f}%.
- With Redis down the fallback reads the generations table on every request: {(down_cpu - 1) * 100:+.1f}% CPU
  per request, throughput {(down - 1) * 100:+.1f}%; exact, dearer, and only while Redis is unreachable.

Round by round: {"; ".join(lines)}.
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
