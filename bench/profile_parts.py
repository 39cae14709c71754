"""Where a request's CPU goes, by part, from py-spy's collapsed stacks (``py-spy record -f raw``).

    .venv/bin/python -m bench.profile_parts /tmp/profiles/create-1.txt [more files …]

``bench.request_cpu --profile FOLDER`` writes one file per measured run (see ``part_of`` for how a
sample is given to a part). Parts: SQL (the driver and its green wait, SQLAlchemy, the pools), JSON encoding, request parsing
(request line, headers, body), validation (the body against the schema, smorest's arguments), access
(the Authorization module and the Database module's side of it), the event log (recording, the
sequencer's pass and publication), Redis, hooks (before/after request: auth, metrics, CORS, rate limits),
Flask/Werkzeug/flask-smorest, the server (eventlet, greenlets, sockets), and the rest.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

# (part, pattern over one frame "function (path:line)"). A sample belongs to the first SPECIFIC part any
# of its frames matches (a psycopg2 call waiting in eventlet's hub is SQL; a JSON decode in a hook is
# parsing), else to the GENERIC part of its innermost frame that matches one (Flask's own code, the
# server's): every sample counts once and the shares add up to 100%.
SPECIFIC: list[tuple[str, re.Pattern[str]]] = [
    (part, re.compile(pattern))
    for part, pattern in [
        ("SQL", r"psycopg2|\(sqlalchemy/|\(trellis/statements\.py|\(trellis/reads\.py"),
        (
            "JSON encoding",
            r"\(json/encoder\.py|^json_response |^_json_text |^serialise |^_event_payloads |^document_json ",
        ),
        (
            "request parsing",
            r"\(json/decoder\.py|^FastHttpProtocol\.(_?parse_request|_read_headers|_read_request_line) |^[\w.]*get_json |jsonbody\.py",
        ),
        (
            "validation",
            r"^validate |\(trellis_database/fields\.py|\(marshmallow/|^Parser\.[a-z_]+ \(webargs/|^check_relations ",
        ),
        ("access", r"document_access\.py|\(trellis_authorization/|\(trellis/access\.py"),
        ("event log", r"\(trellis/events/"),
        ("Redis (cache tokens, rate limits, counts)", r"\(redis/"),
        (
            "hooks (auth, metrics, CORS, rate limits)",
            r"^Flask\.preprocess_request |^Flask\.process_response |^Flask\.do_teardown|credentials\.py|ratelimit\.py|cors\.py",
        ),
    ]
]
GENERIC: list[tuple[str, re.Pattern[str]]] = [
    (part, re.compile(pattern))
    for part, pattern in [
        ("hooks (auth, metrics, CORS, rate limits)", r"\(trellis/metrics\.py"),
        ("Flask / Werkzeug / flask-smorest", r"\(flask/|\(werkzeug/|\(flask_smorest/|\(trellis_database/routes\.py"),
        ("server (eventlet, greenlets, sockets)", r"\(eventlet/|greenlet|\(socket\.py|\(trellis/server/|\(engineio/"),
    ]
]


def part_of(frames: list[str]) -> str:
    for part, pattern in SPECIFIC:
        if any(pattern.search(frame) for frame in frames):
            return part
    for frame in reversed(frames):  # innermost first
        for part, pattern in GENERIC:
            if pattern.search(frame):
                return part
    return "other"


def breakdown(paths: list[Path]) -> tuple[Counter[str], int]:
    parts: Counter[str] = Counter()
    total = 0
    for path in paths:
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            frames = [f for f in stack.split(";") if not f.startswith(("process ", "thread "))]
            parts[part_of(frames)] += int(count)
            total += int(count)
    return parts, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profiles", nargs="+", type=Path)
    args = parser.parse_args()
    parts, total = breakdown(args.profiles)
    print(f"| part | share of samples ({total:,}) |\n|---|---:|")
    for part, count in parts.most_common():
        print(f"| {part} | {100 * count / max(total, 1):.1f}% |")


if __name__ == "__main__":
    main()
