"""Parse Server 9.10 beside Trellis (``bench.peer_bench``): started from its peer folder, seeded, its side of
each operation, and its user under ACLs given the same access as Trellis's user under access control."""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import psycopg2
import requests

from bench.peer_cases import NEW_ITEM, operations

PARSE_DIR = Path(os.environ.get("TRELLIS_PEER_PARSE", "/work/shared/peers/parse"))
PARSE_URL = "http://127.0.0.1:1337/parse"
PARSE_DSN = "postgresql://bench:bench@127.0.0.1:5432/bench"
PARSE_HEADERS = {"X-Parse-Application-Id": "bench", "X-Parse-Master-Key": "bench-master"}
PARSE_APP = {"X-Parse-Application-Id": "bench", "X-Parse-REST-API-Key": "bench-rest"}


@contextlib.contextmanager
def parse_server(documents: int, cloud: Path | None = None) -> Iterator[list[str]]:
    """Parse started (with the Cloud Code file ``cloud``), seeded with ``documents`` Items; yields existing
    object ids. Stopped afterwards."""
    if not (PARSE_DIR / "node_modules").is_dir():
        raise SystemExit(f"Parse is not installed: cd {PARSE_DIR} && npm ci --no-audit --no-fund")
    _bench_role()
    env = {**os.environ, **({"PARSE_CLOUD": str(cloud)} if cloud else {})}
    subprocess.run([str(PARSE_DIR / "start.sh")], check=True, capture_output=True, env=env)
    try:
        seeded = subprocess.run([str(PARSE_DIR / "seed.sh"), str(documents)], capture_output=True, text=True)
        if seeded.returncode:
            raise SystemExit(f"Parse's seed.sh failed: {seeded.stderr.strip()[-500:]}")
        ids = (PARSE_DIR.parent / "data" / "parse_ids.txt").read_text().split()
        yield ids
    finally:
        subprocess.run([str(PARSE_DIR / "stop.sh")], capture_output=True)


def _bench_role() -> None:
    """The role and database Parse's README asks for, made once per machine. ``seed.sh`` ends with a
    CHECKPOINT, which PostgreSQL 15 allows only to superusers and members of ``pg_checkpoint``."""
    admin = psycopg2.connect("postgresql://postgres@127.0.0.1:5432/postgres")
    admin.autocommit = True  # CREATE DATABASE runs outside a transaction: no ``with admin`` (psycopg2 ≥ 2.9 opens one)
    with admin.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = 'bench'")
        if cursor.fetchone() is None:
            cursor.execute("CREATE ROLE bench LOGIN PASSWORD 'bench'")
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = 'bench'")
        if cursor.fetchone() is None:
            cursor.execute("CREATE DATABASE bench OWNER bench")
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = 'pg_checkpoint'")
        if cursor.fetchone() is not None:
            cursor.execute("GRANT pg_checkpoint TO bench")
    admin.close()


def parse_pid() -> int:
    return int((PARSE_DIR.parent / "run" / "parse.pid").read_text())


class ParseUser(NamedTuple):
    """Parse's measured user: its object id, its request headers (session token), what it may read and
    edit (Parse's ids of the same Items as Trellis's user)."""

    id: str
    headers: dict[str, str]
    readable: list[str]
    editable: list[str]


def parse_cases(ids: list[str], rnd: random.Random, user: ParseUser | None = None) -> dict[str, dict[str, Any]]:
    """Parse's side of each operation: its list with ``count=1`` beside ours with the exact count, its
    plain list beside ours with ``count=none``. With ``user``, called with its session token: its readable
    Items are read, its editable ones updated, and what it creates is its own (an ACL naming it)."""

    def listed(x: int, counted: bool) -> str:
        where = urllib.parse.quote(json.dumps({"price": {"$lt": x}}, separators=(",", ":")))
        return f"/parse/classes/Item?where={where}&order=-price&limit=20" + ("&count=1" if counted else "")

    if user is None:
        return operations(ids, rnd, {"headers": PARSE_HEADERS}, "/parse/classes/Item", listed, "PUT")
    mine = {**NEW_ITEM, "ACL": {user.id: {"read": True, "write": True}}}
    headers = {"headers": user.headers}
    return operations(user.readable, rnd, headers, "/parse/classes/Item", listed, "PUT", user.editable, mine)


def _forget_parse_users() -> None:
    """Parse's users, sessions and roles of an earlier run emptied (its ``seed.sh`` renews the Items only)."""
    tables = ["_User", "_Session", "_Role", "_Join:users:_Role", "_Join:roles:_Role"]
    with contextlib.closing(psycopg2.connect(PARSE_DSN)) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT t FROM unnest(%s::text[]) AS t WHERE to_regclass(quote_ident(t)) IS NOT NULL", (tables,))
        present = [row[0] for row in cursor.fetchall()]
        if present:
            cursor.execute("TRUNCATE " + ", ".join(f'"{table}"' for table in present))
        connection.commit()


def parse_under_access(
    plan: dict[str, Any], measured: str, trellis_ids: list[str], readable: list[str], editable: list[str]
) -> ParseUser:
    """Parse given the same access: the measured user signs up, each team is a role (``team_<id>``) whose
    users are its members and whose ``roles`` relation holds its sub-teams (so their members inherit it,
    as in Trellis), and every Item gets ``_rperm``/``_wperm`` from its tuples (owner and editor: read and
    write; reader: read). Users, roles and relations are written by bulk SQL into the tables Parse made.
    ``readable`` and ``editable`` (Trellis's ids) come back as Parse's ids of the same Items."""
    _forget_parse_users()
    body = {"username": "measured", "password": "peer-bench-password-1"}
    signed = requests.post(f"{PARSE_URL}/users", json=body, headers=PARSE_APP, timeout=30)
    signed.raise_for_status()
    uid, session = signed.json()["objectId"], signed.json()["sessionToken"]
    role = {"name": "bench_tables", "ACL": {"*": {"read": True}}}  # makes _Role and its two join tables
    requests.post(f"{PARSE_URL}/roles", json=role, headers=PARSE_HEADERS, timeout=30).raise_for_status()

    def subject(tuple_subject: str) -> str:
        kind, name = tuple_subject.split(":", 1)
        if kind == "Team":
            return f"role:team_{name}"
        return uid if name == measured else name

    with contextlib.closing(psycopg2.connect(PARSE_DSN)) as connection, connection.cursor() as cursor:
        cursor.execute('SELECT "objectId" FROM "Item" ORDER BY "createdAt" DESC, "objectId"')
        same = dict(zip(trellis_ids, [row[0] for row in cursor.fetchall()], strict=True))
        perms: dict[str, tuple[set[str], set[str]]] = {}
        for tuple_subject, relation, document in plan["relations"]:
            reads, writes = perms.setdefault(same[document], (set(), set()))
            reads.add(subject(tuple_subject))
            if relation != "reader":
                writes.add(subject(tuple_subject))
        others = [user for user in plan["users"] if user != measured]
        cursor.execute(
            'INSERT INTO "_User" ("objectId", "createdAt", "updatedAt", username) '
            "SELECT u, now(), now(), u FROM unnest(%s::text[]) AS u",
            (others,),
        )
        cursor.execute(
            'INSERT INTO "_Role" ("objectId", "createdAt", "updatedAt", name, "_rperm", "_wperm") '
            "SELECT t, now(), now(), 'team_' || t, '{*}', '{}' FROM unnest(%s::text[]) AS t",
            ([team for team, _ in plan["teams_tree"]],),
        )
        cursor.execute(
            'INSERT INTO "_Join:users:_Role" ("owningId", "relatedId") SELECT * FROM unnest(%s::text[], %s::text[])',
            ([team for team, _ in plan["members"]], [subject(f"User:{user}") for _, user in plan["members"]]),
        )
        parented = [(team, parent) for team, parent in plan["teams_tree"] if parent]
        cursor.execute(
            'INSERT INTO "_Join:roles:_Role" ("owningId", "relatedId") SELECT * FROM unnest(%s::text[], %s::text[])',
            ([parent for _, parent in parented], [team for team, _ in parented]),
        )
        cursor.execute(
            'UPDATE "Item" SET "_rperm" = ARRAY(SELECT jsonb_array_elements_text(p.value -> 0)), '
            '"_wperm" = ARRAY(SELECT jsonb_array_elements_text(p.value -> 1)) '
            'FROM jsonb_each(%s::jsonb) AS p WHERE "Item"."objectId" = p.key',
            (json.dumps({item: [sorted(r), sorted(w)] for item, (r, w) in perms.items()}),),
        )
        connection.commit()
    headers = {**PARSE_APP, "X-Parse-Session-Token": session}
    return ParseUser(uid, headers, [same[d] for d in readable], [same[d] for d in editable])
