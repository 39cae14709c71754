"""Authentication: sign-in (argon2 verify + a new session) and token-verified reads, concurrency 16.

    .venv/bin/python -m bench.auth_bench                          # PostgreSQL, 10 s per case
    .venv/bin/python -m bench.auth_bench --database sqlite --duration 5 --no-write

One Trellis server process (eventlet, `python -m trellis.testing.server`, only the authentication
module, argon2-cffi's default RFC 9106 profile) driven by wrk. Cases:

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
from pathlib import Path
from typing import Any

import requests

from bench.common import ROOT, Server, bench_server, ceiling_server, table, wrk

RESULTS = ROOT / "bench" / "results" / "authentication.md"
CONNECTIONS = 16
PASSWORD = "bench-password-123"


def prepare(server: Server) -> dict[str, str]:
    limits = {"rateLimits": {"loginPerIp": "1000000/minute", "loginPerEmail": "1000000/minute"}}
    response = requests.put(f"{server.url}/config/authentication", json=limits, headers=server.admin_headers, timeout=30)
    response.raise_for_status()
    body = {"email": "bench@example.com", "password": PASSWORD}
    created = requests.post(f"{server.url}/authentication/users", json=body, headers=server.admin_headers, timeout=30)
    created.raise_for_status()
    tokens = requests.post(f"{server.url}/authentication/local", json=body, timeout=30)
    tokens.raise_for_status()
    return tokens.json()


def run(database: str, duration: int) -> list[tuple[str, dict[str, float]]]:
    rows: list[tuple[str, dict[str, float]]] = []
    with bench_server(database, modules="authentication", TRELLIS_PASSWORD_PROFILE="default") as server:
        tokens = prepare(server)
        login = f"{server.url}/authentication/local"
        cases = [
            ("POST /authentication/local (right password)", {"email": "bench@example.com", "password": PASSWORD}),
            ("POST /authentication/local (wrong password, 401)", {"email": "bench@example.com", "password": "nope-nope"}),
            ("POST /authentication/local (unknown email, 401)", {"email": "nobody@example.com", "password": PASSWORD}),
        ]
        for name, body in cases:
            rows.append((name, wrk(login, connections=CONNECTIONS, duration=duration, method="POST", body=body)))
        headers = {"Authorization": f"Bearer {tokens['accessToken']}"}
        rows.append(("GET /authentication/user (user token)",
                     wrk(f"{server.url}/authentication/user", connections=CONNECTIONS, duration=duration,
                         headers=headers)))
        rows.append(("GET /health", wrk(f"{server.url}/health", connections=CONNECTIONS, duration=duration)))
    with ceiling_server() as ceiling:
        rows.append(("ceiling: bare Flask JSON route", wrk(f"{ceiling.url}/item", connections=CONNECTIONS,
                                                           duration=duration)))
    return rows


def report(rows: list[tuple[str, dict[str, float]]], database: str, duration: int, command: str) -> str:
    load = os.getloadavg()
    errors = "; ".join(f"{name}: {int(stats['socket_errors'])}" for name, stats in rows)
    return f"""# Authentication benchmark

Command: `{command}`

One Trellis server process (eventlet, {database}, module `authentication` only, argon2id with
argon2-cffi's default parameters: t=3, m=64 MiB, p=4) driven by `wrk -t2 -c{CONNECTIONS} -d{duration}s`.
Machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}; wrk shares the machine with
the server (load average before writing: {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}).

{table(rows)}

wrk socket errors (its 2 s timeouts count here, not in the latencies): {errors}.

- Sign-in is bound by argon2 (about 64 MiB and three passes per verify, by design); every login also
  inserts a session row and signs an access token.
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
    rows = run(args.database, args.duration)
    text = report(rows, args.database, args.duration, command)
    print(text)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(text)
    return rows


if __name__ == "__main__":
    main()
