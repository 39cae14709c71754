"""Slow clients against one server process: how long ``/health`` takes to answer under a crowd of
connections that each sent part of a request line, and how long the server keeps a partial request and
an idle keep-alive connection open.

    .venv/bin/python -m bench.slowloris_bench                  # 1,075 partial connections, waits up to 120 s
    .venv/bin/python -m bench.slowloris_bench --crowd 2000 --wait 60

Needs ``ulimit -n`` above twice the crowd (this process holds the clients, the server their peers).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import socket
import time

from bench.common import bench_server

PARTIAL = b"GET /health HTTP/1.1\r\nHo"  # a request line and the start of a header, never finished


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def open_crowd(port: int, size: int) -> list[socket.socket]:
    """``size`` connections that each sent a partial request (a refused connect ends the crowd early)."""
    crowd = []
    for _ in range(size):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(PARTIAL)
        except OSError:
            break
        crowd.append(sock)
    return crowd


def health_seconds(port: int, wait: float) -> float | None:
    """Seconds until a fresh connection's ``GET /health`` is answered 200 (None: not within ``wait``)."""
    start = time.monotonic()
    while time.monotonic() - start < wait:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
                sock.settimeout(max(0.1, wait - (time.monotonic() - start)))
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if sock.recv(64).startswith(b"HTTP/1.1 200"):
                    return time.monotonic() - start
        except OSError:
            pass
        time.sleep(0.05)
    return None


def open_seconds(port: int, first: bytes, wait: float, read_answer: bool = False) -> float | None:
    """Seconds the server keeps a connection open after ``first`` was sent (None: still open after ``wait``).
    With ``read_answer`` the one answer is read first and the time counts from then (an idle keep-alive)."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        sock.sendall(first)
        if read_answer:
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += sock.recv(4096)
            head, _, rest = answer.partition(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            while len(rest) < length:
                rest += sock.recv(4096)
        start = time.monotonic()
        try:
            while sock.recv(4096):  # a 408 answer, then the close
                pass
        except TimeoutError:
            return None
        except OSError:
            pass
        return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--crowd", type=int, default=1075)
    parser.add_argument("--wait", type=float, default=120.0, help="give up on each figure after this long")
    parser.add_argument("--database", default="sqlite")
    args = parser.parse_args()
    with bench_server(args.database) as server:
        port = _port(server.url)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            partial = pool.submit(open_seconds, port, PARTIAL, args.wait)
            idle = pool.submit(open_seconds, port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", args.wait, True)
            crowd = open_crowd(port, args.crowd)
            health = health_seconds(port, args.wait)
            figures = {"partial request open": partial.result(), "idle keep-alive open": idle.result()}
        for sock in crowd:
            sock.close()

    def shown(seconds: float | None) -> str:
        return f"> {args.wait:.0f} s" if seconds is None else f"{seconds:.1f} s"

    print(f"crowd of {len(crowd)} partial requests: /health answered after {shown(health)}")
    for name, seconds in figures.items():
        print(f"{name}: {shown(seconds)}")


if __name__ == "__main__":
    main()
