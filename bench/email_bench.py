"""Email and Forms: sends through the outbox provider and public form submissions, concurrency 16.

    .venv/bin/python -m bench.email_bench                          # PostgreSQL, 10 s per case
    .venv/bin/python -m bench.email_bench --database sqlite --duration 5 --no-write

One Trellis server process (eventlet, `python -m trellis.testing.server`, modules email and forms)
driven by wrk. The outbox provider delivers nothing, so the figures are Trellis' own cost: validation,
rendering, and the send record (committed as pending, then as sent: two commits per send). Cases:

- `POST /email/send`, raw form, and template form (sandboxed Jinja render, autoescape);
- `POST /forms/submit/{id}` on a five-field form: validation (email-validator), one insert;
- the same form with `forwardTo`: the submission plus a forwarded e-mail through the outbox;
- a bare Flask route on the same stack (the ceiling) for scale.

The Forms rate limit is raised for the run (`PUT /config/forms`); otherwise it answers 429.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from typing import Any

import requests

from bench.common import ROOT, Server, bench_server, ceiling_server, table, wrk

RESULTS = ROOT / "bench" / "results" / "email.md"
CONNECTIONS = 16
FIELDS = [
    {"name": "name", "type": "text", "required": True},
    {"name": "email", "type": "email", "required": True},
    {"name": "message", "type": "textarea", "required": True},
    {"name": "age", "type": "number"},
    {"name": "newsletter", "type": "checkbox"},
]
SUBMISSION = {
    "name": "Ada Lovelace",
    "email": "ada@example.com",
    "message": "Hello\nthere",
    "age": 36,
    "newsletter": True,
}


def prepare(server: Server) -> tuple[str, str]:
    def ok(response: requests.Response) -> dict[str, Any]:
        response.raise_for_status()
        return response.json()

    headers = server.admin_headers
    ok(requests.put(f"{server.url}/config/forms", json={"rateLimit": "100000000/minute"}, headers=headers, timeout=30))
    template = {
        "name": "welcome",
        "subject": "Welcome {{ name }}",
        "body": "<p>Hi {{ name }}, your code is {{ code }}</p>",
    }
    ok(requests.post(f"{server.url}/admin/email/templates", json=template, headers=headers, timeout=30))
    plain = ok(
        requests.post(
            f"{server.url}/admin/forms", json={"name": "Contact", "fields": FIELDS}, headers=headers, timeout=30
        )
    )
    forwarding = ok(
        requests.post(
            f"{server.url}/admin/forms",
            json={"name": "Forwarded", "fields": FIELDS, "forwardTo": "owner@example.com"},
            headers=headers,
            timeout=30,
        )
    )
    return plain["_id"], forwarding["_id"]


def run(database: str, duration: int) -> list[tuple[str, dict[str, float]]]:
    rows: list[tuple[str, dict[str, float]]] = []
    with bench_server(database, modules="email,forms") as server:
        plain, forwarding = prepare(server)
        send = f"{server.url}/email/send"
        cases = [
            (
                "POST /email/send (raw, outbox)",
                send,
                {"to": "ada@example.com", "subject": "Hello", "body": "<p>Hello</p>"},
                server.admin_headers,
            ),
            (
                "POST /email/send (template, outbox)",
                send,
                {"to": "ada@example.com", "templateName": "welcome", "variables": {"name": "<Ada>", "code": "42"}},
                server.admin_headers,
            ),
            ("POST /forms/submit/{id} (5 fields, no forward)", f"{server.url}/forms/submit/{plain}", SUBMISSION, {}),
            (
                "POST /forms/submit/{id} (forwarded via outbox)",
                f"{server.url}/forms/submit/{forwarding}",
                SUBMISSION,
                {},
            ),
        ]
        for name, url, body, headers in cases:
            rows.append(
                (name, wrk(url, connections=CONNECTIONS, duration=duration, method="POST", body=body, headers=headers))
            )
    with ceiling_server() as ceiling:
        rows.append(
            ("ceiling: bare Flask JSON route", wrk(f"{ceiling.url}/item", connections=CONNECTIONS, duration=duration))
        )
    return rows


def report(rows: list[tuple[str, dict[str, float]]], database: str, duration: int, command: str) -> str:
    load = os.getloadavg()
    return f"""# Email and Forms benchmark

Command: `{command}`

One Trellis server process (eventlet, {database}, modules `email` and `forms`, Email provider `outbox`)
driven by `wrk -t2 -c{CONNECTIONS} -d{duration}s`.
Machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}; wrk shares the machine with
the server (load average before writing: {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}).

{table(rows)}

- A send commits its record twice (pending before the provider is called, then the outcome), so a
  failed delivery is never lost; with a real provider its round trip adds to these figures.
- A template send also reads the template and renders subject and body in Jinja's sandbox (compiled
  templates are cached by their text).
- A forwarded submission is a submission plus a send: three commits in one request.
- Every write commits (fsync) on PostgreSQL; on this shared, loaded machine the figures move by a factor
  of two or more between runs, so read them as orders of magnitude.
"""


def main(argv: list[str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--duration", type=int, default=10, help="seconds per case")
    parser.add_argument("--no-write", action="store_true", help=f"do not write {RESULTS.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    command = " ".join([".venv/bin/python -m bench.email_bench", *(argv if argv is not None else sys.argv[1:])]).strip()
    rows = run(args.database, args.duration)
    text = report(rows, args.database, args.duration, command)
    print(text)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(text)
    return rows


if __name__ == "__main__":
    main()
