"""Authentication: sign-in (argon2 verify + a new session) and token-verified reads, concurrency 16.

    .venv/bin/python -m bench.auth_bench                          # PostgreSQL, 10 s per case
    .venv/bin/python -m bench.auth_bench --database sqlite --duration 5 --no-write

One Trellis server process (eventlet, `python -m trellis.testing.server`, only the authentication
module and the Email and SMS modules it requires, the default argon2 profile: OWASP's argon2id, m=19 MiB,
t=2, p=1), 16 concurrent clients. Cases:

- `POST /authentication/local`, right password: argon2 verify, insert a session, sign two tokens;
- the same with a wrong password and with an unknown email: both must cost what a right one does
  (one argon2 verify each), so their latencies sit together;
- `GET /authentication/user` with a user token: JWT check plus one primary-key join (user + session);
- `GET /health` and a bare Flask route on the same stack (the ceiling) for scale.

Login limits are raised for the run (`PUT /config/authentication`); otherwise the limiter answers 429.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import threading
import time
from typing import Any

import requests

from bench.common import ROOT, Server, bench_server, ceiling_server, table, wrk

RESULTS = ROOT / "bench" / "results" / "authentication.md"
CONNECTIONS = 16
PASSWORD = "bench-password-123"


def prepare(server: Server) -> dict[str, str]:
    limits = {"rateLimits": {"loginPerIp": "1000000/minute", "loginPerEmail": "1000000/minute"}}
    response = requests.put(
        f"{server.url}/config/authentication", json=limits, headers=server.admin_headers, timeout=30
    )
    response.raise_for_status()
    body = {"email": "bench@example.com", "password": PASSWORD}
    created = requests.post(f"{server.url}/authentication/users", json=body, headers=server.admin_headers, timeout=30)
    created.raise_for_status()
    tokens = requests.post(f"{server.url}/authentication/local", json=body, timeout=30)
    tokens.raise_for_status()
    return tokens.json()


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * pct // 100))
    return ordered[int(rank) - 1]


def closed_loop(url: str, body: dict[str, Any], connections: int, duration: int) -> dict[str, float]:
    """``connections`` keep-alive clients posting back to back for ``duration`` s (wrk's model).

    For sign-in only: at a few hundred ms per argon2 verify, 16 queued requests outlast wrk's fixed 2 s
    timeout, which would drop exactly the slow tail we want to see. The client's own cost (~1 ms per
    request) is small beside a verify.
    """
    latencies: list[float] = []
    non_2xx = 0
    errors = 0
    lock = threading.Lock()
    deadline = time.monotonic() + duration

    def client() -> None:
        nonlocal non_2xx, errors
        with requests.Session() as http:
            while time.monotonic() < deadline:
                started = time.perf_counter()
                try:
                    status = http.post(url, json=body, timeout=60).status_code
                except requests.RequestException:
                    with lock:
                        errors += 1
                    continue
                elapsed = (time.perf_counter() - started) * 1000
                with lock:
                    latencies.append(elapsed)
                    non_2xx += not 200 <= status < 400

    started = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - started
    return {
        "rps": round(len(latencies) / wall, 1),
        **{f"p{pct}_ms": round(percentile(latencies, pct), 2) for pct in (50, 90, 99)},
        "non_2xx": float(non_2xx),
        "socket_errors": float(errors),
    }


def argon2_verify_ms(samples: int = 5) -> float:
    """One argon2 verify with the default parameters, in this process: the floor of a sign-in."""
    from argon2 import PasswordHasher

    from trellis.passwords import PROFILES

    hasher = PasswordHasher.from_parameters(PROFILES["default"])
    stored = hasher.hash(PASSWORD)
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        hasher.verify(stored, PASSWORD)
        times.append((time.perf_counter() - started) * 1000)
    return sorted(times)[samples // 2]


def run(database: str, duration: int) -> list[tuple[str, dict[str, float]]]:
    rows: list[tuple[str, dict[str, float]]] = []
    with bench_server(database, modules="authentication,email,sms", TRELLIS_PASSWORD_PROFILE="default") as server:
        tokens = prepare(server)
        login = f"{server.url}/authentication/local"
        cases = [
            ("POST /authentication/local (right password)", {"email": "bench@example.com", "password": PASSWORD}),
            (
                "POST /authentication/local (wrong password, 401)",
                {"email": "bench@example.com", "password": "nope-nope"},
            ),
            ("POST /authentication/local (unknown email, 401)", {"email": "nobody@example.com", "password": PASSWORD}),
        ]
        for name, body in cases:
            rows.append((name, closed_loop(login, body, CONNECTIONS, duration)))
        headers = {"Authorization": f"Bearer {tokens['accessToken']}"}
        rows.append(
            (
                "GET /authentication/user (user token)",
                wrk(f"{server.url}/authentication/user", connections=CONNECTIONS, duration=duration, headers=headers),
            )
        )
        rows.append(("GET /health", wrk(f"{server.url}/health", connections=CONNECTIONS, duration=duration)))
    with ceiling_server() as ceiling:
        rows.append(
            ("ceiling: bare Flask JSON route", wrk(f"{ceiling.url}/item", connections=CONNECTIONS, duration=duration))
        )
    return rows


def report(
    rows: list[tuple[str, dict[str, float]]], database: str, duration: int, command: str, verify_ms: float
) -> str:
    load = os.getloadavg()
    hashing_slots = os.cpu_count() or 1
    errors = "; ".join(f"{name}: {int(stats['socket_errors'])}" for name, stats in rows)
    return f"""# Authentication benchmark

Command: `{command}`

One Trellis server process (eventlet, {database}, module `authentication` with the `email` and `sms` modules it
requires, argon2id with the default profile: OWASP's m=19 MiB, t=2, p=1). Reads are driven by `wrk -t2 -c{CONNECTIONS} -d{duration}s`;
sign-ins by {CONNECTIONS} Python keep-alive clients in a closed loop for {duration} s (wrk's fixed 2 s timeout
would drop the slow tail of argon2-bound requests).
Machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}; wrk shares the machine with
the server (load average before writing: {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}).

{table(rows)}

Socket errors / timeouts per case (not in the latencies): {errors}.

- Sign-in is bound by argon2 (19 MiB and two passes per verify, by design); every login also
  inserts a session row and signs an access token. One verify took {verify_ms:.0f} ms (median of 5,
  measured in the bench process just before the run). The server runs at most {hashing_slots} at a time
  (one per core, in eventlet's OS thread pool so the hub keeps serving other requests), so sign-in
  tops out near {hashing_slots} / verify time and 16 clients queue behind that.
- Wrong passwords and unknown emails cost one argon2 verify each, like a right password, so their
  latencies match: timing does not tell which emails exist.
- `GET /authentication/user` verifies the JWT, then reads the user joined to the token's session by
  primary key (one indexed query, no ORM objects), as every user route does.
"""


def main(argv: list[str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--duration", type=int, default=10, help="seconds per case")
    parser.add_argument("--no-write", action="store_true", help=f"do not write {RESULTS.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    command = " ".join([".venv/bin/python -m bench.auth_bench", *(argv if argv is not None else sys.argv[1:])]).strip()
    verify_ms = argon2_verify_ms()
    rows = run(args.database, args.duration)
    text = report(rows, args.database, args.duration, command, verify_ms)
    print(text)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(text)
    return rows


if __name__ == "__main__":
    main()
