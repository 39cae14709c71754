"""Chat fan-out: many Socket.IO clients in one room of one eventlet server process.

    .venv/bin/python -m bench.chat_bench                       # 500 clients, 100 messages, PostgreSQL, Redis
    .venv/bin/python -m bench.chat_bench --runs 3              # three runs; the figures are their medians
    .venv/bin/python -m bench.chat_bench --clients 100 --messages 20 --no-redis --no-write

As in production, the server has the Socket.IO queue on Redis (`TRELLIS_REDIS_URL`, a redis-server child
on its own port: the shared one's pub/sub channels carry other processes' emits); `--no-redis` measures
the in-memory manager.

Each message is sent by one client on the socket (``message(roomId, text)``: stored, then emitted to
the room) and the clock stops when the last of the clients has received it. All clients live in this
one asyncio process (python-socketio ``AsyncClient``, websocket transport, one shared aiohttp session)
so the load generator costs one core at most and the server keeps the other. Send and receive times
come from the same clock. Messages go one at a time: the next one leaves when every client has the
previous one, so each figure is a fan-out latency, not a queueing delay.

Figures: per message, the time until ALL clients have it (p50/p99 over the messages); per delivery,
the time until one client has it (p50/p99 over clients × messages); server memory (RSS) idle, with
the clients connected, after the messages, and its peak.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import socketio

from bench.common import ROOT, Server, bench_server, redis_child, serve

NAMESPACE = "/chat/"
TARGET_P99_MS = 250.0
RESULTS = ROOT / "bench" / "results" / "chat.md"
NODELAY_RESULTS = ROOT / "bench" / "results" / "chat_nodelay.md"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * pct // 100))
    return ordered[int(rank) - 1]


async def make_users(http: aiohttp.ClientSession, server: Server, count: int) -> list[dict[str, str]]:
    """Users created by the admin route and signed in, through the real API (a few at a time)."""
    limits = {"rateLimits": {"loginPerIp": "100000/minute", "loginPerEmail": "100000/minute"}}
    async with http.put(f"{server.url}/config/authentication", json=limits, headers=server.admin_headers) as response:
        assert response.status == 200, await response.text()
    gate = asyncio.Semaphore(8)

    async def one(n: int) -> dict[str, str]:
        body = {"email": f"bench-{n}@example.com", "password": "bench-password-1"}
        async with gate:
            async with http.post(f"{server.url}/authentication/users", json=body, headers=server.admin_headers) as r:
                assert r.status == 201, await r.text()
            async with http.post(f"{server.url}/authentication/local", json=body) as r:
                assert r.status == 200, await r.text()
                tokens = await r.json()
        return {"id": tokens["userId"], "token": tokens["accessToken"]}

    return await asyncio.gather(*(one(n) for n in range(count)))


class Receiver:
    """Records when each bench message reached each client."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.sent_at: dict[int, float] = {}
        self.latencies: dict[int, list[float]] = {}
        self.complete: dict[int, asyncio.Event] = {}

    def expect(self, seq: int) -> asyncio.Event:
        self.latencies[seq] = []
        self.complete[seq] = asyncio.Event()
        return self.complete[seq]

    def on_message(self, message: dict[str, Any]) -> None:
        now = time.perf_counter()
        seq = int(message["message"].split()[1])
        arrived = self.latencies.get(seq)
        if arrived is None:
            return
        arrived.append((now - self.sent_at[seq]) * 1000)
        if len(arrived) == self.expected:
            self.complete[seq].set()


async def connect_all(
    url: str, users: list[dict[str, str]], http: aiohttp.ClientSession, receiver: Receiver
) -> list[socketio.AsyncClient]:
    gate = asyncio.Semaphore(25)

    async def one(user: dict[str, str]) -> socketio.AsyncClient:
        client = socketio.AsyncClient(reconnection=False, http_session=http)
        client.on("message", receiver.on_message, namespace=NAMESPACE)
        async with gate:
            await client.connect(
                url,
                socketio_path="realtime",
                transports=["websocket"],
                namespaces=[NAMESPACE],
                auth={"token": user["token"]},
                wait_timeout=60,
            )
        return client

    return await asyncio.gather(*(one(user) for user in users))


async def setup(http: aiohttp.ClientSession, server: Server, clients: int) -> tuple[list[dict[str, str]], str]:
    """Users signed in and one room holding them all."""
    users = await make_users(http, server, clients)
    owner = users[0]
    body = {"roomName": "bench", "users": [u["id"] for u in users[1:]]}
    headers = {"Authorization": f"Bearer {owner['token']}"}
    async with http.post(f"{server.url}/chat/rooms", json=body, headers=headers) as r:
        assert r.status == 201, await r.text()
        return users, (await r.json())["roomId"]


async def measure(
    http: aiohttp.ClientSession, server: Server, users: list[dict[str, str]], room_id: str, messages: int
) -> dict[str, Any]:
    """Connect every user, send ``messages`` one at a time with an acknowledgement, time ack and fan-out."""
    figures: dict[str, Any] = {"rss_idle_mb": server.rss_mb(), "load_before": os.getloadavg()[0]}
    receiver = Receiver(len(users))
    started = time.perf_counter()
    sockets = await connect_all(server.url, users, http, receiver)
    figures["connect_s"] = time.perf_counter() - started
    await asyncio.sleep(1)
    figures["rss_connected_mb"] = server.rss_mb()

    sender = sockets[0]
    per_message: list[float] = []
    first: list[float] = []
    acks: list[float] = []
    server_cpu, client_cpu = cpu_seconds(server.process.pid), time.process_time()
    for seq in range(messages):
        done = receiver.expect(seq)
        receiver.sent_at[seq] = time.perf_counter()
        # call() asks for the acknowledgement (the stored message) and waits for it.
        await sender.call("message", (room_id, f"bench {seq}"), namespace=NAMESPACE, timeout=30)
        acks.append((time.perf_counter() - receiver.sent_at[seq]) * 1000)
        await asyncio.wait_for(done.wait(), timeout=30)
        per_message.append(max(receiver.latencies[seq]))
        first.append(min(receiver.latencies[seq]))
        await asyncio.sleep(0.02)
    server_cpu = cpu_seconds(server.process.pid) - server_cpu
    client_cpu = time.process_time() - client_cpu
    figures["rss_after_mb"] = server.rss_mb()
    figures["load_after"] = os.getloadavg()[0]
    figures["rss_peak_mb"] = server.peak_rss_mb()
    deliveries = [ms for seq in range(messages) for ms in receiver.latencies[seq]]
    figures.update(
        ack_p50_ms=percentile(acks, 50),
        ack_p99_ms=percentile(acks, 99),
        all_p50_ms=percentile(per_message, 50),
        all_p99_ms=percentile(per_message, 99),
        all_max_ms=max(per_message),
        first_p50_ms=percentile(first, 50),
        one_p50_ms=percentile(deliveries, 50),
        one_p99_ms=percentile(deliveries, 99),
        deliveries=len(deliveries),
        server_cpu_ms_per_message=server_cpu * 1000 / messages,
        client_cpu_us_per_delivery=client_cpu * 1e6 / len(deliveries),
    )
    await asyncio.gather(*(s.disconnect() for s in sockets))
    return figures


async def run(server: Server, clients: int, messages: int, runs: int) -> list[dict[str, Any]]:
    """``runs`` measurements on one server, the sockets connected afresh for each."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        users, room_id = await setup(http, server, clients)
        results = []
        for _ in range(runs):
            results.append(await measure(http, server, users, room_id, messages))
            await asyncio.sleep(1)  # the disconnections settle
        return results


def medians(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the runs (the load averages: the lowest before, the highest after)."""
    figures = {key: statistics.median(r[key] for r in results) for key in results[0]}
    figures["load_before"] = min(r["load_before"] for r in results)
    figures["load_after"] = max(r["load_after"] for r in results)
    return figures


async def nodelay_rounds(server: Server, clients: int, messages: int, rounds: int) -> dict[str, list[dict[str, Any]]]:
    """The same load on servers with TCP_NODELAY off and on, alternating (the machine drifts)."""
    out: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        users, room_id = await setup(http, server, clients)
        with tempfile.TemporaryDirectory(prefix="trellis-bench-") as folder:
            for round_ in range(rounds):
                for mode in ("off", "on") if round_ % 2 == 0 else ("on", "off"):
                    flag = "1" if mode == "on" else "0"
                    with serve(server.env, folder, TRELLIS_TCP_NODELAY=flag) as other:
                        out[mode].append(await measure(http, other, users, room_id, messages))
    return out


def nodelay_report(results: dict[str, list[dict[str, Any]]], clients: int, messages: int, command: str) -> str:
    keys = [
        ("ack_p50_ms", "acknowledgement, p50"),
        ("ack_p99_ms", "acknowledgement, p99"),
        ("first_p50_ms", "message reaches the first client, p50"),
        ("all_p50_ms", f"message reaches all {clients} clients, p50"),
        ("all_p99_ms", f"message reaches all {clients} clients, p99"),
    ]
    rows = []
    for key, label in keys:
        off = statistics.median(r[key] for r in results["off"])
        on = statistics.median(r[key] for r in results["on"])
        ratios = [b[key] / a[key] for a, b in zip(results["off"], results["on"], strict=True) if a[key]]
        rows.append(f"| {label} | {off:.1f} ms | {on:.1f} ms | {statistics.median(ratios):.2f} |")
    load = [r["load_before"] for mode in results.values() for r in mode]
    return f"""# Chat: TCP_NODELAY on accepted connections, off vs on

Command: `{command}`

{len(results["on"])} rounds per setting, alternating off/on (on/off in odd rounds), each a fresh server
process (`python -m trellis.testing.server`, eventlet, PostgreSQL, `TRELLIS_TCP_NODELAY=0|1`) with {clients}
Socket.IO clients (python-socketio, websocket) in one room; one client sends {messages} messages with
`call()` (waits for the acknowledgement). Figures are medians over the rounds of each round's
percentile; the ratio is the median of the paired per-round ratios on/off. Machine: {os.cpu_count()} cores,
shared with other engineers' work: 1-minute load average during the rounds {min(load):.1f} to {max(load):.1f}
(above ~2, other processes competed for the cores).

| figure | NODELAY off | NODELAY on | on / off |
|---|---:|---:|---:|
{chr(10).join(rows)}
"""


def report(results: list[dict[str, Any]], clients: int, messages: int, database: str, redis: bool, command: str) -> str:
    figures = medians(results)
    verdict = "met" if figures["all_p99_ms"] < TARGET_P99_MS else "NOT met"
    queue = "the Socket.IO queue on Redis (a redis-server child)" if redis else "no Redis (in-memory manager)"
    runs = "\n".join(
        f"| {n} | {r['all_p50_ms']:.1f} ms | {r['all_p99_ms']:.1f} ms | {r['server_cpu_ms_per_message']:.1f} ms "
        f"| {r['load_before']:.1f} / {r['load_after']:.1f} |"
        for n, r in enumerate(results, 1)
    )
    return f"""# Chat fan-out benchmark

Command: `{command}`

{clients} Socket.IO clients (python-socketio `AsyncClient`, websocket transport, one asyncio process) in
one room of one Trellis server process (eventlet, `python -m trellis.testing.server`, {database},
{queue}). One client sends {messages} messages on the socket, one at a time; each is stored, then emitted
to the room. {len(results)} run(s), each with the sockets connected afresh; the table gives each figure's
median over the runs. Machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}; the
clients share the machine with the server. Load average (1 min) before / after the run:
{figures["load_before"]:.1f} / {figures["load_after"]:.1f} (above ~2, other processes were competing for the cores).

| figure | value |
|---|---:|
| acknowledgement of the send, p50 | {figures["ack_p50_ms"]:.1f} ms |
| acknowledgement of the send, p99 | {figures["ack_p99_ms"]:.1f} ms |
| message reaches **all** {clients} clients, p50 | {figures["all_p50_ms"]:.1f} ms |
| message reaches **all** {clients} clients, p99 | {figures["all_p99_ms"]:.1f} ms |
| message reaches all clients, worst | {figures["all_max_ms"]:.1f} ms |
| message reaches the **first** client, p50 | {figures["first_p50_ms"]:.1f} ms |
| one delivery, p50 ({figures["deliveries"]} deliveries) | {figures["one_p50_ms"]:.1f} ms |
| one delivery, p99 | {figures["one_p99_ms"]:.1f} ms |
| server CPU per message (store + fan-out) | {figures["server_cpu_ms_per_message"]:.1f} ms |
| client-process CPU per delivery | {figures["client_cpu_us_per_delivery"]:.0f} µs |
| {clients} clients connected in | {figures["connect_s"]:.1f} s |
| server RSS idle | {figures["rss_idle_mb"]:.0f} MB |
| server RSS with {clients} clients | {figures["rss_connected_mb"]:.0f} MB |
| server RSS after the messages | {figures["rss_after_mb"]:.0f} MB |
| server peak RSS | {figures["rss_peak_mb"]:.0f} MB |

Target: p99 of "reaches all" under {TARGET_P99_MS:.0f} ms — **{verdict}**.

| run | reaches all, p50 | reaches all, p99 | server CPU per message | load before / after |
|---|---:|---:|---:|---:|
{runs}
"""


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--database", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--runs", type=int, default=1, help="measurements on the server; figures are medians")
    parser.add_argument("--no-redis", action="store_true", help="the in-memory Socket.IO manager (one process)")
    parser.add_argument("--no-write", action="store_true", help=f"do not write {RESULTS.relative_to(ROOT)}")
    parser.add_argument(
        "--nodelay-rounds",
        type=int,
        default=0,
        help=f"compare TCP_NODELAY off/on over N alternating rounds (writes {NODELAY_RESULTS.name})",
    )
    args = parser.parse_args(argv)
    command = " ".join([".venv/bin/python -m bench.chat_bench", *(argv if argv is not None else sys.argv[1:])]).strip()
    with contextlib.ExitStack() as stack:
        redis_url = "" if args.no_redis else stack.enter_context(redis_child())
        # The cheap argon2 profile: creating the users is set-up, not what is measured.
        server = stack.enter_context(
            bench_server(
                args.database,
                modules="authentication,chat,email,sms",
                TRELLIS_PASSWORD_PROFILE="test",
                TRELLIS_REDIS_URL=redis_url,
            )
        )
        if args.nodelay_rounds:
            results = asyncio.run(nodelay_rounds(server, args.clients, args.messages, args.nodelay_rounds))
        else:
            runs = asyncio.run(run(server, args.clients, args.messages, args.runs))
    if args.nodelay_rounds:
        text = nodelay_report(results, args.clients, args.messages, command)
        print(text)
        if not args.no_write:
            NODELAY_RESULTS.write_text(text)
        return results
    text = report(runs, args.clients, args.messages, args.database, not args.no_redis, command)
    print(text)
    if not args.no_write:
        Path(RESULTS).write_text(text)
    return medians(runs)


if __name__ == "__main__":
    main()
