"""Live data: document changes delivered to many Socket.IO subscribers across two worker processes.

    .venv/bin/python -m bench.live_bench                    # 500 subscribers, 200 writes/s for 30 s
    .venv/bin/python -m bench.live_bench --subscribers 100 --rate 50 --seconds 5
    .venv/bin/python -m bench.live_bench --runs 5 --wrk-seconds 0     # five runs: median and spread of p99
    .venv/bin/python -m bench.live_bench --rate 400 --profile profile.txt  # py-spy on the first worker
    .venv/bin/python -m bench.live_bench --client socketio  # subscribers on python-socketio's client

Two eventlet server processes share one PostgreSQL database and Redis (the event log's fan-out).
Subscribers connect half to each process (masterkey auth) and subscribe to one schema with
``where: {bucket: k}``, k = i mod 10, so each write matches ~10% of them. A writer creates documents at a
fixed rate (alternating between the processes, never waiting for an answer before the next send) with
``bucket = seq mod 10``. Every subscriber must receive each matching change exactly once.

Each run appends a dated section to ``bench/results/live.md``.

Subscribers are lean by default (``bench.live_subscribers.LeanSubscriber``: one websocket each, Engine.IO and Socket.IO framing
read by hand); ``--client socketio`` holds them on python-socketio's ``AsyncClient`` instead. Both run on
this machine beside the servers, so what a subscriber costs is taken from the servers' two cores: the
report gives the CPU of each side (servers, subscriber processes, writer, PostgreSQL) during the run.

Latency: from the write's request being sent (an upper bound of commit time) and from its answer
(after the commit, so a lower bound) to the subscriber's receipt, same clock. Then create throughput
with wrk against one process with the event log and one with ``TRELLIS_EVENTS=false``, same database.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import requests

from bench.common import MASTER_KEY, ROOT, Server, bench_server, serve, wrk
from bench.cpu_window import process_cpu
from bench.live_subscribers import (
    CLIENTS,
    Plan,
    Tally,
    collector_paused,
    percentile,
    subscriber_process,
)

BUCKETS = 10
TARGET_P99_MS = 100.0
WARMUP_SECONDS = 2.0
RESULTS = ROOT / "bench" / "results" / "live.md"
REDIS_URL = os.environ.get("TRELLIS_BENCH_REDIS_URL", "redis://127.0.0.1:6379/7")


def bucket_plan(subscribers: int, schema: str) -> Plan:
    """Masterkey subscribers with ``where: {bucket: n mod 10}``: this benchmark's own shape."""
    auth = {"masterkey": MASTER_KEY}
    return [(n, auth, {"schema": schema, "where": {"bucket": n % BUCKETS}}) for n in range(subscribers)]


def bucket_readers(subscribers: int) -> Callable[[int], Iterable[int]]:
    """The subscribers a write of ``bucket_plan`` reaches."""
    return lambda seq: range(seq % BUCKETS, subscribers, BUCKETS)


async def write_at_rate(
    servers: list[Server],
    schema: str,
    rate: int,
    seconds: float,
    tally: Tally,
    body: Callable[[int], dict[str, Any]] = lambda seq: {"seq": seq, "bucket": seq % BUCKETS},
) -> float:
    """Create ``rate`` documents a second (``body(seq)``) for ``seconds``, as the masterkey, never waiting
    for an answer before the next send."""
    total = int(rate * seconds)
    gate = asyncio.Semaphore(16)  # writes in flight: PostgreSQL's 100 connections are shared by the machine
    async with aiohttp.ClientSession(headers={"masterkey": "bench-master-key"}) as http:

        async def one(seq: int) -> None:
            async with gate:
                url = f"{servers[seq % len(servers)].url}/database/{schema}"
                tally.sent_at[seq] = time.perf_counter()
                async with http.post(url, json=body(seq)) as response:
                    if response.status != 201:  # not committed: no change is expected for it
                        tally.failed_writes[response.status] = tally.failed_writes.get(response.status, 0) + 1
                        del tally.sent_at[seq]
                        return
                tally.answered_at[seq] = time.perf_counter()

        started = time.perf_counter()
        tasks = []
        for seq in range(total):
            delay = started + seq / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(seq)))
        await asyncio.gather(*tasks)
        return time.perf_counter() - started


@dataclass
class Shape:
    """What a run subscribes, writes and expects."""

    schema: str
    plan: Plan
    readers: Callable[[int], Iterable[int]]  # the subscribers write ``seq`` must reach, exactly once each
    body: Callable[[int], dict[str, Any]]  # the document of write ``seq``
    unread: Callable[[int], dict[str, Any]]  # a document no subscriber may receive (the warm-up's)
    before_writes: Callable[[], object] | None = None  # run in a thread after the warm-up (a bulk load)


def bucket_shape(subscribers: int) -> Shape:
    return Shape(
        "LiveBench",
        bucket_plan(subscribers, "LiveBench"),
        bucket_readers(subscribers),
        lambda seq: {"seq": seq, "bucket": seq % BUCKETS},
        lambda seq: {"seq": -1 - seq, "bucket": BUCKETS},
    )


def create_schema(server: Server, body: dict[str, Any]) -> None:
    response = requests.post(
        f"{server.url}/admin/database/schemas", json=body, headers=server.admin_headers, timeout=60
    )
    assert response.status_code == 201, response.text


async def run(
    servers: list[Server],
    shape: Shape,
    rate: int,
    seconds: float,
    processes: int,
    profile: Path | None = None,
    pause_gc: bool = True,
    client: str = "lean",
) -> dict[str, Any]:
    """Subscribers in ``processes`` child processes (each its own event loop: one Python process receiving
    all deliveries is a client-side queue of its own), the writer in this one. The schema exists already."""
    tally = Tally()
    schema = shape.schema
    figures: dict[str, Any] = {"rss_idle_mb": [s.rss_mb() for s in servers]}
    urls = [server.url for server in servers]
    figures["subscribers_per_server"] = [sum(n % len(urls) == k for n, _, _ in shape.plan) for k in range(len(urls))]
    context = multiprocessing.get_context("spawn")
    shares = [shape.plan[k::processes] for k in range(processes)]
    children = []
    for share in shares:
        ours, theirs = context.Pipe()
        child = context.Process(target=subscriber_process, args=(urls, share, theirs, pause_gc, client), daemon=True)
        child.start()
        children.append((child, ours, [n for n, _, _ in share]))
    loop = asyncio.get_running_loop()
    for _, pipe, _ in children:
        assert await loop.run_in_executor(None, pipe.recv) == "ready"
    figures["rss_connected_mb"] = [s.rss_mb() for s in servers]
    figures["load_before"] = os.getloadavg()
    spy = start_profile(servers[0], seconds, profile) if profile else None
    # Warm-up: writes no subscriber matches (bucket BUCKETS) open the servers' database connections and
    # prepare their statements. Fresh servers measured cold put the first second's deliveries among the
    # latest of a run (1,539 of them over 100 ms in one, 2026-11-27).
    await write_at_rate(servers, schema, rate, WARMUP_SECONDS, Tally(), shape.unread)
    if shape.before_writes is not None:
        started = time.perf_counter()
        await loop.run_in_executor(None, shape.before_writes)
        figures["before_writes_seconds"] = time.perf_counter() - started
    sampled_from = time.perf_counter()
    cpu = _cpu_now(servers)
    stalls = asyncio.create_task(_io_stalls(seconds + 2))
    with collector_paused(pause_gc):
        figures["write_seconds"] = await write_at_rate(servers, schema, rate, seconds, tally, shape.body)
    if spy is not None:
        await loop.run_in_executor(None, spy.wait)
    expected = {(n, seq) for seq in tally.sent_at for n in shape.readers(seq)}
    for _, pipe, share in children:
        mine = set(share)
        pipe.send({pair for pair in expected if pair[0] in mine})
    subscribers_cpu = 0.0
    for child, pipe, _ in children:
        received, receipts, first_worker, child_cpu = await loop.run_in_executor(None, pipe.recv)
        tally.received.update(received)
        tally.receipts += receipts
        tally.first_worker += first_worker
        subscribers_cpu += child_cpu
        child.join(30)
    figures["cpu"] = {key: now - cpu[key] for key, now in _cpu_now(servers).items()} | {"subscribers": subscribers_cpu}
    figures["load_after"] = os.getloadavg()
    if spy is not None:  # what the profiled worker delivered while py-spy sampled it
        sampled_to = sampled_from + profile_seconds(seconds)
        figures["profiled"] = (
            profile_seconds(seconds),
            sum(sampled_from <= at <= sampled_to for at in tally.first_worker),
        )
    figures["rss_after_mb"] = [s.rss_mb() for s in servers]
    figures["rss_peak_mb"] = [s.peak_rss_mb() for s in servers]
    figures["expected"] = len(expected)
    figures["failed_writes"] = tally.failed_writes
    figures["lost"] = len(expected - tally.received.keys())
    figures["unexpected"] = len(tally.received.keys() - expected)
    figures["duplicates"] = sum(count - 1 for count in tally.received.values())
    from_send = [(at - tally.sent_at[seq]) * 1000 for seq, at in tally.receipts if seq in tally.sent_at]
    from_answer = [(at - tally.answered_at[seq]) * 1000 for seq, at in tally.receipts if seq in tally.answered_at]
    for name, values in (("from_send", from_send), ("from_answer", from_answer)):
        figures[name] = {pct: percentile(values, pct) for pct in (50, 90, 99)} if values else {}
    figures["writes_started"] = min(tally.sent_at.values(), default=0.0)
    figures["late"] = late_seconds(tally, figures["writes_started"])
    figures["io_stalls"] = await stalls
    return figures


IO_PRESSURE = Path("/proc/pressure/io")


async def _io_stalls(seconds: float) -> list[tuple[float, int]]:
    """``(perf_counter, µs)`` every 0.1 s for ``seconds``: the time so far in which every task of the machine
    waited for I/O (the kernel's pressure stall information, "full" line; empty where the kernel has none).
    A commit waits for its WAL flush, so a slow flush of the host's disk holds every write back at once."""
    samples: list[tuple[float, int]] = []
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        try:
            full = IO_PRESSURE.read_text().splitlines()[1]
        except (OSError, IndexError):
            return []
        samples.append((time.perf_counter(), int(full.rsplit("total=", 1)[1])))
        await asyncio.sleep(0.1)
    return samples


def io_stall_ms(samples: list[tuple[float, int]], start: float, end: float) -> float:
    """Milliseconds of full I/O stall between two ``perf_counter`` times (the samples that bracket them)."""
    inside = [total for at, total in samples if start - 0.1 <= at <= end + 0.1]
    return (inside[-1] - inside[0]) / 1000 if len(inside) > 1 else 0.0


def late_seconds(tally: Tally, start: float) -> dict[int, tuple[int, float]]:
    """Per second of the writes (by send time, from ``start``, the first send), the deliveries later than
    the target from send and the latest one: whether a p99 over the target comes from a few stalls or from
    every second."""
    late: dict[int, tuple[int, float]] = {}
    for seq, at in tally.receipts:
        sent = tally.sent_at.get(seq)
        if sent is None or (at - sent) * 1000 < TARGET_P99_MS:
            continue
        second, ms = int(sent - start), (at - sent) * 1000
        count, worst = late.get(second, (0, 0.0))
        late[second] = (count + 1, max(worst, ms))
    return late


def _postgres_cpu() -> float:
    """CPU seconds of every PostgreSQL process on the machine (backends, WAL writer, checkpointer …)."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if stat.read_text().split(" ", 2)[1] == "(postgres)":
                total += process_cpu(int(stat.parent.name))
        except OSError:  # gone meanwhile
            continue
    return total


def _cpu_now(servers: list[Server]) -> dict[str, float]:
    """CPU seconds so far: the servers', this process's (the writer's), PostgreSQL's."""
    return {
        "servers": sum(process_cpu(server.process.pid) for server in servers),
        "writer": time.process_time(),
        "postgresql": _postgres_cpu(),
    }


def profile_seconds(seconds: float) -> int:
    return max(1, int(seconds) - 1)


def start_profile(server: Server, seconds: float, output: Path) -> subprocess.Popen:
    """py-spy on ``server`` for the writes (``--nonblocking``: the process is not paused to be sampled),
    collapsed stacks to ``output`` (a line per stack and its count: summarised by ``bench.profile_summary``)."""
    spy = ROOT / ".venv" / "bin" / "py-spy"
    command = [str(spy), "record", "--nonblocking", "--rate", "200", "--format", "raw", "--output", str(output)]
    command += ["--duration", str(profile_seconds(seconds)), "--pid", str(server.process.pid)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def create_throughput(server: Server, folder: str, seconds: int, rounds: int = 3) -> dict[str, Any]:
    """Create req/s against one process with the event log and one without (same database), in ``rounds``
    interleaved pairs whose order alternates: a lone pair of 10 s runs gave the log's cost as 12% and 23%
    on one quiet machine (2026-11-27), the drift of the machine between its two runs."""
    body = {"seq": 1, "bucket": 1}
    pairs: list[dict[str, Any]] = []
    with serve(server.env, folder, TRELLIS_EVENTS="false") as without:
        targets = {"without": without, "with": server}
        for number in range(rounds):
            order = ("without", "with") if number % 2 == 0 else ("with", "without")
            pairs.append(
                {
                    label: wrk(
                        f"{targets[label].url}/database/LiveBench",
                        method="POST",
                        body=body,
                        headers={"masterkey": "bench-master-key"},
                        connections=8,
                        duration=seconds,
                    )
                    for label in order
                }
            )
    return {"pairs": pairs}


def event_log_cost(pair: dict[str, Any]) -> float:
    """The share of creates/s the event log costs in one pair of runs."""
    return 1 - pair["with"]["rps"] / pair["without"]["rps"]


def report(figures: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    send, answer, creates = figures["from_send"], figures["from_answer"], figures.get("creates")
    verdict = "met" if send.get(99, 1e9) < TARGET_P99_MS else "missed"
    rss = lambda key: " + ".join(f"{mb:.0f}" for mb in figures[key])  # noqa: E731
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"""## {stamp}{f" — {args.label}" if args.label else ""}

`{command}` on {platform.node()} ({os.cpu_count()} cores), PostgreSQL + Redis, two eventlet processes.
Load average before/after: {figures["load_before"][0]:.1f} / {figures["load_after"][0]:.1f} (the machine is shared).

{args.subscribers} {args.client} subscribers (half per server process; held by {args.client_processes} client process(es)), `where: {{bucket: k}}` (10% each), {args.rate} writes/s for
{args.seconds} s ({figures["write_seconds"]:.1f} s actual), {figures["expected"]} expected deliveries.

| figure | value |
|---|---|
| delivery latency from send p50 / p90 / p99 | {send.get(50, 0):.1f} / {send.get(90, 0):.1f} / {send.get(99, 0):.1f} ms |
| delivery latency from the answer (after commit) p50 / p99 | {answer.get(50, 0):.1f} / {answer.get(99, 0):.1f} ms |
| target p99 < {TARGET_P99_MS:.0f} ms | {verdict} |
| lost / duplicated / unexpected | {figures["lost"]} / {figures["duplicates"]} / {figures["unexpected"]} |
| writes refused (status: count; not committed, no change expected) | {figures["failed_writes"] or "none"} |
| server RSS idle (MB, per process) | {rss("rss_idle_mb")} |
| server RSS with subscribers | {rss("rss_connected_mb")} |
| server RSS after the writes / peak | {rss("rss_after_mb")} / {rss("rss_peak_mb")} |
{late_row(figures)}{cpu_row(figures)}{creates_rows(creates)}{profiled_row(figures)}"""


def late_row(figures: dict[str, Any]) -> str:
    late, start = figures["late"], figures["writes_started"]
    samples = figures.get("io_stalls", [])
    total = sum(count for count, _ in late.values())
    worst = sorted(late.items(), key=lambda item: -item[1][0])[:3]
    seconds = ", ".join(
        f"{second}: {count} (latest {ms:.0f} ms; I/O stall {io_stall_ms(samples, start + second, start + second + 1):.0f} ms)"
        for second, (count, ms) in worst
    )
    all_io = io_stall_ms(samples, start, start + figures["write_seconds"])
    return (
        f"| deliveries later than {TARGET_P99_MS:.0f} ms from send | {total} ({100 * total / max(figures['expected'], 1):.2f}%), "
        f"in {len(late)} of the seconds; the worst (second of the writes: deliveries) {seconds or 'none'} |\n"
        f"| full I/O stall of the machine during the writes (/proc/pressure/io) | {all_io:.0f} ms |\n"
    )


def cpu_row(figures: dict[str, Any]) -> str:
    """CPU seconds from the first write to the last receipt, by side, and per expected delivery."""
    cpu, deliveries = figures["cpu"], max(figures["expected"], 1)
    sides = ("servers", "subscribers", "writer", "postgresql")
    each = ", ".join(f"{side} {cpu[side]:.1f} s ({cpu[side] / deliveries * 1e6:.0f} µs)" for side in sides)
    return f"| CPU from the first write to the last receipt (per delivery) | {each} |\n"


def profiled_row(figures: dict[str, Any]) -> str:
    if "profiled" not in figures:
        return ""
    seconds, deliveries = figures["profiled"]
    return f"| py-spy on the first worker: deliveries it made while sampled | {deliveries} in {seconds} s |\n"


def creates_rows(creates: dict[str, Any] | None) -> str:
    if not creates:
        return ""
    pairs = creates["pairs"]
    each = ", ".join(f"{p['with']['rps']:.0f} / {p['without']['rps']:.0f}" for p in pairs)
    costs = sorted(event_log_cost(p) for p in pairs)
    return f"""| creates/s with / without the event log (TRELLIS_EVENTS=false), each pair | {each} |
| the event log's cost, median of {len(pairs)} interleaved pairs (spread) | {100 * statistics.median(costs):.0f}% ({100 * costs[0]:.0f}–{100 * costs[-1]:.0f}%) |
"""


def summary(runs: list[dict[str, Any]]) -> str:
    """Median and spread of the runs' p50 and p99 from send, every run's figure, the verdict."""
    p99 = [run["from_send"].get(99, 1e9) for run in runs]
    p50 = [run["from_send"].get(50, 1e9) for run in runs]
    every = "met" if max(p99) < TARGET_P99_MS else "missed"
    lost = sum(run["lost"] for run in runs)
    loads = " / ".join(f"{run['load_before'][0]:.1f}" for run in runs)
    return f"""### {len(runs)} runs

| figure | median | spread (min–max) | every run |
|---|---|---|---|
| p99 from send (ms) | {statistics.median(p99):.1f} | {min(p99):.1f}–{max(p99):.1f} | {", ".join(f"{v:.1f}" for v in p99)} |
| p50 from send (ms) | {statistics.median(p50):.1f} | {min(p50):.1f}–{max(p50):.1f} | {", ".join(f"{v:.1f}" for v in p50)} |

Target p99 < {TARGET_P99_MS:.0f} ms in every run: {every}; lost in all runs: {lost}. Load average before each run: {loads}.
"""


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--subscribers", type=int, default=500)
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--wrk-seconds", type=int, default=10, help="each create run (0: none)")
    parser.add_argument("--wrk-rounds", type=int, default=3, help="interleaved pairs of create runs")
    parser.add_argument(
        "--client-processes", type=int, default=2, help="processes holding the subscribers (1: all in one)"
    )
    parser.add_argument(
        "--client-gc", action="store_true", help="keep the garbage collector on in the measuring processes"
    )
    parser.add_argument(
        "--client", choices=sorted(CLIENTS), default="lean", help="the subscribers' client (see LeanSubscriber)"
    )
    parser.add_argument("--no-write", action="store_true", help="print the report, do not add it to results/live.md")
    parser.add_argument("--runs", type=int, default=1, help="runs, each with fresh servers; median and spread")
    parser.add_argument("--label", default="", help="what the runs measure (the section's title)")
    parser.add_argument("--profile", type=Path, help="py-spy's collapsed stacks of the first worker during the writes")
    args = parser.parse_args(argv)
    command = "python -m bench.live_bench " + " ".join(argv if argv is not None else sys.argv[1:])
    runs = []
    for number in range(args.runs):
        last = number == args.runs - 1
        with bench_server("postgresql", TRELLIS_REDIS_URL=REDIS_URL) as first, tempfile.TemporaryDirectory() as folder:
            with serve(first.env, folder) as second:
                shape = bucket_shape(args.subscribers)
                create_schema(first, {"name": shape.schema, "fields": {"seq": "Number", "bucket": "Number"}})
                figures = asyncio.run(
                    run(
                        [first, second],
                        shape,
                        args.rate,
                        args.seconds,
                        args.client_processes,
                        args.profile if last else None,
                        not args.client_gc,
                        args.client,
                    )
                )
            if last and args.wrk_seconds:
                figures["creates"] = create_throughput(first, folder, args.wrk_seconds, args.wrk_rounds)
        runs.append(figures)
        text = report(figures, args, command.strip())
        print(text, flush=True)
        if not args.no_write:
            with RESULTS.open("a") as results:
                results.write("\n" + text)
    if len(runs) > 1:
        text = summary(runs)
        print(text)
        if not args.no_write:
            with RESULTS.open("a") as results:
                results.write("\n" + text)
    return runs[-1]


if __name__ == "__main__":
    main()
