"""The subscribers of the live benchmarks: many websockets in a child process, each receipt timed.

``LeanSubscriber`` reads Engine.IO and Socket.IO framing by hand; ``connect`` holds a subscriber on
python-socketio's ``AsyncClient`` instead (``bench.live_bench --client socketio``). A ``Tally`` counts each
(subscriber, seq) receipt, so lost and duplicated deliveries show, and keeps its time for the latencies.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import socketio

NAMESPACE = "/database/"


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * pct // 100))
    return ordered[int(rank) - 1]


class Tally:
    """Receipts per (subscriber, seq): lost and duplicated deliveries, latencies."""

    def __init__(self) -> None:
        self.sent_at: dict[int, float] = {}
        self.answered_at: dict[int, float] = {}
        self.received: dict[tuple[int, int], int] = {}
        self.receipts: list[tuple[int, float]] = []
        self.first_worker: list[float] = []  # receipt times of the first server's subscribers (even numbers)
        self.failed_writes: dict[int, int] = {}

    def on_change(self, subscriber: int, change: dict[str, Any]) -> None:
        now = time.perf_counter()
        seq = change["document"]["seq"]
        key = (subscriber, seq)
        self.received[key] = self.received.get(key, 0) + 1
        self.receipts.append((seq, now))
        if subscriber % 2 == 0:
            self.first_worker.append(now)


# A subscriber of a run: its number, its Socket.IO ``auth`` and its ``subscribe`` request.
Plan = list[tuple[int, dict[str, Any], dict[str, Any]]]


async def connect(
    url: str, subscriber: int, auth: dict[str, Any], request: dict[str, Any], tally: Tally, http: aiohttp.ClientSession
) -> Any:
    client = socketio.AsyncClient(reconnection=False, http_session=http)

    async def on_change(change: dict[str, Any]) -> None:
        tally.on_change(subscriber, change)

    client.on("change", on_change, namespace=NAMESPACE)
    await client.connect(
        url, socketio_path="realtime", namespaces=[NAMESPACE], transports=["websocket"], auth=auth, wait_timeout=60
    )
    ack = await client.call("subscribe", request, NAMESPACE, 60)
    assert "subscriptionId" in ack, ack
    return client


# Engine.IO 4 packets over a websocket, one per frame: "0" open, "2" ping (answered "3"), "4" message; a
# message carries a Socket.IO 5 packet: "0" connect, "2" event, "3" ack, each "<namespace>," then its data.
_CONNECTED, _EVENT, _ACK = f"40{NAMESPACE},", f"42{NAMESPACE},", f"43{NAMESPACE},"


class LeanSubscriber:
    """A subscriber on one websocket that reads only what the benchmark needs: the namespace's connect, the
    acknowledged ``subscribe``, pings and ``change`` events. python-socketio's ``AsyncClient`` (made for
    applications: an asyncio task per message, packet objects, handler dispatch) costs its subscriber
    processes about as much CPU as the two servers spend delivering (``--client socketio``, measured in
    ``bench/results/live.md``), and on a 2-core machine that CPU is the servers'."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse, subscriber: int, tally: Tally) -> None:
        self.socket, self.subscriber, self.tally = socket, subscriber, tally
        self.reader: asyncio.Task | None = None

    async def _next(self) -> str:
        """The next packet that is not a ping (answered) during the handshake."""
        while True:
            text = await self.socket.receive_str(timeout=60)
            if text != "2":
                return text
            await self.socket.send_str("3")

    async def subscribe(self, auth: dict[str, Any] | None, request: dict[str, Any] | None) -> None:
        """Engine.IO's open, the namespace's connect with ``auth``, then ``request`` (None: none) and reading."""
        opened = await self._next()
        assert opened.startswith("0"), opened
        if auth is not None:
            await self.socket.send_str(_CONNECTED + json.dumps(auth))
            connected = await self._next()
            assert connected.startswith(_CONNECTED), connected
        if request is not None:
            await self.socket.send_str(f"{_EVENT}0" + json.dumps(["subscribe", request]))
            ack = await self._next()
            assert ack.startswith(f"{_ACK}0") and "subscriptionId" in json.loads(ack[len(_ACK) + 1 :])[0], ack
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        socket, on_change, subscriber = self.socket, self.tally.on_change, self.subscriber
        async for message in socket:
            if message.type != aiohttp.WSMsgType.TEXT:
                return
            text = message.data
            if text.startswith(_EVENT):
                name, change = json.loads(text[len(_EVENT) :])
                if name == "change":
                    on_change(subscriber, change)
            elif text == "2":
                await socket.send_str("3")

    async def disconnect(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
        await self.socket.close()


async def connect_lean(
    url: str,
    subscriber: int,
    auth: dict[str, Any] | None,
    request: dict[str, Any] | None,
    tally: Tally,
    http: aiohttp.ClientSession,
) -> Any:
    """A ``LeanSubscriber``; ``auth`` and ``request`` None stop it before the namespace's connect and the
    subscribe (what each step costs the server: ``bench.access_live_bench --memory``)."""
    socket = await http.ws_connect(f"{url}/realtime/?EIO=4&transport=websocket", max_msg_size=0)
    client = LeanSubscriber(socket, subscriber, tally)
    await client.subscribe(auth, request)
    return client


CLIENTS = {"lean": connect_lean, "socketio": connect}


async def subscribe_all(urls: list[str], plan: Plan, tally: Tally, http: Any, client: str = "lean") -> list[Any]:
    """Subscriber ``n`` on ``urls[n mod len(urls)]``, 20 subscribes at a time (each one reads the
    subscriber's viewer: the machine's PostgreSQL connections are shared)."""
    gate = asyncio.Semaphore(20)
    connect_one = CLIENTS[client]

    async def one(n: int, auth: dict[str, Any], request: dict[str, Any]) -> Any:
        async with gate:
            return await connect_one(urls[n % len(urls)], n, auth, request, tally, http)

    return await asyncio.gather(*(one(*entry) for entry in plan))


async def until_received(tally: Tally, expected: set[tuple[int, int]]) -> None:
    deadline = time.monotonic() + 30
    while not expected <= tally.received.keys() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    await asyncio.sleep(1)  # late duplicates would arrive now


@contextlib.contextmanager
def collector_paused(paused: bool = True) -> Iterator[None]:
    """No garbage collection in a measuring process while deliveries are timed. With it, each subscriber
    process (250 sockets, ~5,000 receipts/s) paused 13–14 times in a 30 s run for a full collection of
    50–280 ms, and the writer once for 55 ms (``gc.callbacks``, 2026-11-27): every receipt that arrived
    meanwhile was timed late, and those pauses made the p99. The servers' own collections are not paused
    (they ran none during the writes: their start-up heap is frozen, see ``trellis.server.serve``).
    ``--client-gc`` keeps the collector on, to measure what it adds."""
    if not paused:
        yield
        return
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


def subscriber_process(urls: list[str], plan: Plan, pipe: Any, pause_gc: bool = True, client: str = "lean") -> None:
    """A child holding ``plan``'s subscribers: "ready" once all are subscribed, then, given the
    (subscriber, seq) pairs it must receive, its receipts and the CPU seconds it spent meanwhile.
    ``time.perf_counter`` is the system's monotonic clock, the same in every process, so receipts compare
    with the writer's times."""

    async def main() -> None:
        tally = Tally()
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            clients = await subscribe_all(urls, plan, tally, http, client)
            with collector_paused(pause_gc):
                pipe.send("ready")
                cpu = time.process_time()
                expected = await asyncio.get_running_loop().run_in_executor(None, pipe.recv)
                await until_received(tally, expected)
                cpu = time.process_time() - cpu
            pipe.send((tally.received, tally.receipts, tally.first_worker, cpu))
            await asyncio.gather(*(client.disconnect() for client in clients))

    asyncio.run(main())
