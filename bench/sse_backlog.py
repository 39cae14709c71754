"""Server-Sent Events clients that stop reading: the server's memory under writes they never take.

    .venv/bin/python -m bench.sse_backlog                          # 20 clients, 5,000 writes of 10 kB
    .venv/bin/python -m bench.sse_backlog --clients 5 --writes 500

One eventlet server process on a throwaway PostgreSQL database. Each client opens
``GET /database/<schema>/changes`` on a plain socket, reads the response head and then never reads
again. A writer creates ``--writes`` documents of ``--size`` bytes (``--threads`` at a time). The server's
resident memory (``VmRSS``) is read before the writes, right after them and after ``--settle`` seconds;
the clients are still connected, still not reading. Also reported: how many of the streams the server
has ended (a client that falls behind its stream's buffer is disconnected), from ``ss``.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import requests

from bench.common import bench_server


def open_stream(port: int, path: str, headers: dict[str, str]) -> socket.socket:
    """A GET of an event stream whose response head is read; afterwards the socket is never read."""
    client = socket.create_connection(("127.0.0.1", port))
    head = "".join(f"{key}: {value}\r\n" for key, value in headers.items())
    client.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{head}\r\n".encode())
    received = b""
    while b": subscribed" not in received:
        received += client.recv(4096)
    return client


def open_on_server(port: int, clients: list[socket.socket]) -> int:
    """How many of the clients' connections the server still holds open (its side ``ESTABLISHED``; a
    stream the server ended is past that even while the unread bytes are still on their way)."""
    lines = subprocess.run(
        ["ss", "-tnH", "state", "established", f"( sport = :{port} )"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    peers = {line.split()[-1].rsplit(":", 1)[1] for line in lines if line.strip()}
    return sum(str(client.getsockname()[1]) in peers for client in clients)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--writes", type=int, default=5000)
    parser.add_argument("--size", type=int, default=10_000, help="bytes of text per document")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--settle", type=float, default=5.0)
    args = parser.parse_args()

    with bench_server() as server:
        headers = server.admin_headers
        port = int(server.url.rsplit(":", 1)[1])
        schema = {"name": "Backlog", "fields": {"n": "Number", "text": {"type": "String", "index": False}}}
        requests.post(
            f"{server.url}/admin/database/schemas", json=schema, headers=headers, timeout=30
        ).raise_for_status()
        clients = [open_stream(port, "/database/Backlog/changes", headers) for _ in range(args.clients)]
        time.sleep(1)
        before = server.rss_mb()
        text = "x" * args.size
        sessions = [requests.Session() for _ in range(args.threads)]

        def write(n: int) -> None:
            response = sessions[n % args.threads].post(
                f"{server.url}/database/Backlog", json={"n": n, "text": text}, headers=headers, timeout=60
            )
            response.raise_for_status()

        started = time.monotonic()
        with ThreadPoolExecutor(args.threads) as pool:
            list(pool.map(write, range(args.writes)))
        seconds = time.monotonic() - started
        after = server.rss_mb()
        time.sleep(args.settle)
        settled = server.rss_mb()
        closed = args.clients - open_on_server(port, clients)
        print(
            f"{args.clients} clients not reading, {args.writes} writes of {args.size} B in {seconds:.1f} s: "
            f"RSS {before:.1f} MB before, {after:.1f} MB after (+{after - before:.1f}), "
            f"{settled:.1f} MB {args.settle:.0f} s later (+{settled - before:.1f}); "
            f"peak {server.peak_rss_mb():.1f} MB; streams closed by the server: {closed}/{args.clients}"
        )
        for client in clients:
            client.close()


if __name__ == "__main__":
    main()
