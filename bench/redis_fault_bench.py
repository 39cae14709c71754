"""Database write and list latency while Redis hangs (SIGSTOP), against Redis up, in alternating rounds.

    .venv/bin/python -m bench.redis_fault_bench            # 3 rounds of 200 writes + 200 lists per state

One Trellis server (eventlet, modules authentication + database, PostgreSQL) with `TRELLIS_REDIS_URL`
pointing at a redis-server child on its own port (never the shared one). Each round sends sequential
`POST /database/Faulty` and `GET /database/Faulty?limit=20` requests, first with Redis up, then with
it stopped (SIGSTOP: connections are accepted by the kernel and never answered, the worst fault).
Reported: median and p99 per state, and the ratio hung / up of the medians paired per round.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import tempfile
import time

import redis
import requests

from bench.common import ROOT, bench_server

RESULTS = ROOT / "bench" / "results" / "redis_faults.md"
REQUESTS_PER_ROUND = 200
ROUNDS = 3


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _round(session: requests.Session, url: str, headers: dict[str, str]) -> tuple[list[float], list[float]]:
    writes, lists = [], []
    for number in range(REQUESTS_PER_ROUND):
        started = time.perf_counter()
        response = session.post(f"{url}/database/Faulty", json={"title": f"t{number}"}, headers=headers, timeout=30)
        writes.append(time.perf_counter() - started)
        assert response.status_code == 201, response.text
        started = time.perf_counter()
        response = session.get(f"{url}/database/Faulty?limit=20&title[$ne]=x{number}", headers=headers, timeout=30)
        lists.append(time.perf_counter() - started)
        assert response.status_code == 200, response.text
    return writes, lists


def _ms(values: list[float], quantile: float) -> float:
    return sorted(values)[min(len(values) - 1, int(len(values) * quantile))] * 1000


def main() -> None:
    port = _free_port()
    with tempfile.TemporaryDirectory() as folder:
        child = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--bind",
                "127.0.0.1",
                "--dir",
                folder,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            for _ in range(100):
                try:
                    redis.Redis(port=port).ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.05)
            with bench_server(
                modules="authentication,database,email,sms", TRELLIS_REDIS_URL=f"redis://127.0.0.1:{port}/0"
            ) as server:
                session = requests.Session()
                created = session.post(
                    f"{server.url}/admin/database/schemas",
                    headers=server.admin_headers,
                    json={"name": "Faulty", "fields": {"title": "String"}},
                    timeout=30,
                )
                assert created.status_code == 201, created.text
                _round(session, server.url, server.admin_headers)  # warm-up
                results: dict[str, dict[str, list[float]]] = {
                    "up": {"write": [], "list": []},
                    "hung": {"write": [], "list": []},
                }
                ratios: dict[str, list[float]] = {"write": [], "list": []}
                for _ in range(ROUNDS):
                    up = _round(session, server.url, server.admin_headers)
                    os.kill(child.pid, signal.SIGSTOP)
                    try:
                        hung = _round(session, server.url, server.admin_headers)
                    finally:
                        os.kill(child.pid, signal.SIGCONT)
                    time.sleep(6)  # let the circuit close again before the next "up" round
                    for kind, a, b in (("write", up[0], hung[0]), ("list", up[1], hung[1])):
                        results["up"][kind] += a
                        results["hung"][kind] += b
                        ratios[kind].append(statistics.median(b) / statistics.median(a))
        finally:
            child.kill()
            child.wait()
    load = os.getloadavg()
    lines = [
        "# Redis faults: Database latency with Redis up and hung (SIGSTOP)",
        "",
        f"`.venv/bin/python -m bench.redis_fault_bench`; {ROUNDS} alternating rounds of {REQUESTS_PER_ROUND} "
        f"sequential writes and lists per state; PostgreSQL; load average at the end {load[0]:.1f} on "
        f"{os.cpu_count()} cores (other engineers' work included).",
        "",
        "| state | request | median ms | p99 ms | max ms |",
        "|---|---|---|---|---|",
    ]
    for state in ("up", "hung"):
        for kind in ("write", "list"):
            values = results[state][kind]
            lines.append(
                f"| {state} | {kind} | {_ms(values, 0.5):.1f} | {_ms(values, 0.99):.1f} | {max(values) * 1000:.1f} |"
            )
    lines += [
        "",
        "Paired median ratio hung / up per round: "
        + "; ".join(f"{kind} {', '.join(f'{r:.2f}' for r in ratios[kind])}" for kind in ("write", "list")),
        "",
    ]
    RESULTS.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
