"""Backups: backup and restore of 100,000 documents in 10 schemas plus 1,000 files of 100 KB.

    .venv/bin/python -m bench.backup_bench                                  # PostgreSQL, 3 rounds, writes results
    .venv/bin/python -m bench.backup_bench --database sqlite --documents 20000 --files 200 --rounds 1 --no-write

One Trellis server process (eventlet, every installed module). The data goes in through the API:
documents by `POST /database/S<i>/many` (1,000 per request), files by `POST /storage/upload` as one user
(random bytes, so the archive cannot compress them).

Each round, in alternating order (even rounds start with the backup):
- **reads alone**: `wrk -t2 -c16` on `GET /database/S0/{id}` (ids drawn from 1,000 documents) for
  `--seconds`;
- **reads during a backup**: the same load while `POST /admin/backups` runs; its duration is from the 202
  to `status: done` seen by polling every 0.1 s. The window is as long as the first (warm-up) backup took,
  so the reads overlap the backup from start to end. The ratio of the two read rates is the backup's cost.
The server's RSS is sampled every 0.1 s from /proc during each backup and each restore (maximum shown,
beside the RSS before). Then a restore of the round's archive (`POST /admin/backups/{name}/restore`, until
`restore.status` is done), and the archive is deleted.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import requests

from bench.common import ROOT, Server, bench_server, wrk

RESULTS = ROOT / "bench" / "results" / "backups.md"
SCHEMAS = 10
FILE_SIZE = 100 * 1024
CONNECTIONS = 16


def fill(server: Server, documents: int, files: int) -> list[str]:
    """The documents and files; returns the ids of S0's first 1,000 documents (the read load's)."""
    admin = server.admin_headers
    ids: list[str] = []
    per_schema = documents // SCHEMAS
    for i in range(SCHEMAS):
        fields = {"title": "String", "n": "Number", "tags": ["String"], "done": "Boolean"}
        made = requests.post(
            f"{server.url}/admin/database/schemas", headers=admin, json={"name": f"S{i}", "fields": fields}
        )
        made.raise_for_status()
        for start in range(0, per_schema, 1000):
            docs = [
                {"title": f"document {n} of S{i}", "n": n, "tags": ["a", f"t{n % 50}"], "done": n % 2 == 0}
                for n in range(start, min(per_schema, start + 1000))
            ]
            answer = requests.post(f"{server.url}/database/S{i}/many", headers=admin, json={"docs": docs}, timeout=120)
            answer.raise_for_status()
            if i == 0 and len(ids) < 1000:
                ids.extend(d["_id"] for d in answer.json()["docs"][: 1000 - len(ids)])
    account = {"email": "bench@example.com", "password": "bench-password-1"}
    requests.post(f"{server.url}/authentication/local/new", json=account).raise_for_status()
    token = requests.post(f"{server.url}/authentication/local", json=account).json()["accessToken"]
    user = {"Authorization": f"Bearer {token}"}
    with requests.Session() as session:
        for n in range(files):
            sent = session.post(
                f"{server.url}/storage/upload", headers=user, files={"file": (f"f{n}.bin", os.urandom(FILE_SIZE))}
            )
            sent.raise_for_status()
    return ids


@contextmanager
def rss_sampler(server: Server) -> Iterator[Callable[[], float]]:
    """Samples the server's RSS every 0.1 s while the block runs; yields the function giving the maximum."""
    samples: list[float] = [server.rss_mb()]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.1):
            samples.append(server.rss_mb())

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield lambda: max(samples)
    finally:
        stop.set()
        thread.join()


def _listing(server: Server) -> dict[str, Any]:
    return requests.get(f"{server.url}/admin/backups", headers=server.admin_headers, timeout=60).json()


def backup(server: Server) -> dict[str, Any]:
    """One backup through the API: its duration, archive size and the server's RSS during it."""
    before = server.rss_mb()
    with rss_sampler(server) as peak:
        started = time.monotonic()
        answer = requests.post(f"{server.url}/admin/backups", headers=server.admin_headers, timeout=60)
        answer.raise_for_status()
        name = answer.json()["name"]
        while True:
            shown = next(b for b in _listing(server)["backups"] if b["name"] == name)
            if shown["status"] != "running":
                break
            time.sleep(0.1)
        seconds = time.monotonic() - started
    if shown["status"] != "done":
        raise SystemExit(f"backup {name} failed: {shown.get('error')}")
    return {"name": name, "seconds": seconds, "size": shown["size"], "rss_before": before, "rss_peak": peak()}


def restore(server: Server, name: str) -> dict[str, Any]:
    before = server.rss_mb()
    with rss_sampler(server) as peak:
        started = time.monotonic()
        url = f"{server.url}/admin/backups/{name}/restore"
        requests.post(url, headers=server.admin_headers, timeout=60).raise_for_status()
        while (state := _listing(server)["restore"])["status"] == "running":
            time.sleep(0.1)
        seconds = time.monotonic() - started
    if state["status"] != "done":
        raise SystemExit(f"restore of {name} failed: {state.get('error')}")
    return {"seconds": seconds, "rss_before": before, "rss_peak": peak()}


def reads(server: Server, ids: list[str], seconds: int) -> dict[str, float]:
    return wrk(
        server.url + "/database/S0/ID",
        connections=CONNECTIONS,
        duration=seconds,
        headers=server.admin_headers,
        paths=[f"/database/S0/{i}" for i in ids],
    )


def reads_during_backup(server: Server, ids: list[str], seconds: int) -> tuple[dict[str, float], dict[str, Any]]:
    made: dict[str, Any] = {}

    def run() -> None:
        time.sleep(0.5)  # wrk's connections are open and busy
        made.update(backup(server))

    thread = threading.Thread(target=run)
    thread.start()
    stats = reads(server, ids, seconds)
    thread.join()
    return stats, made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default="postgresql", choices=["postgresql", "sqlite"])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    with bench_server(database=args.database) as server:
        began = time.monotonic()
        ids = fill(server, args.documents, args.files)
        filled = time.monotonic() - began
        print(f"filled in {filled:.0f} s: {args.documents} documents, {args.files} files", flush=True)
        warm = backup(server)
        requests.delete(f"{server.url}/admin/backups/{warm['name']}", headers=server.admin_headers).raise_for_status()
        seconds = max(5, round(warm["seconds"] + 1))
        print(f"warm-up backup {warm['seconds']:.1f} s; read windows of {seconds} s", flush=True)
        rounds: list[dict[str, Any]] = []
        for number in range(args.rounds):
            if number % 2 == 0:
                during, made = reads_during_backup(server, ids, seconds)
                alone = reads(server, ids, seconds)
            else:
                alone = reads(server, ids, seconds)
                during, made = reads_during_backup(server, ids, seconds)
            restored = restore(server, made["name"])
            requests.delete(f"{server.url}/admin/backups/{made['name']}", headers=server.admin_headers)
            row = {"alone": alone, "during": during, "backup": made, "restore": restored}
            rounds.append(row)
            print(
                f"round {number + 1}: backup {made['seconds']:.1f} s, {made['size'] / 1e6:.1f} MB, RSS "
                f"{made['rss_before']:.0f}→{made['rss_peak']:.0f} MB; restore {restored['seconds']:.1f} s, RSS "
                f"{restored['rss_before']:.0f}→{restored['rss_peak']:.0f} MB; reads {alone['rps']:.0f} alone, "
                f"{during['rps']:.0f} during ({during['rps'] / alone['rps']:.2f}×)",
                flush=True,
            )
    report = render(args, rounds, filled, seconds)
    print(report)
    if not args.no_write:
        RESULTS.write_text(report)


def render(args: argparse.Namespace, rounds: list[dict[str, Any]], filled: float, seconds: int) -> str:
    def median(pick: Callable[[dict[str, Any]], float]) -> float:
        return statistics.median(pick(r) for r in rounds)

    lines = [
        "| round | backup s | archive MB | RSS during backup MB | restore s | RSS during restore MB |"
        " reads alone req/s | reads during backup req/s | ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for number, r in enumerate(rounds, start=1):
        b, s = r["backup"], r["restore"]
        lines.append(
            f"| {number} | {b['seconds']:.1f} | {b['size'] / 1e6:.1f} | {b['rss_before']:.0f} → {b['rss_peak']:.0f} |"
            f" {s['seconds']:.1f} | {s['rss_before']:.0f} → {s['rss_peak']:.0f} | {r['alone']['rps']:.0f} |"
            f" {r['during']['rps']:.0f} | {r['during']['rps'] / r['alone']['rps']:.2f}× |"
        )
    ratio = median(lambda r: r["during"]["rps"] / r["alone"]["rps"])
    return f"""# Backups

`{" ".join(["python -m bench.backup_bench", *[f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "no_write"]])}`
— {datetime.now().strftime("%Y-%m-%d %H:%M")}

{args.documents:,} documents in {SCHEMAS} schemas and {args.files:,} files of {FILE_SIZE // 1024} KB (random bytes), on
{args.database}, filled through the API in {filled:.0f} s. One server process (eventlet). Reads: `wrk -t2
-c{CONNECTIONS} -d{seconds}s` on `GET /database/S0/{{id}}` over 1,000 ids, alone and while a backup runs, in
alternating order. RSS: the server's, before → the maximum sampled every 0.1 s.

{chr(10).join(lines)}

Median: backup {median(lambda r: r["backup"]["seconds"]):.1f} s, restore {median(lambda r: r["restore"]["seconds"]):.1f} s,
archive {median(lambda r: r["backup"]["size"]) / 1e6:.1f} MB; reads during a backup at **{ratio:.2f}×** the rate
without (goal ≥ 0.7×).

Machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}; wrk and the
database on the same machine, shared with other engineers' work.
"""


if __name__ == "__main__":
    main()
