"""Push Notifications: one notification fanned out to a topic with 10,000 subscribed devices (outbox).

    .venv/bin/python -m bench.push_bench                            # PostgreSQL and SQLite, 5 sends each
    .venv/bin/python -m bench.push_bench --database postgresql --repeat 3 --no-write

One Trellis server process (eventlet, `python -m trellis.testing.server`, modules authentication and
pushNotifications, outbox provider). 10,000 users, each with one device subscribed to the topic, are
inserted straight into the throwaway database in bulk (the routes are not what is measured here). Then
`POST /admin/pushNotifications/sendToTopic` is timed end to end from this client, `--repeat` times: each
request selects the 10,000 devices in one query, records the notification and its 10,000 deliveries
in bulk (one statement on PostgreSQL), and commits.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime

import requests
from sqlalchemy import create_engine, insert

from bench.common import ROOT, Server, bench_server

RESULTS = ROOT / "bench" / "results" / "push.md"
MODULES = "authentication,email,pushNotifications,sms"
TOPIC = "bench-topic"


def seed(server: Server, devices: int) -> None:
    """``devices`` users with one Android device each, all subscribed to TOPIC, in two bulk inserts."""
    from trellis_push_notifications.models import PushDevice, PushSubscription

    now = datetime.now(UTC)
    users = [f"bench-user-{n:05d}" for n in range(devices)]
    engine = create_engine(server.database_url)
    with engine.begin() as connection:
        connection.execute(
            insert(PushDevice.__table__),
            [
                {
                    "id": f"d{n:031d}",
                    "user_id": u,
                    "token": f"fcm-token-{n:05d}-" + "x" * 140,
                    "platform": "android",
                    "created_at": now,
                    "updated_at": now,
                }
                for n, u in enumerate(users)
            ],
        )
        connection.execute(
            insert(PushSubscription.__table__),
            [{"id": f"s{n:031d}", "topic": TOPIC, "user_id": u, "created_at": now} for n, u in enumerate(users)],
        )
    engine.dispose()


def fan_out(server: Server, expected: int) -> float:
    body = {"topic": TOPIC, "title": "Benchmark", "body": "One push to every subscriber", "data": {"kind": "bench"}}
    started = time.perf_counter()
    response = requests.post(
        f"{server.url}/admin/pushNotifications/sendToTopic", json=body, headers=server.admin_headers, timeout=600
    )
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    if response.json() != {"sent": expected, "failed": 0}:
        raise SystemExit(f"unexpected answer: {response.json()}")
    return elapsed


def run(database: str, devices: int, repeat: int) -> dict[str, float]:
    with bench_server(database, modules=MODULES) as server:
        started = time.perf_counter()
        seed(server, devices)
        seeded = time.perf_counter() - started
        times = [fan_out(server, devices) for _ in range(repeat)]
        outbox = requests.get(
            f"{server.url}/admin/pushNotifications/outbox",
            params={"limit": 1},
            headers=server.admin_headers,
            timeout=60,
        ).json()
        latest = outbox["notifications"][0]["_id"]
        delivered = requests.get(
            f"{server.url}/admin/pushNotifications/outbox/{latest}/deliveries",
            params={"limit": 1},
            headers=server.admin_headers,
            timeout=60,
        ).json()
        if outbox["count"] != repeat or delivered["count"] != devices:
            raise SystemExit(f"outbox holds {outbox['count']} sends / {delivered['count']} deliveries")
    return {
        "seed_s": round(seeded, 2),
        "first_s": round(times[0], 3),
        "min_s": round(min(times), 3),
        "median_s": round(statistics.median(times), 3),
        "max_s": round(max(times), 3),
        "per_device_us": round(statistics.median(times) / devices * 1e6, 1),
        "sends": len(times),
    }


def report(results: dict[str, dict[str, float]], devices: int, command: str) -> str:
    load = os.getloadavg()
    lines = [
        "| database | sends | first (s) | min (s) | median (s) | max (s) | median per device (µs) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for database, r in results.items():
        cells = [database, r["sends"], r["first_s"], r["min_s"], r["median_s"], r["max_s"], r["per_device_us"]]
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
    return f"""# Push Notifications benchmark

Command: `{command}`

Time to fan one push out to a topic with {devices:,} subscribed devices on the outbox provider:
`POST /admin/pushNotifications/sendToTopic`, timed end to end by the client, on one Trellis server process
(eventlet; modules authentication and pushNotifications). {devices:,} users with one device each, all
subscribed, were inserted in bulk beforehand. Each send selects the audience in one query, writes the
notification and its {devices:,} delivery rows (PostgreSQL: one `INSERT … SELECT FROM unnest(…)` with one
array per column; SQLite: one executemany), and commits; every send after the first adds to an outbox
that already holds the earlier sends' rows.

{chr(10).join(lines)}

Machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}; the client shares
the machine with the server and the database (load average before writing: {load[0]:.1f}, {load[1]:.1f},
{load[2]:.1f}; other work was running on the machine).
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database", choices=["postgresql", "sqlite", "both"], default="both")
    parser.add_argument("--devices", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-write", action="store_true", help="print the figures, do not update results/push.md")
    args = parser.parse_args()
    databases = ["postgresql", "sqlite"] if args.database == "both" else [args.database]
    results = {database: run(database, args.devices, args.repeat) for database in databases}
    command = ".venv/bin/python -m bench.push_bench " + " ".join(sys.argv[1:])
    text = report(results, args.devices, command.strip())
    print(text)
    if not args.no_write:
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()
