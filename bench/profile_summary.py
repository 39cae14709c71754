"""Where a worker's CPU went, from py-spy's collapsed stacks (``py-spy record --format raw``).

    .venv/bin/python -m bench.profile_summary profile.txt --seconds 30 --deliveries 150000

Each sample is put in the first part below whose marker is in its stack (the markers go from the
innermost work outwards), so the parts add up to the samples taken; ``--deliveries`` (the worker's
share) turns CPU into microseconds per delivery. Idle samples are not recorded (py-spy's default).
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

RATE = 200  # samples a second (bench.live_bench.start_profile)
# (part, markers): a sample belongs to the first part one of whose markers is in its stack
PARTS: list[tuple[str, tuple[str, ...]]] = [
    # the writes themselves, not the hub's judging that the end of a delivery runs under gathered_writes
    ("live: socket writes (frames, send)", ("_write_texts (", "write_now (", "_finish (", "FanOutManager.emit (")),
    ("live: JSON encoding of changes", ("live_sockets.py", "live_http.py")),
    ("live: hub (filters, access, change dicts)", ("live.py", "live_access.py")),
    ("event log: receiver (Redis message, decode, order)", ("heard (", "offer (", "catch_up (", "RedisListener")),
    ("event log: sequencer pass (numbering, publish)", ("_pass (", "tick (", "sequence (", "publish (")),
    ("HTTP requests (the writes)", ("wsgi_app", "full_dispatch_request", "handle_one_request")),
    ("Socket.IO / Engine.IO (reads, pings, queue)", ("engineio", "socketio")),
]


def breakdown(path: Path) -> tuple[Counter[str], int]:
    counts: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        samples = int(count)
        total += samples
        part = next((name for name, markers in PARTS if any(marker in stack for marker in markers)), "other")
        counts[part] += samples
    return counts, total


def table(path: Path, seconds: float, deliveries: int | None) -> str:
    counts, total = breakdown(path)
    cpu = total / RATE
    head = f"{total} samples over {seconds:.0f} s: {cpu:.1f} s of CPU ({cpu / seconds:.0%} of a core)"
    rows = ["| part | share | CPU s | µs per delivery |", "|---|---|---|---|"]
    for name, _ in [*PARTS, ("other", ())]:
        share = counts[name] / total if total else 0.0
        per = f"{share * cpu / deliveries * 1e6:.1f}" if deliveries else "-"
        rows.append(f"| {name} | {share:.0%} | {share * cpu:.1f} | {per} |")
    if deliveries:
        rows.append(f"| all | 100% | {cpu:.1f} | {cpu / deliveries * 1e6:.1f} |")
    return head + "\n\n" + "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--seconds", type=float, required=True, help="how long py-spy sampled")
    parser.add_argument("--deliveries", type=int, help="deliveries the profiled worker made meanwhile")
    args = parser.parse_args()
    print(table(args.profile, args.seconds, args.deliveries))


if __name__ == "__main__":
    main()
