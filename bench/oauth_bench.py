"""Provider sign-in: a native ID-token sign-in beside a password sign-in, in interleaved rounds.

    .venv/bin/python -m bench.oauth_bench                          # PostgreSQL, 5 rounds of 2 × 5 s
    .venv/bin/python -m bench.oauth_bench --database sqlite --rounds 3 --no-write

One Trellis server process (eventlet, modules authentication, email, sms; the default argon2 profile) and a
fake OpenID Connect provider in this process (the tests' ``FakeOidc``: discovery, JWKS, an RSA-2048 key).
Each round runs, back to back and for the same time, 16 closed-loop clients on

- `POST /authentication/acme {id_token}`: RS256 verify against the cached JWKS, the claim checks, one
  identity lookup, a new session and its tokens;
- `POST /authentication/local`: one argon2id verify (m=19 MiB, t=2, p=1), a new session and its tokens.

The machine is shared, so the figure that matters is the ratio within each round (both cases see the same
load); the report gives each round, the median ratio, and the CPU other processes used during the run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import requests

from bench.auth_bench import PASSWORD, closed_loop
from bench.common import ROOT, bench_server

RESULTS = ROOT / "bench" / "results" / "oauth.md"
CONNECTIONS = 16


def _machine_busy_seconds() -> float:
    """CPU seconds all processes spent busy since boot (/proc/stat, every core)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _process_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def run(database: str, rounds: int, duration: int) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "plugins" / "authentication" / "tests"))
    from fake_providers import CLIENT_ID, CLIENT_SECRET, Account, FakeOidc  # the tests' fake provider

    fake = FakeOidc()
    try:
        with bench_server(database, modules="authentication,email,sms", TRELLIS_PASSWORD_PROFILE="default") as server:
            config = {
                "rateLimits": {"loginPerIp": "1000000/minute", "loginPerEmail": "1000000/minute"},
                "oauth": {
                    "oidc": [
                        {"name": "acme", "issuer": fake.issuer, "clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET}
                    ]
                },
            }
            requests.put(
                f"{server.url}/config/authentication", json=config, headers=server.admin_headers, timeout=30
            ).raise_for_status()
            body = {"email": "bench@example.com", "password": PASSWORD}
            requests.post(
                f"{server.url}/authentication/users", json=body, headers=server.admin_headers, timeout=30
            ).raise_for_status()
            id_token = fake.id_token(
                Account(subject="bench-1", email="bench-oidc@example.com"), exp=int(time.time()) + 3600
            )
            native = {"id_token": id_token}
            first = requests.post(f"{server.url}/authentication/acme", json=native, timeout=30)
            first.raise_for_status()  # creates the user and fills the JWKS cache
            results: list[dict[str, Any]] = []
            busy_before, server_before, own_before = (
                _machine_busy_seconds(),
                _process_seconds(server.process.pid),
                sum(os.times()[:4]),
            )
            started = time.monotonic()
            for _ in range(rounds):
                provider = closed_loop(f"{server.url}/authentication/acme", native, CONNECTIONS, duration)
                password = closed_loop(f"{server.url}/authentication/local", body, CONNECTIONS, duration)
                results.append({"provider": provider, "password": password})
            wall = time.monotonic() - started
            busy = _machine_busy_seconds() - busy_before
            server_cpu = _process_seconds(server.process.pid) - server_before
            own_cpu = sum(os.times()[:4]) - own_before
            jwks_fetches = len(fake.calls("/jwks"))
    finally:
        fake.stop()
    return {
        "rounds": results,
        "wall": wall,
        "cores": os.cpu_count() or 1,
        "busy": busy,
        "server_cpu": server_cpu,
        "own_cpu": own_cpu,
        "foreign_cpu": max(0.0, busy - server_cpu - own_cpu),
        "jwks_fetches": jwks_fetches,
    }


def report(data: dict[str, Any], database: str, rounds: int, duration: int, command: str) -> str:
    lines = [
        "| round | ID-token sign-in req/s | p50 ms | password sign-in req/s | p50 ms | ratio |",
        "|---|---|---|---|---|---|",
    ]
    ratios = []
    for number, result in enumerate(data["rounds"], 1):
        provider, password = result["provider"], result["password"]
        ratio = provider["rps"] / password["rps"] if password["rps"] else float("inf")
        ratios.append(ratio)
        lines.append(
            f"| {number} | {provider['rps']} | {provider['p50_ms']} | {password['rps']} | "
            f"{password['p50_ms']} | {ratio:.1f} × |"
        )
    failures = sum(
        r[case]["non_2xx"] + r[case]["socket_errors"] for r in data["rounds"] for case in ("provider", "password")
    )
    capacity = data["wall"] * data["cores"]
    return f"""# Provider sign-in benchmark

Command: `{command}`

One Trellis server process (eventlet, {database}, modules authentication + email + sms, argon2id default
profile), a fake OpenID Connect provider (RSA-2048 keys) in the bench process, {CONNECTIONS} closed-loop
clients, {rounds} rounds of {duration} s per case, the two cases alternating so each round's ratio compares
them under the same machine load.

{chr(10).join(lines)}

Median ratio (ID-token sign-in / password sign-in): **{statistics.median(ratios):.1f} ×**. Non-2xx answers
and socket errors: {int(failures)}. The JWKS was fetched {data["jwks_fetches"]} time(s) in the whole run (cached).

CPU during the run ({data["wall"]:.0f} s on {data["cores"]} cores = {capacity:.0f} core-seconds): server
{data["server_cpu"]:.0f} s, bench clients and fake provider {data["own_cpu"]:.0f} s, **other processes
{data["foreign_cpu"]:.0f} s** (other engineers' test runs on the shared machine): absolute figures are low
and noisy; the ratio is the result.

- A provider sign-in costs an RS256 signature check (microseconds with the cached JWKS), the claim checks
  and an indexed identity lookup; a password sign-in is bound by one argon2id verify (tens of ms by design),
  so provider sign-in is several times cheaper per request. Both insert a session and sign an access token.
"""


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=int, default=5, help="seconds per case and round")
    parser.add_argument("--no-write", action="store_true", help=f"do not write {RESULTS.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    command = " ".join([".venv/bin/python -m bench.oauth_bench", *(argv if argv is not None else sys.argv[1:])]).strip()
    data = run(args.database, args.rounds, args.duration)
    text = report(data, args.database, args.rounds, args.duration, command)
    print(text)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(text)
    return data


if __name__ == "__main__":
    main()
