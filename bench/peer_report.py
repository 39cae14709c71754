"""The peer benchmark's report: a dated section for ``bench/results/peer.md`` with each operation's median
ratio and interval against its goal, both sides' CPU per request, the tails, and every round."""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from bench.common import interpreter, median_interval
from bench.peer_cases import CONNECTIONS

GOALS = {"get by id": 1.6, "list + exact count": 3.0, "list, no count": 1.5, "create": 1.2, "update": 1.2}
# A user under access beside Parse's user under ACLs: reads well ahead, writes at least level.
USER_GOALS = {"get by id": 1.2, "list + exact count": 1.2, "list, no count": 1.2, "create": 1.0, "update": 1.0}
BESIDE = {"list + exact count": "Parse with `count=1`", "list, no count": "Parse's plain list"}
USER_GOAL = 0.8  # a user under access control, against the admin's figure


def report(results: list[dict[str, Any]], command: str, args: argparse.Namespace, revision: str) -> str:
    """A dated section for ``bench/results/peer.md``: the medians, then every round."""
    caller = (
        "a user under access control (the access benchmark's users, teams and grants: it reads ~2% of the Items), "
        "Parse by its twin under ACLs (`_rperm`/`_wperm`, the teams as roles)"
        if args.as_user
        else "the admin"
    )
    if args.as_user:
        caller += (
            ", and beside it, in every round, the admin on a second Trellis without access control (user ÷ admin: "
            "req/s of the same round; its µs server + PG are the admin's)"
        )
    if args.without_event_log:
        caller += (
            "; and in every round the admin on a Trellis without the event log (`TRELLIS_EVENTS=false`, its own "
            "database and Redis) beside Parse"
        )
    paired = (
        (" user ÷ admin, median (per round) | admin µs server + PG | user goal |", "---:|---:|---:|")
        if args.as_user
        else ("", "")
    )
    if args.without_event_log:
        paired = (
            paired[0] + " without the log ÷ Parse, median (per round) | its µs server + PG |",
            paired[1] + "---:|---:|",
        )
    if args.triggers:
        caller += (
            "; with one trivial before- and after-trigger per write on both sides (Trellis: "
            "`bench/peer_triggers/triggers.py`, Parse: `triggers.js`), and in every round the admin on a Trellis "
            "without triggers (the Functions module loaded, no file)"
        )
        paired = (
            paired[0] + " with ÷ without triggers, median (per round) | without µs server + PG |",
            paired[1] + "---:|---:|",
        )
    if args.base:
        caller += f"; and in every round the admin on a Trellis of revision `{args.base}` (the base)"
        paired = (paired[0] + " this ÷ base, median (per round) | base µs server + PG |", paired[1] + "---:|---:|")
    lines = [
        f"## Run of {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} (revision `{revision}`)",
        "",
        f"Command: `{command}`. {args.documents:,} Items on each side, one process each, same PostgreSQL, "
        f"`wrk -t1 -c{CONNECTIONS}`, {args.warmup} s warm-up + {args.duration} s measured per run, "
        f"{args.rounds} interleaved rounds; Trellis on {interpreter()}, called by {caller}; Item's indexes: "
        f"{'every field (Trellis default)' if args.index_all else 'price only, as Parse'}. Load average before the run: "
        f"{args.load_before}, after: {load_average()}. µs/request: CPU of the server process and of the PostgreSQL "
        "backends serving it (`/proc/<pid>/stat`), divided by the requests answered. [a, b] beside a median: "
        f"the rounds that bracket it with {median_interval([0.0] * args.rounds)[2]:.0%} confidence (sign test).",
        "",
        "| operation | Trellis ÷ Parse, median | per round | Trellis req/s | Parse req/s "
        "| Trellis µs server + PG | Parse µs server + PG | foreign CPU % | goal |" + paired[0],
        "|---|---:|---|---:|---:|---:|---:|---:|---:|" + paired[1],
    ]
    names = list(dict.fromkeys(r["operation"] for r in results if r["operation"] != "floor"))

    def med(rows: list[dict[str, Any]], side: str, key: str) -> float:
        return statistics.median(r[side][key] for r in rows)

    for name in names:
        rows = [r for r in results if r["operation"] == name]
        ratios = [r["trellis"]["rps"] / r["parse"]["rps"] for r in rows]
        foreign = [r[s]["foreign_pct"] for r in rows for s in ("trellis", "parse")]
        goal = (USER_GOALS if args.as_user else GOALS).get(name)
        label = f"{name} (beside {BESIDE[name]})" if name in BESIDE else name
        lines.append(
            f"| {label} | **{statistics.median(ratios):.2f}** {_interval(ratios)} | {', '.join(f'{x:.2f}' for x in ratios)} "
            f"| {med(rows, 'trellis', 'rps'):,.0f} | {med(rows, 'parse', 'rps'):,.0f} "
            f"| {med(rows, 'trellis', 'server_cpu_us'):,.0f} + {med(rows, 'trellis', 'pg_cpu_us'):,.0f} "
            f"| {med(rows, 'parse', 'server_cpu_us'):,.0f} + {med(rows, 'parse', 'pg_cpu_us'):,.0f} "
            f"| {min(foreign):.0f}–{max(foreign):.0f} | {f'≥ {goal}' if goal else '—'} |"
            + (_user_columns(rows) if args.as_user else "")
            + (_unlogged_columns(rows) if args.without_event_log else "")
            + (_paired_columns(rows, "trellis", "plain", "plain") if args.triggers else "")
            + (_base_columns(rows) if args.base else "")
        )
    floors = [r for r in results if r["operation"] == "floor"]
    per_round = ", ".join(f"{r['floor']['rps']:,.0f}" for r in floors)
    lines.append(
        f"| bare Flask route (the floor) | | {per_round} req/s "
        f"| {med(floors, 'floor', 'rps'):,.0f} | | {med(floors, 'floor', 'server_cpu_us'):,.0f} | "
        f"| {min(r['floor']['foreign_pct'] for r in floors):.0f}–{max(r['floor']['foreign_pct'] for r in floors):.0f} "
        "| |"
        + (" | | |" if args.as_user else "")
        + (" | |" if args.without_event_log else "")
        + (" | |" if args.triggers else "")
        + (" | |" if args.base else "")
    )
    lines += ["", *_tails(results, names)]
    lines += [
        "",
        "Every round (req/s; µs/request server + PostgreSQL; p50 ms):",
        "",
        "| round | operation | Trellis req/s | Parse req/s | ratio | Trellis µs | Parse µs | Trellis p50 | Parse p50 "
        "| foreign % |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        if r["operation"] == "floor":
            f = r["floor"]
            lines.append(
                f"| {r['round']} | floor | {f['rps']:,.0f} | | | {f['server_cpu_us']:,.0f} | | {f['p50_ms']} | "
                f"| {f['foreign_pct']:.0f} |"
            )
            continue
        t, p = r["trellis"], r["parse"]
        lines.append(
            f"| {r['round']} | {r['operation']} | {t['rps']:,.0f} | {p['rps']:,.0f} | {t['rps'] / p['rps']:.2f} "
            f"| {t['server_cpu_us']:,.0f} + {t['pg_cpu_us']:,.0f} | {p['server_cpu_us']:,.0f} + {p['pg_cpu_us']:,.0f} "
            f"| {t['p50_ms']} | {p['p50_ms']} | {t['foreign_pct']:.0f} / {p['foreign_pct']:.0f} |"
        )
        if "admin" in r:  # the admin's run of the round, and the user ÷ admin ratio in the ratio column
            a = r["admin"]
            lines.append(
                f"| {r['round']} | {r['operation']}, admin | {a['rps']:,.0f} | | {t['rps'] / a['rps']:.2f} "
                f"| {a['server_cpu_us']:,.0f} + {a['pg_cpu_us']:,.0f} | | {a['p50_ms']} | | {a['foreign_pct']:.0f} |"
            )
        if "plain" in r:  # the run without triggers, and with ÷ without in the ratio column
            w = r["plain"]
            lines.append(
                f"| {r['round']} | {r['operation']}, without triggers | {w['rps']:,.0f} | | {t['rps'] / w['rps']:.2f} "
                f"| {w['server_cpu_us']:,.0f} + {w['pg_cpu_us']:,.0f} | | {w['p50_ms']} | | {w['foreign_pct']:.0f} |"
            )
        if "unlogged" in r:  # the run without the event log, and its ratio to Parse in the ratio column
            u = r["unlogged"]
            lines.append(
                f"| {r['round']} | {r['operation']}, without the log | {u['rps']:,.0f} | | {u['rps'] / p['rps']:.2f} "
                f"| {u['server_cpu_us']:,.0f} + {u['pg_cpu_us']:,.0f} | | {u['p50_ms']} | | {u['foreign_pct']:.0f} |"
            )
    errors = [
        (r["operation"], side, int(r[side]["non_2xx"]))
        for r in results
        for side in ("trellis", "parse", "admin", "unlogged", "plain")
        if side in r and r[side]["non_2xx"]
    ]
    if errors:
        lines += ["", "Non-2xx answers: " + "; ".join(f"{op} ({side}): {n}" for op, side, n in errors)]
    return "\n".join(lines) + "\n"


def _tails(results: list[dict[str, Any]], names: list[str]) -> list[str]:
    """The tails: each side's p99 (wrk's, ms) per operation, median and per round, and in how many rounds
    Trellis's was no longer than Parse's (the goal: all of them)."""
    lines = [
        "Tails under the same load (wrk's p99, ms; per round Trellis / Parse):",
        "",
        "| operation | Trellis p99, median | Parse p99, median | per round | Trellis ≤ Parse in |",
        "|---|---:|---:|---|---:|",
    ]
    for name in names:
        rows = [r for r in results if r["operation"] == name]
        pairs = [(r["trellis"]["p99_ms"], r["parse"]["p99_ms"]) for r in rows]
        within = sum(ours <= theirs for ours, theirs in pairs)
        lines.append(
            f"| {name} | {statistics.median(t for t, _ in pairs):.1f} | {statistics.median(p for _, p in pairs):.1f} "
            f"| {', '.join(f'{t:.1f} / {p:.1f}' for t, p in pairs)} | {within} of {len(pairs)} |"
        )
    return lines


def _paired_columns(rows: list[dict[str, Any]], side: str, beside: str, described: str) -> str:
    """Columns of an operation's summary row: ``side`` ÷ ``beside`` (req/s, median and per round) and the
    µs server + PG of ``described``."""
    ratios = [r[side]["rps"] / r[beside]["rps"] for r in rows]
    server = statistics.median(r[described]["server_cpu_us"] for r in rows)
    pg = statistics.median(r[described]["pg_cpu_us"] for r in rows)
    per_round = ", ".join(f"{x:.2f}" for x in ratios)
    return f" **{statistics.median(ratios):.2f}** {_interval(ratios)} ({per_round}) | {server:,.0f} + {pg:,.0f} |"


def _interval(ratios: list[float]) -> str:
    low, high, _ = median_interval(ratios)
    return f"[{low:.2f}, {high:.2f}]"


def _user_columns(rows: list[dict[str, Any]]) -> str:
    """The user ÷ admin columns (``--as-user``); the µs are the admin's."""
    return _paired_columns(rows, "trellis", "admin", "admin") + f" ≥ {USER_GOAL} |"


def _unlogged_columns(rows: list[dict[str, Any]]) -> str:
    """Trellis without the event log ÷ Parse (``--without-event-log``), with its own µs."""
    return _paired_columns(rows, "unlogged", "parse", "unlogged")


def _base_columns(rows: list[dict[str, Any]]) -> str:
    """This tree ÷ the base revision's Trellis (``--base``), with the base's own µs."""
    return _paired_columns(rows, "trellis", "base", "base")


def load_average() -> str:
    """The machine's load averages (1, 5, 15 minutes), as the report's header gives them."""
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())
