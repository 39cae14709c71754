"""Live data under access control: writes fanned out to subscribers whose access differs (the goal: 2,000
subscribers, 100 writes/s for 60 s, p99 from send < 100 ms in every run, 0 lost, 0 leaked, at most 30 KB of
idle server memory per subscriber; the same with a bulk load just before the writes).

    .venv/bin/python -m bench.access_live_bench --subscribers 2000 --rate 100 --seconds 60 --runs 5
    .venv/bin/python -m bench.access_live_bench --subscribers 2000 --rate 100 --seconds 60 --runs 5 --bulk 50000
    .venv/bin/python -m bench.access_live_bench --subscribers 100 --rate 50 --seconds 5 --baseline

Each run has two fresh eventlet processes on one PostgreSQL database and Redis. The subscribers are users
(rows written with bulk SQL, each signed in by an app in this process: no password hash per user) in teams
three levels deep: leaves of 10 members (users shuffled into them), a middle team over 10 leaves, a root over
5 middle teams. Each is a lean websocket client (``bench.live_subscribers.LeanSubscriber``, token auth), subscribed
to one schema under access control WITHOUT a filter, half on each process: what it receives is decided by
access alone. Write ``seq`` names its readers in two field-backed relations (``reader``):

- ``viewers: [User]``: the users ``n`` with ``n mod 200 == seq mod 200`` (0.5% of them, directly);
- ``teams: [Team]``: middle teams ``seq mod M`` and ``(seq + M/2) mod M`` (of M), read by the members of
  their leaves (about 10% with 2,000 users: M is 20).

So a write reaches about a tenth of the subscribers (as ``bench.live_bench``'s filter), each a different set
of writes. The expected deliveries
are computed from the same rule and the memberships written; a receipt outside them is a leak.

``--bulk N``: before each run's writes, N documents no user may read, through ``POST /database/<schema>/many``
(1,000 a request, two at a time): their events reach both processes just before the writes.
``--baseline``: after each run under access, one of ``bench.live_bench``'s shape (masterkey subscribers,
``where: {bucket: n mod 10}``, the same fan-out decided by a filter).

Memory per subscriber: (RSS with every subscriber connected and subscribed − RSS before any) / the process's
subscribers, per process. CPU: servers, subscriber processes, writer and PostgreSQL, from the first write to the
last receipt. Each invocation appends a dated section to ``bench/results/access_live.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import random
import statistics
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import psycopg2

from bench.access_data import _dsn, _new_id, insert_people
from bench.common import ROOT, Server, bench_server, insert_many, serve
from bench.live_bench import (
    BUCKETS,
    REDIS_URL,
    TARGET_P99_MS,
    Shape,
    bucket_shape,
    cpu_row,
    create_schema,
    late_row,
    run,
)
from bench.live_subscribers import Plan, Tally, connect_lean

RESULTS = ROOT / "bench" / "results" / "access_live.md"
SCHEMA = "AccessLiveBench"
DIRECT = 200  # write seq names the users n with n mod DIRECT == seq mod DIRECT
TEAM_SIZE = 10  # members of a leaf team; leaves under a middle team
ROOT_SPAN = 5  # middle teams under a root
TARGET_KB = 30.0
FIELDS = {
    "seq": "Number",
    "bucket": "Number",
    "viewers": [{"type": "Relation", "model": "User"}],
    "teams": [{"type": "Relation", "model": "Team"}],
}
ACCESS = {"conduit": {"authorization": {"enabled": True, "fields": {"viewers": "reader", "teams": "reader"}}}}


class Population:
    """The subscribers' users and teams: ids, each user's middle team, and who reads write ``seq``."""

    def __init__(self, count: int, rnd: random.Random) -> None:
        self.users = [_new_id() for _ in range(count)]
        leaves = -(-count // TEAM_SIZE)
        self.middles = [_new_id() for _ in range(-(-leaves // TEAM_SIZE))]
        self.roots = [_new_id() for _ in range(-(-len(self.middles) // ROOT_SPAN))]
        self.leaves = [(_new_id(), self.middles[k // TEAM_SIZE]) for k in range(leaves)]
        order = list(range(count))
        rnd.shuffle(order)
        self.leaf_of = {n: position // TEAM_SIZE for position, n in enumerate(order)}
        by_middle: dict[int, list[int]] = {}
        for n in range(count):
            by_middle.setdefault(self.leaf_of[n] // TEAM_SIZE, []).append(n)
        self._by_middle = by_middle

    def named_middles(self, seq: int) -> list[int]:
        """The middle teams write ``seq`` names: two of them, apart by half their number (one when there is one)."""
        count = len(self.middles)
        return sorted({seq % count, (seq + count // 2) % count})

    def body(self, seq: int) -> dict[str, Any]:
        viewers = [self.users[n] for n in range(seq % DIRECT, len(self.users), DIRECT)]
        teams = [self.middles[m] for m in self.named_middles(seq)]
        return {"seq": seq, "bucket": seq % BUCKETS, "viewers": viewers, "teams": teams}

    def readers(self, seq: int) -> set[int]:
        found = set(range(seq % DIRECT, len(self.users), DIRECT))
        for middle in self.named_middles(seq):
            found.update(self._by_middle.get(middle, ()))
        return found

    def write(self, server: Server) -> None:
        """Users, teams and memberships with bulk SQL, as ``bench.access_bench.seed_access`` does."""
        teams = [(t, None) for t in self.roots]
        teams += [(m, self.roots[k // ROOT_SPAN]) for k, m in enumerate(self.middles)]
        teams += self.leaves
        members = [(self.leaves[self.leaf_of[n]][0], user) for n, user in enumerate(self.users)]
        with contextlib.closing(psycopg2.connect(_dsn(server))) as connection, connection.cursor() as cursor:
            insert_people(
                cursor,
                [(u, f"live{n}@example.com") for n, u in enumerate(self.users)],
                teams,
                [(team, user, "member") for team, user in members],
            )
            connection.commit()


@contextlib.contextmanager
def local_app(server: Server) -> Iterator[Any]:
    """An app in this process on ``server``'s database (threading, no Redis)."""
    from trellis import create_app

    saved = dict(os.environ)
    os.environ.update({k: v for k, v in server.env.items() if k != "PORT"})
    os.environ.update(TRELLIS_ASYNC_MODE="threading", TRELLIS_REDIS_URL="", TRELLIS_LOG_LEVEL="ERROR")
    try:
        app = create_app()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    yield app


def sign_in(server: Server, users: list[str]) -> list[str]:
    """An access token of each user: a session started by the Authentication module's own code."""
    from trellis_authentication.sessions import start_session

    with local_app(server) as app, app.app_context():
        return [start_session(user)["accessToken"] for user in users]


def access_shape(server: Server, count: int, bulk: int, rnd: random.Random) -> Shape:
    """The schema, users and teams on ``server``'s database, and what a run under access writes and expects."""
    create_schema(server, {"name": SCHEMA, "fields": FIELDS, "modelOptions": ACCESS})
    people = Population(count, rnd)
    people.write(server)
    tokens = sign_in(server, people.users)
    plan: Plan = [(n, {"token": tokens[n]}, {"schema": SCHEMA}) for n in range(count)]
    unread = lambda seq: {"seq": -1 - seq, "bucket": BUCKETS}  # noqa: E731  (names nobody)
    return Shape(SCHEMA, plan, people.readers, people.body, unread, bulk_load(server, SCHEMA, bulk) if bulk else None)


def bulk_load(server: Server, schema: str, documents: int) -> Any:
    def load() -> None:
        batches = [
            [{"seq": -1 - i, "bucket": BUCKETS} for i in range(start, min(start + 1000, documents))]
            for start in range(0, documents, 1000)
        ]
        insert_many(server, schema, batches)

    return load


def baseline_shape(server: Server, count: int, bulk: int) -> Shape:
    shape = bucket_shape(count)
    create_schema(server, {"name": shape.schema, "fields": {"seq": "Number", "bucket": "Number"}})
    shape.before_writes = bulk_load(server, shape.schema, bulk) if bulk else None
    return shape


def one_run(mode: str, args: argparse.Namespace, rnd: random.Random, profile: Path | None) -> dict[str, Any]:
    with bench_server("postgresql", TRELLIS_REDIS_URL=REDIS_URL) as first, tempfile.TemporaryDirectory() as folder:
        with serve(first.env, folder) as second:
            if mode == "access":
                shape = access_shape(first, args.subscribers, args.bulk, rnd)
            else:
                shape = baseline_shape(first, args.subscribers, args.bulk)
            figures = asyncio.run(run([first, second], shape, args.rate, args.seconds, args.client_processes, profile))
    return {"mode": mode, **figures}


STAGES = ("websocket", "namespace", "subscribed")


def memory_stages(args: argparse.Namespace, rnd: random.Random) -> dict[str, tuple[float, float]]:
    """Idle server memory per subscriber at each step of a subscribe: Engine.IO's websocket open only, the
    namespace connected too (token checked), and subscribed. Each step on a fresh server process (RSS
    does not shrink after sockets close), same database and users, with a process's share of the
    subscribers (half: the goal's two processes); (KB per subscriber, MB idle)."""
    found = {}
    with bench_server("postgresql", TRELLIS_REDIS_URL=REDIS_URL) as first, tempfile.TemporaryDirectory() as folder:
        shape = access_shape(first, args.subscribers, 0, rnd)
        for stage in STAGES:
            with serve(first.env, folder) as server:
                plan = [
                    (n, auth if stage != "websocket" else None, request if stage == "subscribed" else None)
                    for n, auth, request in shape.plan[::2]
                ]
                idle = server.rss_mb()
                found[stage] = (asyncio.run(_held_rss(server, plan)) - idle) * 1024 / len(plan), idle
    return found


async def _held_rss(server: Server, plan: Any) -> float:
    """The server's RSS (MB) with every subscriber of ``plan`` connected as far as its entries say."""
    tally = Tally()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        gate = asyncio.Semaphore(20)

        async def one(n: int, auth: Any, request: Any) -> Any:
            async with gate:
                return await connect_lean(server.url, n, auth, request, tally, http)

        clients = await asyncio.gather(*(one(*entry) for entry in plan))
        await asyncio.sleep(2)
        rss = server.rss_mb()
        await asyncio.gather(*(client.disconnect() for client in clients))
    return rss


def kb_per_subscriber(figures: dict[str, Any]) -> list[float]:
    return [
        (connected - idle) * 1024 / max(count, 1)
        for idle, connected, count in zip(
            figures["rss_idle_mb"], figures["rss_connected_mb"], figures["subscribers_per_server"], strict=True
        )
    ]


def row(number: int, figures: dict[str, Any]) -> str:
    send = figures["from_send"] or {pct: float("nan") for pct in (50, 90, 99)}  # nothing received
    kb = " / ".join(f"{value:.1f}" for value in kb_per_subscriber(figures))
    cpu = figures["cpu"]
    split = " / ".join(f"{cpu[side]:.1f}" for side in ("servers", "subscribers", "writer", "postgresql"))
    bulk = f"{figures['before_writes_seconds']:.1f}" if "before_writes_seconds" in figures else "–"
    return (
        f"| {number} | {figures['mode']} | {figures['load_before'][0]:.1f} | {bulk} | "
        f"{send.get(50, 0):.1f} / {send.get(90, 0):.1f} / {send.get(99, 0):.1f} | {figures['expected']} | "
        f"{figures['lost']} / {figures['unexpected']} / {figures['duplicates']} | {figures['failed_writes'] or 'none'} | "
        f"{kb} | {split} |"
    )


def report(runs: list[dict[str, Any]], args: argparse.Namespace, command: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = "\n".join(row(number, figures) for number, figures in enumerate(runs, 1))
    access = [r for r in runs if r["mode"] == "access"]
    p99 = [r["from_send"].get(99, float("nan")) for r in access]
    p50 = [r["from_send"].get(50, float("nan")) for r in access]
    met = sum(value < TARGET_P99_MS for value in p99)
    clean = all(r["lost"] == 0 and r["unexpected"] == 0 and r["duplicates"] == 0 for r in access)
    kb = [value for r in access for value in kb_per_subscriber(r)]
    details = "\n\n".join(
        f"Run {number} ({figures['mode']}):\n\n| figure | value |\n|---|---|\n"
        + late_row(figures)
        + cpu_row(figures).rstrip("\n")
        for number, figures in enumerate(runs, 1)
    )
    return f"""## {stamp}{f" — {args.label}" if args.label else ""}

`{command}` on {platform.node()} ({os.cpu_count()} cores, shared), PostgreSQL + Redis, two eventlet processes
(fresh for each run). {args.subscribers} lean subscribers (users, token auth, no filter; half per process, held
by {args.client_processes} client processes), each write readable by the users it names (0.5%) and by the members
of the two teams it names (see the module docstring); {args.rate} writes/s for {args.seconds} s a run;
{f"{args.bulk} documents by `/many` before each run's writes" if args.bulk else "no bulk load"}.

| run | mode | load | bulk (s) | latency from send p50 / p90 / p99 (ms) | expected | lost (not received 30 s after the last write) / leaked / duplicated | refused writes | idle KB per subscriber (per process) | CPU s: servers / subscribers / writer / PostgreSQL |
|---|---|---|---|---|---|---|---|---|---|
{rows}

Under access: p99 < {TARGET_P99_MS:.0f} ms in {met} of {len(access)} runs (median p99 {statistics.median(p99):.1f} ms,
{min(p99):.1f}–{max(p99):.1f}; median p50 {statistics.median(p50):.1f} ms); 0 lost, 0 leaked, 0 duplicated:
{"yes" if clean else "NO"}; idle server memory per subscriber {min(kb):.1f}–{max(kb):.1f} KB (target ≤ {TARGET_KB:.0f}:
{"met" if max(kb) <= TARGET_KB else "missed"}).

{details}
"""


def memory_report(stages: dict[str, tuple[float, float]], args: argparse.Namespace, command: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = "\n".join(
        f"| {stage} | {kb:.1f} | {kb - previous:+.1f} | {idle:.0f} |"
        for (stage, (kb, idle)), previous in zip(
            stages.items(), [0.0, *(kb for kb, _ in stages.values())], strict=False
        )
    )
    return f"""## {stamp} — idle server memory per subscriber, step by step{f" ({args.label})" if args.label else ""}

`{command}`: {args.subscribers // 2} lean subscribers (a process's share of {args.subscribers}) on one fresh server
process per step (same database and users).

| step | KB per subscriber | added by the step | RSS idle before (MB) |
|---|---|---|---|
{rows}
"""


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--subscribers", type=int, default=2000)
    parser.add_argument("--rate", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--runs", type=int, default=5, help="runs under access, each with fresh servers")
    parser.add_argument("--bulk", type=int, default=0, help="documents loaded by /many just before each run")
    parser.add_argument("--baseline", action="store_true", help="after each run, one with a filter instead")
    parser.add_argument("--client-processes", type=int, default=2)
    parser.add_argument("--profile", type=Path, help="py-spy's collapsed stacks of the first server, last run")
    parser.add_argument("--memory", action="store_true", help="only idle memory per subscriber, step by step")
    parser.add_argument("--label", default="", help="what the runs measure (the section's title)")
    parser.add_argument("--no-write", action="store_true", help="print the report, do not append it")
    args = parser.parse_args(argv)
    command = "python -m bench.access_live_bench " + " ".join(argv if argv is not None else sys.argv[1:])
    rnd = random.Random(7)
    if args.memory:
        stages = memory_stages(args, rnd)
        text = memory_report(stages, args, command.strip())
        print(text)
        if not args.no_write:
            with RESULTS.open("a") as results:
                results.write("\n" + text)
        return []
    runs = []
    for number in range(args.runs):
        for mode in ("access", "filter") if args.baseline else ("access",):
            profile = args.profile if number == args.runs - 1 and mode == "access" else None
            runs.append(one_run(mode, args, rnd, profile))
            print(row(len(runs), runs[-1]), flush=True)
    text = report(runs, args, command.strip())
    print(text)
    if not args.no_write:
        with RESULTS.open("a") as results:
            results.write("\n" + text)
    return runs


if __name__ == "__main__":
    main()
