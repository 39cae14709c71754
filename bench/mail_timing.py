"""Known against unknown addresses on the wire: forgot-password on one keep-alive connection.

    .venv/bin/python -m bench.mail_timing                      # PostgreSQL, 100 rounds, SMTP delay 1 s
    .venv/bin/python -m bench.mail_timing --database sqlite --rounds 50

One Trellis server process (eventlet, PASSWORD_PROFILE=test) sends mail to an aiosmtpd server in this
process that takes ``--smtp-delay`` seconds to accept each message. Each round, on one HTTP/1.1
connection, asks forgot-password for a known address then a GET /health, and the same for an unknown
address; it reports the answer times of each (median, p90, max) and how many rounds a threshold halfway
to the SMTP delay classifies correctly (a probe's view: 50 % is chance, 100 % tells the addresses apart).
Prints a Markdown table; writes nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time

import requests
from aiosmtpd.controller import Controller

from bench.common import bench_server
from trellis.testing.plugin import free_port


class SlowHandler:
    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.accepted = 0

    async def handle_DATA(self, server, session, envelope) -> str:  # noqa: ANN001
        import asyncio

        await asyncio.sleep(self.delay)
        self.accepted += 1
        return "250 OK"


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[int(len(ordered) * 0.9) - 1]
    return f"{statistics.median(ordered) * 1000:.1f} | {p90 * 1000:.1f} | {ordered[-1] * 1000:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default="postgresql", choices=("postgresql", "sqlite"))
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--smtp-delay", type=float, default=1.0)
    args = parser.parse_args()

    handler = SlowHandler(args.smtp_delay)
    controller = Controller(handler, hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        with bench_server(args.database, TRELLIS_PASSWORD_PROFILE="test") as server:
            admin = server.admin_headers
            smtp = {"host": "127.0.0.1", "port": controller.port, "secure": "none", "timeout": 30}
            limits = {"sendPerIp": "1000000/minute", "sendPerAddress": "1000000/minute"}
            for module, changes in (
                ("email", {"provider": "smtp", "smtp": smtp}),
                ("authentication", {"local": {"verification": {"sendEmail": False}}, "rateLimits": limits}),
            ):
                requests.put(
                    f"{server.url}/config/{module}", json=changes, headers=admin, timeout=30
                ).raise_for_status()
            known = "known-timing@example.com"
            registered = requests.post(
                f"{server.url}/authentication/local/new", json={"email": known, "password": "long-enough-1"}, timeout=30
            )
            registered.raise_for_status()
            unknown = "unknown-timing@example.com"
            times: dict[str, dict[str, list[float]]] = {e: {"answer": [], "next": []} for e in (known, unknown)}
            with requests.Session() as connection:
                for _ in range(args.rounds):
                    for email in (known, unknown):
                        started = time.perf_counter()
                        asked = connection.post(
                            f"{server.url}/authentication/forgot-password", json={"email": email}, timeout=60
                        )
                        answered = time.perf_counter()
                        assert asked.status_code == 200, asked.text
                        assert connection.get(f"{server.url}/health", timeout=60).status_code == 200
                        times[email]["answer"].append(answered - started)
                        times[email]["next"].append(time.perf_counter() - answered)
    finally:
        controller.stop()

    threshold = args.smtp_delay / 2
    right = sum(t >= threshold for t in times[known]["next"]) + sum(t < threshold for t in times[unknown]["next"])
    print(f"{args.rounds} rounds, {args.database}, SMTP delay {args.smtp_delay:g} s\n")
    print("| request | median ms | p90 ms | max ms |\n|---|---:|---:|---:|")
    for email, label in ((known, "known"), (unknown, "unknown")):
        print(f"| forgot-password, {label} address | {summary(times[email]['answer'])} |")
        print(f"| the next request on the connection, {label} | {summary(times[email]['next'])} |")
    print(f"\nclassified by the next request's time (threshold {threshold:g} s): {right}/{2 * args.rounds}")


if __name__ == "__main__":
    main()
