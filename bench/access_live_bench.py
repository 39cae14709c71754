"""Live data under access control: 200 writes/s fanned out to 500 subscribers who may each read a different
tenth of the documents (the goal: p99 < 100 ms, 0 lost, 0 leaked).

    .venv/bin/python -m bench.access_live_bench                    # 500 users, 200 writes/s, 20 s a round
    .venv/bin/python -m bench.access_live_bench --subscribers 100 --rate 50 --seconds 5 --rounds 1

Two eventlet processes share one PostgreSQL database and Redis. Each subscriber is a signed-in user
(Socket.IO, token auth) subscribed to one schema under access control, WITHOUT a filter: what it receives is
decided by access alone. A document names the users who may read it in a field-backed relation
(``viewers: [User]`` → ``reader``): user ``i`` is named by the writes with ``seq % 10 == i % 10``, so each
write is readable by 10% of the subscribers and every subscriber's subjects differ. The admin writer
creates the documents at a fixed rate. A receipt of a document the user may not read is a leak.

Rounds interleave with a baseline of the same shape without access control: masterkey subscribers with
``where: {bucket: k}`` (the filter path of ``bench.live_bench``); the report gives both p99s and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import platform
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import aiohttp
import requests
import socketio

from bench.common import MASTER_KEY, ROOT, Server, bench_server, serve
from bench.live_bench import (
    BUCKETS,
    NAMESPACE,
    REDIS_URL,
    TARGET_P99_MS,
    Tally,
    _until_received,
    percentile,
    write_at_rate,
)

RESULTS = ROOT / "bench" / "results" / "access_live.md"
PASSWORD = "correct-horse-battery-staple"
ADMIN = {"masterkey": MASTER_KEY}


def make_users(url: str, count: int) -> list[tuple[str, str]]:
    """``(user id, access token)`` of ``count`` new users (each signs in from its own forwarded address,
    so the per-address sign-in limit is not what is measured)."""

    def one(n: int) -> tuple[str, str]:
        body = {"email": f"bench-{n}-{os.getpid()}@example.com", "password": PASSWORD}
        created = requests.post(f"{url}/authentication/users", json=body, headers=ADMIN, timeout=60)
        assert created.status_code == 201, created.text
        address = {"X-Forwarded-For": f"198.18.{n // 250}.{n % 250 + 1}"}
        signed = requests.post(f"{url}/authentication/local", json=body, headers=address, timeout=60)
        assert signed.status_code == 200, signed.text
        return signed.json()["userId"], signed.json()["accessToken"]

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, range(count)))


async def connect(
    url: str, subscriber: int, schema: str, auth: dict[str, str], where: Any, tally: Tally, http: Any
) -> Any:
    client = socketio.AsyncClient(reconnection=False, http_session=http)

    async def on_change(change: dict[str, Any]) -> None:
        tally.on_change(subscriber, change)

    client.on("change", on_change, namespace=NAMESPACE)
    await client.connect(
        url, socketio_path="realtime", namespaces=[NAMESPACE], transports=["websocket"], auth=auth, wait_timeout=60
    )
    request = {"schema": schema, **({"where": where} if where is not None else {})}
    ack = await client.call("subscribe", request, NAMESPACE, 60)
    assert "subscriptionId" in ack, ack
    return client


def subscriber_process(urls: list[str], plan: list[tuple[int, dict[str, str], Any]], schema: str, pipe: Any) -> None:
    """A child holding its share of the subscribers (``(index, auth, where)``): "ready" once all are
    subscribed, then, given the pairs it must receive, its receipts (see ``bench.live_bench``)."""

    async def main() -> None:
        tally = Tally()
        gate = asyncio.Semaphore(4)  # subscribes in flight: the machine's PostgreSQL connections are shared
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:

            async def one(n: int, auth: dict[str, str], where: Any) -> Any:
                async with gate:
                    return await connect(urls[n % len(urls)], n, schema, auth, where, tally, http)

            clients = await asyncio.gather(*(one(*entry) for entry in plan))
            pipe.send("ready")
            expected = await asyncio.get_running_loop().run_in_executor(None, pipe.recv)
            await _until_received(tally, expected)
            pipe.send((tally.received, tally.receipts))
            await asyncio.gather(*(client.disconnect() for client in clients))

    asyncio.run(main())


async def one_round(
    servers: list[Server], mode: str, schema: str, users: list[tuple[str, str]], args: argparse.Namespace
) -> dict[str, Any]:
    """One round: ``access`` (user subscribers, no filter) or ``filter`` (masterkey, ``where bucket``)."""
    count = args.subscribers
    plan = [
        (n, {"token": users[n][1]}, None) if mode == "access" else (n, ADMIN, {"bucket": n % BUCKETS})
        for n in range(count)
    ]
    viewers = [[users[n][0] for n in range(count) if n % BUCKETS == bucket] for bucket in range(BUCKETS)]
    context = multiprocessing.get_context("spawn")
    children = []
    for k in range(args.client_processes):
        ours, theirs = context.Pipe()
        child = context.Process(
            target=subscriber_process, args=([s.url for s in servers], plan[k :: args.client_processes], schema, theirs)
        )
        child.daemon = True
        child.start()
        children.append((child, ours, {entry[0] for entry in plan[k :: args.client_processes]}))
    loop = asyncio.get_running_loop()
    for _, pipe, _ in children:
        assert await loop.run_in_executor(None, pipe.recv) == "ready"
    tally = Tally()
    load = os.getloadavg()[0]
    await write_at_rate(
        servers,
        schema,
        args.rate,
        args.seconds,
        tally,
        lambda seq: {"seq": seq, "bucket": seq % BUCKETS, "viewers": viewers[seq % BUCKETS]},
    )
    expected = {(n, seq) for seq in tally.sent_at for n in range(count) if n % BUCKETS == seq % BUCKETS}
    for _, pipe, mine in children:
        pipe.send({pair for pair in expected if pair[0] in mine})
    for child, pipe, _ in children:
        received, receipts = await loop.run_in_executor(None, pipe.recv)
        tally.received.update(received)
        tally.receipts += receipts
        child.join(30)
    latencies = [(at - tally.sent_at[seq]) * 1000 for seq, at in tally.receipts if seq in tally.sent_at]
    return {
        "mode": mode,
        "load": load,
        "expected": len(expected),
        "lost": len(expected - tally.received.keys()),
        "leaked": len(tally.received.keys() - expected),
        "duplicates": sum(n - 1 for n in tally.received.values()),
        "failed_writes": tally.failed_writes,
        **{f"p{pct}": percentile(latencies, pct) if latencies else 0.0 for pct in (50, 90, 99)},
    }


async def run(servers: list[Server], args: argparse.Namespace) -> list[dict[str, Any]]:
    schema = "AccessLiveBench"
    body = {
        "name": schema,
        "fields": {"seq": "Number", "bucket": "Number", "viewers": [{"type": "Relation", "model": "User"}]},
        "modelOptions": {"conduit": {"authorization": {"enabled": True, "fields": {"viewers": "reader"}}}},
    }
    response = requests.post(f"{servers[0].url}/admin/database/schemas", json=body, headers=ADMIN, timeout=60)
    assert response.status_code == 201, response.text
    users = make_users(servers[0].url, args.subscribers)
    rounds = []
    for _ in range(args.rounds):
        for mode in ("access", "filter"):
            rounds.append(await one_round(servers, mode, schema, users, args))
    return rounds


def report(rounds: list[dict[str, Any]], args: argparse.Namespace, command: str) -> str:
    rows = "\n".join(
        f"| {r['mode']} | {r['load']:.1f} | {r['p50']:.1f} / {r['p90']:.1f} / {r['p99']:.1f} | {r['expected']} | "
        f"{r['lost']} / {r['leaked']} / {r['duplicates']} | {r['failed_writes'] or 'none'} |"
        for r in rounds
    )
    access = [r for r in rounds if r["mode"] == "access"]
    baseline = [r for r in rounds if r["mode"] == "filter"]
    worst = max(r["p99"] for r in access)
    ratio = sum(r["p99"] for r in access) / max(sum(r["p99"] for r in baseline), 1e-9)
    clean = all(r["lost"] == 0 and r["leaked"] == 0 for r in access)
    return f"""# Live data under access control

`{command}` on {platform.node()} ({os.cpu_count()} cores, shared), PostgreSQL + Redis, two eventlet processes.

{args.subscribers} subscribers, each a user whose access differs (a field-backed `viewers` relation names a tenth
of them per write), {args.rate} writes/s for {args.seconds} s per round; rounds interleaved with the same
fan-out decided by a filter for masterkey subscribers (no access control).

| round | load | latency from send p50 / p90 / p99 (ms) | expected | lost / leaked / duplicated | refused writes |
|---|---|---|---|---|---|
{rows}

Access p99 (worst round): {worst:.1f} ms, target < {TARGET_P99_MS:.0f} ms: {"met" if worst < TARGET_P99_MS else "missed"};
0 lost and 0 leaked: {"yes" if clean else "NO"}. p99 under access / p99 of the filter baseline: {ratio:.2f}×.
"""


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--subscribers", type=int, default=500)
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--client-processes", type=int, default=2)
    parser.add_argument("--no-write", action="store_true", help="print the report, do not write the results file")
    args = parser.parse_args(argv)
    command = "python -m bench.access_live_bench " + " ".join(argv if argv is not None else sys.argv[1:])
    with bench_server("postgresql", TRELLIS_REDIS_URL=REDIS_URL, TRELLIS_PROXY_COUNT="1") as first:
        with serve(first.env, os.path.dirname(first.env["TRELLIS_INSTANCE_PATH"])) as second:
            rounds = asyncio.run(run([first, second], args))
    text = report(rounds, args, command.strip())
    print(text)
    if not args.no_write:
        RESULTS.write_text(text)
    return rounds


if __name__ == "__main__":
    main()
