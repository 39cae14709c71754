"""Single-document writes: a user under access control beside the admin, and the event log's price.

    .venv/bin/python -m bench.write_bench                        # 4 rounds, 2 s warm-up + 8 s per run
    .venv/bin/python -m bench.write_bench --rounds 3 --duration 6

Two Trellis processes (eventlet, one each, modules authentication, authorization, database), each on a
throwaway PostgreSQL database of its own with its own ``redis-server`` child (as in production):
``events on`` records the event log (the default), ``events off`` runs with ``TRELLIS_EVENTS=false``
(the only use of that switch: pricing the log). Each holds ``Item {title, price}`` (no access control)
with 2,000 documents and ``Doc {title, price}`` under access control with 2,000 documents owned by the
measured user.

Cases (``wrk -t1 -c16``, as ``peer_bench``):
- create: ``POST /database/Item`` by the admin (masterkey) on both processes: the log's price is
  1 − on ÷ off (creates/s);
- create under access: ``POST /database/Doc`` by the user (its Bearer token: the owner tuple is written
  with the document) and by an admin Bearer token (no tuple), on ``events on``;
- update under access: ``PATCH /database/Doc/<id> {price}`` by the user (read and edit predicates in the
  statement) and by the admin, on ``events on``.

Each round runs every case, alternating the order of each pair; ratios are taken within a round and
the median over rounds is reported, with the server's CPU per request (which other engineers' load
moves less than req/s) and the machine's load average.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import subprocess
from collections.abc import Iterator
from typing import Any

import requests

from bench.access_data import sign_in
from bench.common import Server, bench_server, insert_many, redis_child
from bench.cpu_window import process_cpu
from bench.peer_bench import wrk

MODULES = "authentication,authorization,database,email,sms"
ITEM = {"title": "String", "price": "Number"}
ACCESS = {"conduit": {"authorization": {"enabled": True}}}
NEW = {"title": "Bench item", "price": 12.5}


@contextlib.contextmanager
def server(events: bool) -> Iterator[Server]:
    with (
        redis_child() as redis_url,
        bench_server(
            "postgresql", modules=MODULES, TRELLIS_REDIS_URL=redis_url, TRELLIS_EVENTS="true" if events else "false"
        ) as made,
    ):
        yield made


def seed(made: Server, documents: int, rnd: random.Random) -> dict[str, Any]:
    """Both schemas and their documents; the user's documents are created by the user (owner tuples)."""
    admin = made.admin_headers
    for name, options in (("Item", None), ("Doc", ACCESS)):
        body: dict[str, Any] = {"name": name, "fields": ITEM}
        if options:
            body["modelOptions"] = options
        requests.post(f"{made.url}/admin/database/schemas", json=body, headers=admin, timeout=60).raise_for_status()
    rows = [{"title": f"Item {i}", "price": round(rnd.uniform(0, 1000), 2)} for i in range(documents)]
    insert_many(made, "Item", [rows[start : start + 1000] for start in range(0, documents, 1000)])
    _user_id, token, admin_token = sign_in(made)
    user = {"Authorization": f"Bearer {token}"}
    session = requests.Session()
    ids = []
    for row in rows:
        response = session.post(f"{made.url}/database/Doc", json=row, headers=user, timeout=30)
        response.raise_for_status()
        ids.append(response.json()["_id"])
    subprocess.run(
        ["psql", made.database_url.replace("postgresql+psycopg2://", "postgresql://"), "-qc", "VACUUM ANALYZE"],
        check=True,
        capture_output=True,
    )
    return {"user": user, "admin": {"Authorization": f"Bearer {admin_token}"}, "ids": ids}


def measure(made: Server, case: dict[str, Any], warmup: int, seconds: int) -> dict[str, float]:
    args = (made.url, case["paths"], seconds, case["method"], case["body"], case["headers"])
    if warmup:
        wrk(made.url, case["paths"], warmup, case["method"], case["body"], case["headers"])
    before = process_cpu(made.process.pid)
    stats = wrk(*args)
    done = max(stats["rps"] * seconds, 1)
    return {"rps": stats["rps"], "cpu_us": (process_cpu(made.process.pid) - before) / done * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--documents", type=int, default=2000)
    args = parser.parse_args()
    rnd = random.Random(36)
    with server(True) as on, server(False) as off:
        seeded = seed(on, args.documents, rnd)
        seed(off, args.documents, rnd)
        update_paths = [f"/database/Doc/{i}" for i in seeded["ids"]]

        def case(path: list[str], method: str, body: Any, headers: dict[str, str]) -> dict[str, Any]:
            return {"paths": path, "method": method, "body": body, "headers": headers}

        pairs = {
            "create: events on ÷ off (admin)": (
                (on, case(["/database/Item"], "POST", NEW, on.admin_headers)),
                (off, case(["/database/Item"], "POST", NEW, off.admin_headers)),
            ),
            "create under access: user ÷ admin": (
                (on, case(["/database/Doc"], "POST", NEW, seeded["user"])),
                (on, case(["/database/Doc"], "POST", NEW, seeded["admin"])),
            ),
            "update under access: user ÷ admin": (
                (on, case(update_paths, "PATCH", {"price": 99.5}, seeded["user"])),
                (on, case(update_paths, "PATCH", {"price": 99.5}, seeded["admin"])),
            ),
        }
        ratios: dict[str, list[float]] = {name: [] for name in pairs}
        for number in range(1, args.rounds + 1):
            for name, (first, second) in pairs.items():
                order = [first, second] if number % 2 else [second, first]
                results = {id(side): measure(side[0], side[1], args.warmup, args.duration) for side in order}
                a, b = results[id(first)], results[id(second)]
                ratios[name].append(a["rps"] / b["rps"])
                print(
                    f"round {number} {name:36} {a['rps']:6.0f} vs {b['rps']:6.0f} req/s = {a['rps'] / b['rps']:.2f}"
                    f"   server CPU {a['cpu_us']:5.0f} vs {b['cpu_us']:5.0f} µs/req   load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
        for name, values in ratios.items():
            print(f"{name:36} median {statistics.median(values):.2f} ({', '.join(f'{v:.2f}' for v in values)})")


if __name__ == "__main__":
    main()
