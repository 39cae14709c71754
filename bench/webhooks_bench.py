"""Webhooks: 1,000 events delivered to one fast receiver, and what the deliveries cost the API's reads.

    .venv/bin/python -m bench.webhooks_bench                       # PostgreSQL, 3 rounds, writes the results
    .venv/bin/python -m bench.webhooks_bench --database sqlite --rounds 1 --no-write

One Trellis server process (eventlet, every installed module, default webhook settings: 8 attempts in
flight). Events are Database documents created through `POST /database/Item/many` (one event each). The
receiver is a threaded `http.server` in this process on 127.0.0.1 answering 204 at once (HTTP/1.1
keep-alive); it notes when each delivery arrives, and the latency of an event is that time minus its
`createdAt` (recorded in the writing transaction, same clock).

Each round:
1. **burst**: 1,000 documents in 10 requests of 100, sent back to back; deliveries/s is 1,000 over the time
   from the first event's `createdAt` to the last arrival; latency p50/p99 includes the queueing.
2. **reads with and without deliveries**, in alternating order: `wrk -c16` reads documents by id for
   `--seconds` while a writer creates 1,000 documents at an even pace over the same seconds. With the
   webhook inactive nothing is queued or sent (the baseline: the same writes, the same events); with it
   active each event is delivered. The ratio of the two read rates is the deliveries' cost; latency p50/p99
   here is that of deliveries at a steady 1,000 events per window.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests

from bench.common import ROOT, Server, bench_server, wrk

RESULTS = ROOT / "bench" / "results" / "webhooks.md"
EVENTS = 1000
BATCH = 100
CONNECTIONS = 16


class Receiver:
    """Counts deliveries: (arrival time, event createdAt) per delivery, for the current phase."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[float, str]] = []
        self.lock = threading.Condition()

    def reset(self) -> None:
        with self.lock:
            self.arrivals = []

    def wait_for(self, count: int, timeout: float = 300) -> list[tuple[float, str]]:
        deadline = time.monotonic() + timeout
        with self.lock:
            while len(self.arrivals) < count:
                if not self.lock.wait(max(deadline - time.monotonic(), 0)) and time.monotonic() >= deadline:
                    raise SystemExit(f"only {len(self.arrivals)} of {count} deliveries arrived in {timeout} s")
            return list(self.arrivals)


@contextmanager
def receiving() -> Iterator[tuple[Receiver, str]]:
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            arrived = time.time()
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()
            created = json.loads(body)["createdAt"]
            with state.lock:
                state.arrivals.append((arrived, created))
                state.lock.notify_all()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 128  # socketserver's 5 overflows when the senders connect at once: resets

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def latencies_ms(arrivals: list[tuple[float, str]]) -> dict[str, float]:
    values = sorted((arrived - _epoch(created)) * 1000 for arrived, created in arrivals)
    return {"p50_ms": round(values[len(values) // 2], 1), "p99_ms": round(values[int(len(values) * 0.99) - 1], 1)}


def create(server: Server, count: int) -> list[str]:
    docs = [{"title": f"doc {n}", "price": n} for n in range(count)]
    response = requests.post(
        f"{server.url}/database/Item/many", json={"docs": docs}, headers=server.admin_headers, timeout=120
    )
    response.raise_for_status()
    return [doc["_id"] for doc in response.json()["docs"]]


def admin(server: Server, method: str, path: str, body: Any) -> dict[str, Any]:
    response = requests.request(method, server.url + path, json=body, headers=server.admin_headers, timeout=60)
    response.raise_for_status()
    return response.json()


def cpu_seconds(server: Server) -> float:
    """User + system CPU the server process has used (from /proc)."""
    fields = Path(f"/proc/{server.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def write_burst(server: Server) -> None:
    for _ in range(EVENTS // BATCH):
        create(server, BATCH)


def burst(server: Server, receiver: Receiver, hook: dict[str, Any]) -> dict[str, float]:
    """The burst delivered, and the server CPU per delivery: the burst's CPU minus that of the same writes
    with the webhook inactive (its events are recorded and read by the dispatcher, nothing is sent)."""
    admin(server, "PUT", f"/admin/webhooks/{hook['_id']}", {"active": False})
    started = cpu_seconds(server)
    write_burst(server)
    time.sleep(2)  # the dispatcher's passes over these events
    baseline = cpu_seconds(server) - started
    admin(server, "PUT", f"/admin/webhooks/{hook['_id']}", {"active": True})
    receiver.reset()
    started = cpu_seconds(server)
    write_burst(server)
    arrivals = receiver.wait_for(EVENTS)
    time.sleep(max(2 - (time.time() - max(arrived for arrived, _ in arrivals)), 0))  # the same window
    used = cpu_seconds(server) - started
    first_event = min(_epoch(created) for _, created in arrivals)
    last_arrival = max(arrived for arrived, _ in arrivals)
    return {
        "deliveries_per_s": round(EVENTS / (last_arrival - first_event), 1),
        **latencies_ms(arrivals),
        "cpu_ms": round((used - baseline) / EVENTS * 1000, 2),
    }


def reads_while_writing(server: Server, paths: list[str], seconds: int) -> dict[str, float]:
    """wrk reads for ``seconds`` while EVENTS documents are created at an even pace."""
    batches = EVENTS // BATCH * 2  # 50 documents a request, 20 requests spread over the window

    def writer() -> None:
        started = time.monotonic()
        for n in range(batches):
            time.sleep(max(started + n * seconds / batches - time.monotonic(), 0))
            create(server, EVENTS // batches)

    thread = threading.Thread(target=writer)
    thread.start()
    stats = wrk(
        f"{server.url}/database/Item",
        connections=CONNECTIONS,
        duration=seconds,
        paths=paths,
        headers=server.admin_headers,
    )
    thread.join()
    return stats


def run(database: str, rounds: int, seconds: int) -> dict[str, Any]:
    with bench_server(database) as server, receiving() as (receiver, url):
        admin(server, "PUT", "/admin/webhooks/config", {"allowPrivateTargets": True})
        admin(
            server,
            "POST",
            "/admin/database/schemas",
            {"name": "Item", "fields": {"title": "String", "price": "Number"}},
        )
        paths = [f"/database/Item/{doc_id}" for doc_id in create(server, 1000)]
        hook = admin(server, "POST", "/admin/webhooks", {"url": url, "events": ["database.Item.create"]})
        bursts, steady, reads = [], [], {"without": [], "with": []}
        for number in range(rounds):
            bursts.append(burst(server, receiver, hook))
            order = ("without", "with") if number % 2 == 0 else ("with", "without")
            for case in order:
                admin(server, "PUT", f"/admin/webhooks/{hook['_id']}", {"active": case == "with"})
                time.sleep(1)  # the previous phase's deliveries are done; nothing of it is in flight
                receiver.reset()
                reads[case].append(reads_while_writing(server, paths, seconds))
                if case == "with":
                    steady.append(latencies_ms(receiver.wait_for(EVENTS)))
            ratio = reads["with"][-1]["rps"] / reads["without"][-1]["rps"]
            print(f"round {number + 1}: burst {bursts[-1]}, reads with/without {ratio:.2f}", file=sys.stderr)
        failed = requests.get(
            f"{server.url}/admin/webhooks/{hook['_id']}/deliveries",
            params={"status": "failed", "limit": 1},
            headers=server.admin_headers,
            timeout=60,
        ).json()["count"]
    ratios = [w["rps"] / wo["rps"] for w, wo in zip(reads["with"], reads["without"], strict=True)]
    return {"bursts": bursts, "steady": steady, "reads": reads, "ratios": ratios, "failed": failed}


def _median(rows: list[dict[str, float]], key: str) -> float:
    return round(statistics.median(row[key] for row in rows), 2)


def report(database: str, result: dict[str, Any], seconds: int, command: str) -> str:
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    bursts, steady, reads, ratios = result["bursts"], result["steady"], result["reads"], result["ratios"]
    round_lines = "\n".join(
        f"| {n + 1} | {b['deliveries_per_s']} | {b['p50_ms']} | {b['p99_ms']} | {b['cpu_ms']} | {s['p50_ms']} | {s['p99_ms']} | "
        f"{wo['rps']} | {w['rps']} | {r * 100:.0f}% |"
        for n, (b, s, wo, w, r) in enumerate(zip(bursts, steady, reads["without"], reads["with"], ratios, strict=True))
    )
    return f"""# Webhooks benchmark

Command: `{command}`

One Trellis server process (eventlet, {database}, every module, default webhook settings), one receiver on
127.0.0.1 answering 204 at once. Burst: 1,000 `database.Item.create` events written back to back (10 ×
`POST /database/Item/many` of 100), deliveries/s from the first event's `createdAt` to the last arrival,
latency = arrival − `createdAt`; server CPU per delivery = the burst's CPU (from `/proc`) minus that of the
same 1,000 writes with the webhook inactive, over 1,000. Reads: `wrk -t2 -c{CONNECTIONS} -d{seconds}s` on `GET /database/Item/{{id}}`
while 1,000 documents are written at an even pace over the same {seconds} s, with the webhook inactive
(nothing queued or sent) and active (every event delivered), in alternating order; latency at that steady
pace is in the "steady" columns. Failed deliveries at the end: {result["failed"]}.

| round | burst deliveries/s | burst p50 ms | burst p99 ms | server CPU ms per delivery | steady p50 ms | steady p99 ms | reads/s without | reads/s with | with / without |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|
{round_lines}
| median | {_median(bursts, "deliveries_per_s")} | {_median(bursts, "p50_ms")} | {_median(bursts, "p99_ms")} | {_median(bursts, "cpu_ms")} | {_median(steady, "p50_ms")} | {_median(steady, "p99_ms")} | {_median(reads["without"], "rps")} | {_median(reads["with"], "rps")} | {statistics.median(ratios) * 100:.0f}% |

Machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}; the receiver, wrk
and the writer share it with the server and the database (load average before writing: {load}).
"""


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--no-write", action="store_true", help="print the results instead of writing them")
    args = parser.parse_args(argv)
    result = run(args.database, args.rounds, args.seconds)
    command = " ".join([".venv/bin/python -m bench.webhooks_bench", *(sys.argv[1:] if argv is None else argv)])
    text = report(args.database, result, args.seconds, command)
    if not args.no_write:
        RESULTS.write_text(text)
    print(text)
    return result


if __name__ == "__main__":
    main()
