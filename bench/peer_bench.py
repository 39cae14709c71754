"""Trellis beside Parse Server 9.10 (its PostgreSQL adapter): four paired ratios, interleaved rounds.

    .venv/bin/python -m bench.peer_bench                      # 4 rounds, 3 s warm-up + 15 s per run
    .venv/bin/python -m bench.peer_bench --rounds 4 --warmup 2 --duration 8

Parse comes from ``/work/shared/peers/parse`` (``TRELLIS_PEER_PARSE`` changes it; its README says how to
set it up: ``npm ci`` there once, PostgreSQL role and database ``bench``). Both servers are one process
on the same PostgreSQL and are driven by the same ``wrk -t1 -c16``. Both hold the same 100,000 ``Item``
documents: Parse's ``seed.sh`` makes them, and the same rows (title, price, tags, owner) are loaded into
Trellis through ``POST /database/Item/many``, with the same indexes (price only; ``--index-all`` indexes
every field, Trellis's default). Trellis runs with its own throwaway ``redis-server`` (counts
are kept there, as in production) on a free port.

Operations (Trellis ÷ Parse, req/s):
- get by id: ``GET /database/Item/<id>`` vs ``GET /parse/classes/Item/<id>`` (5,000 random ids);
- list with its exact count: ``?price[$lt]=X&sort=-price&limit=20`` vs
  ``?where={"price":{"$lt":X}}&order=-price&limit=20&count=1`` (X random in 1..950 per request);
- the same list without a count (``count=none``; Parse without ``count=1``), when Trellis accepts it;
- create: ``POST`` a small Item; update: ``PATCH /database/Item/<id> {price}`` vs ``PUT`` on Parse;
- and get by id against a bare Flask JSON route served the same way (the ceiling).

Each round runs every operation on both servers, alternating which goes first; ratios are taken
within a round and the median over rounds is reported. ``--as-user`` calls Trellis as a user under access
control and Parse as a user under its ACLs, both given the access benchmark's data (10,000 users, 1,000
teams three levels deep, an owner per Item and 20,000 grants to users and teams: the measured user reads
~2% of the Items; on Parse the teams are roles, sub-teams in their parent's ``roles`` relation, and each
Item's ``_rperm``/``_wperm`` name the same users and roles), and runs an admin's Trellis (access off) in the
same rounds: user ÷ admin is then paired too. ``--without-event-log`` runs a third
Trellis (the admin's, ``TRELLIS_EVENTS=false``) in the same rounds: every write of ours records an event,
Parse's none, and this prices that difference beside Parse. "Foreign CPU" is the share of the machine's
two cores used during a measured run by processes that are not part of it (other engineers' tests):
total busy time from ``/proc/stat`` minus the server under test, wrk, and the PostgreSQL backends
connected to the server's database. ``--base REV`` runs, in the same rounds, the admin on a Trellis of
revision REV (a git worktree first on that server's ``PYTHONPATH``): this tree ÷ base, paired by round,
is the before/after of a change beside the same Parse.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import psycopg2
import requests

from bench.access_data import seed_access, sign_in
from bench.common import (
    ROOT,
    _free_port,
    bench_server,
    ceiling_server,
    checkout,
    interpreter,
    median_interval,
    paired_line,
    parse_wrk,
)

PARSE_DIR = Path(os.environ.get("TRELLIS_PEER_PARSE", "/work/shared/peers/parse"))
PARSE_URL = "http://127.0.0.1:1337/parse"
PARSE_DSN = "postgresql://bench:bench@127.0.0.1:5432/bench"
PARSE_HEADERS = {"X-Parse-Application-Id": "bench", "X-Parse-Master-Key": "bench-master"}
RESULTS = ROOT / "bench" / "results" / "peer.md"
TRIGGERS = ROOT / "bench" / "peer_triggers"  # the same two triggers on both sides (--triggers)
SCHEMA = {"title": "String", "price": "Number", "tags": ["String"], "owner": "String"}
# Parse's seed indexes price only (Parse never indexes a field by itself); Trellis indexes every single-valued
# field unless it says ``index: false``. Like with like: only price, unless ``--index-all`` asks for
# Trellis's default (two more index entries per create, and per update, which rewrites every index).
LIKE_PARSE = {**SCHEMA, "title": {"type": "String", "index": False}, "owner": {"type": "String", "index": False}}
ACCESS = {"conduit": {"authorization": {"enabled": True}}}
NEW_ITEM = {"title": "Bench item", "price": 12.5, "tags": ["new", "sale"], "owner": "user1"}
CONNECTIONS = 16


# ---- CPU accounting -------------------------------------------------------------------------------


def _machine_busy() -> float:
    """Busy CPU seconds of the whole machine since boot (all cores)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _process_cpu(pid: int) -> float:
    try:
        parts = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def _backends(dsn: str, database: str) -> list[int]:
    """PostgreSQL backends connected to ``database`` (none when the server refuses one more client:
    their CPU then counts as foreign, which overstates the load from others)."""
    try:
        with contextlib.closing(psycopg2.connect(dsn)) as connection, connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", (database,)
            )
            return [row[0] for row in cursor.fetchall()]
    except psycopg2.OperationalError:
        return []


class CpuWindow:
    """CPU used during one measured run: ours (server, PostgreSQL backends, wrk) and everyone else's."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.machine = _machine_busy()
        self.ours = sum(_process_cpu(pid) for pid in pids)
        self.children = self._children()
        self.started = time.monotonic()

    @staticmethod
    def _children() -> float:
        usage = os.times()
        return usage.children_user + usage.children_system

    def close(self) -> dict[str, float]:
        elapsed = time.monotonic() - self.started
        machine = _machine_busy() - self.machine
        ours = sum(_process_cpu(pid) for pid in self.pids) - self.ours + self._children() - self.children
        cores = os.cpu_count() or 1
        return {
            "foreign_pct": max(0.0, (machine - ours) / (elapsed * cores) * 100),
            "ours_pct": ours / (elapsed * cores) * 100,
        }


# ---- servers ------------------------------------------------------------------------------------


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


@contextlib.contextmanager
def redis_child() -> Iterator[str]:
    """A throwaway redis-server on a free port (the shared one on 6379 is left alone)."""
    port = _free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(50):
            with contextlib.suppress(OSError):
                import socket

                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(10)


def load_trellis(
    url: str, headers: dict[str, str], options: dict[str, Any] | None = None, fields: dict[str, Any] = LIKE_PARSE
) -> list[str]:
    """The rows Parse's seed made, loaded into Trellis in the same order; returns the new ids. ``options``:
    the schema's ``modelOptions`` (access control); ``fields``: the schema's fields (their indexes)."""
    schema = {"name": "Item", "fields": fields, **({"modelOptions": options} if options else {})}
    requests.post(f"{url}/admin/database/schemas", json=schema, headers=headers, timeout=60).raise_for_status()
    with contextlib.closing(psycopg2.connect(PARSE_DSN)) as connection, connection.cursor() as cursor:
        cursor.execute('SELECT title, price, tags, owner FROM "Item" ORDER BY "createdAt" DESC, "objectId"')
        rows = cursor.fetchall()
    ids: list[str] = []
    session = requests.Session()
    for start in range(0, len(rows), 1000):
        docs = [{"title": t, "price": p, "tags": tags, "owner": o} for t, p, tags, o in rows[start : start + 1000]]
        response = session.post(f"{url}/database/Item/many", json={"docs": docs}, headers=headers, timeout=300)
        response.raise_for_status()
        ids += [doc["_id"] for doc in response.json()["docs"]]
    return ids


def forget_created(database_url: str) -> None:
    """The Items the last round's creates made, and their grants, deleted by SQL: a user owns what it
    creates, so without this the measured user's ~2% would grow by a round's creates (~5,000) every round,
    on Trellis the set its pages test membership of with them. The change numbers do not move, which is
    safe here: no count was kept under the current one since those creates, and the next is of what is left."""
    dsn = database_url.replace("postgresql+psycopg2://", "postgresql://")
    with contextlib.closing(psycopg2.connect(dsn)) as connection, connection.cursor() as cursor:
        if dsn == PARSE_DSN:
            cursor.execute('DELETE FROM "Item" WHERE title = %s', (NEW_ITEM["title"],))
        else:
            cursor.execute("SELECT to_regclass('authz_relations') IS NOT NULL")
            granted = cursor.fetchone()[0]
            cursor.execute("SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'dbdoc%%'")
            for (table,) in cursor.fetchall():
                gone = f"DELETE FROM {table} WHERE data ->> 'title' = %s RETURNING id"
                if granted:
                    gone = (
                        f"WITH gone AS ({gone}) DELETE FROM authz_relations WHERE resource_id IN (SELECT id FROM gone)"
                    )
                cursor.execute(gone, (NEW_ITEM["title"],))
        connection.commit()


def vacuum(database_url: str) -> None:
    dsn = database_url.replace("postgresql+psycopg2://", "postgresql://")
    with contextlib.closing(psycopg2.connect(dsn)) as connection:
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")


# ---- load ---------------------------------------------------------------------------------------

_SCRIPT = """
wrk.method = {method}
wrk.body = {body}
{headers}
local paths = {{}}
for line in io.lines({paths_file}) do paths[#paths + 1] = line end
local i = math.random(#paths)
request = function()
  i = i + 1
  return wrk.format(nil, paths[(i % #paths) + 1])
end
"""


def wrk(
    base: str,
    paths: list[str],
    seconds: int,
    method: str = "GET",
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> dict[str, float]:
    headers = dict(headers or {})
    if body is not None:
        headers["Content-Type"] = "application/json"
    lua_headers = "\n".join(f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in headers.items())
    with tempfile.TemporaryDirectory() as tmp:
        paths_file = Path(tmp) / "paths.txt"
        paths_file.write_text("\n".join(paths))
        script = Path(tmp) / "run.lua"
        script.write_text(
            _SCRIPT.format(
                method=json.dumps(method),
                body=json.dumps(json.dumps(body)) if body else "nil",
                headers=lua_headers,
                paths_file=json.dumps(str(paths_file)),
            )
        )
        result = subprocess.run(
            ["wrk", "-t1", f"-c{CONNECTIONS}", f"-d{seconds}s", "--latency", "-s", str(script), base],
            capture_output=True,
            text=True,
            check=True,
        )
    return parse_wrk(result.stdout)


def _cases(
    ids: list[str],
    rnd: random.Random,
    common: dict[str, Any],
    collection: str,
    listed: Callable[[int, bool], str],
    update_method: str,
    editable: list[str] | None = None,
    new_item: dict[str, Any] = NEW_ITEM,
) -> dict[str, dict[str, Any]]:
    """The five operations on one server: ``ids`` are read by id, ``editable`` (by default ``ids``)
    updated; ``collection`` is the Items' path, ``listed(x, counted)`` a list's path (prices below x,
    sorted by price descending, 20 a page), ``new_item`` the body of a create."""
    sample = rnd.sample(ids, min(5000, len(ids)))
    changed = sample if editable is None else rnd.sample(editable, min(5000, len(editable)))
    xs = [rnd.randint(1, 950) for _ in range(20_000)]
    return {
        "get by id": {**common, "paths": [f"{collection}/{i}" for i in sample]},
        "list + exact count": {**common, "paths": [listed(x, True) for x in xs]},
        "list, no count": {**common, "paths": [listed(x, False) for x in xs]},
        "create": {**common, "paths": [collection], "method": "POST", "body": new_item},
        "update": {
            **common,
            "paths": [f"{collection}/{i}" for i in changed],
            "method": update_method,
            "body": {"price": 99.5},
        },
    }


def trellis_cases(
    ids: list[str], rnd: random.Random, headers: dict[str, str] | None = None, editable: list[str] | None = None
) -> dict[str, dict[str, Any]]:
    def listed(x: int, counted: bool) -> str:
        return f"/database/Item?price[$lt]={x}&sort=-price&limit=20" + ("" if counted else "&count=none")

    return _cases(ids, rnd, {"headers": headers} if headers else {}, "/database/Item", listed, "PATCH", editable)


def parse_cases(ids: list[str], rnd: random.Random, user: ParseUser | None = None) -> dict[str, dict[str, Any]]:
    """Parse's side of each operation: its list with ``count=1`` beside ours with the exact count, its
    plain list beside ours with ``count=none``. With ``user``, called with its session token: its readable
    Items are read, its editable ones updated, and what it creates is its own (an ACL naming it)."""

    def listed(x: int, counted: bool) -> str:
        where = urllib.parse.quote(json.dumps({"price": {"$lt": x}}, separators=(",", ":")))
        return f"/parse/classes/Item?where={where}&order=-price&limit=20" + ("&count=1" if counted else "")

    if user is None:
        return _cases(ids, rnd, {"headers": PARSE_HEADERS}, "/parse/classes/Item", listed, "PUT")
    mine = {**NEW_ITEM, "ACL": {user.id: {"read": True, "write": True}}}
    headers = {"headers": user.headers}
    return _cases(user.readable, rnd, headers, "/parse/classes/Item", listed, "PUT", user.editable, mine)


def measure(
    base: str, case: dict[str, Any], server_pid: int, backends: Callable[[], list[int]], warmup: int, seconds: int
) -> dict[str, float]:
    """wrk's figures, the CPU shares of the run, and per request the server process's CPU and its
    PostgreSQL backends' (listed after the warm-up, when the pools have opened their connections):
    their own work, which other engineers' load moves far less than req/s."""
    if warmup:
        wrk(base, case["paths"], warmup, case.get("method", "GET"), case.get("body"), case.get("headers"))
    pg = backends()
    window = CpuWindow([server_pid, *pg])
    server, pg_before = _process_cpu(server_pid), {pid: _process_cpu(pid) for pid in pg}
    stats = wrk(base, case["paths"], seconds, case.get("method", "GET"), case.get("body"), case.get("headers"))
    requests_done = max(stats["rps"] * seconds, 1)
    cpu_us = (_process_cpu(server_pid) - server) / requests_done * 1e6
    # Backends listed again: one opened during the run counts whole, one closed during it is lost (its
    # CPU is no longer readable), so a pool that churns connections is undercounted, never negative.
    after = {pid: _process_cpu(pid) for pid in backends()}
    pg_us = sum(max(0.0, cpu - pg_before.get(pid, 0.0)) for pid, cpu in after.items()) / requests_done * 1e6
    churn = len(set(pg) ^ set(after))
    return {**stats, **window.close(), "server_cpu_us": cpu_us, "pg_cpu_us": pg_us, "backends_churned": churn}


# ---- running as a user under access control ---------------------------------------------------------

ACCESS_MODULES = "authentication,authorization,database,email,sms"
PLAIN_MODULES = "authentication,database,email,sms"


def as_user(url: str, admin_headers: dict[str, str], database_url: str, doc_ids: list[str]) -> dict[str, str]:
    """A signed-up user who may edit (so read) every Item, as Parse's master key may: one ``editor`` tuple
    per document, written by bulk SQL into the Authorization module's table. Returns its headers."""
    body = {"email": "peer@example.com", "password": "peer-bench-password-1"}
    requests.post(f"{url}/authentication/users", json=body, headers=admin_headers, timeout=30).raise_for_status()
    tokens = requests.post(f"{url}/authentication/local", json=body, timeout=30)
    tokens.raise_for_status()
    subject = f"User:{tokens.json()['userId']}"
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    dsn = database_url.replace("postgresql+psycopg2://", "postgresql://")
    with contextlib.closing(psycopg2.connect(dsn)) as connection, connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO authz_relations (id, subject, relation, resource_type, resource_id, created_at) "
            "SELECT md5(random()::text || d), %s, 'editor', 'Item', d, %s::timestamptz FROM unnest(%s::varchar[]) AS d",
            (subject, now, doc_ids),
        )
        connection.commit()
    return {"Authorization": f"Bearer {tokens.json()['accessToken']}"}


# ---- a user under access control on both sides -----------------------------------------------------

USERS, GRANTS = 10_000, 20_000  # the access benchmark's sizes (bench/access_bench.py)
PARSE_APP = {"X-Parse-Application-Id": "bench", "X-Parse-REST-API-Key": "bench-rest"}


class ParseUser(NamedTuple):
    """Parse's measured user: its object id, its request headers (session token), what it may read and
    edit (Parse's ids of the same Items as Trellis's user)."""

    id: str
    headers: dict[str, str]
    readable: list[str]
    editable: list[str]


class UnderAccess(NamedTuple):
    """Trellis's measured user (headers, Items it may read and edit) and Parse's twin."""

    headers: dict[str, str]
    readable: list[str]
    editable: list[str]
    parse: ParseUser


def under_access(trellis: Any, trellis_ids: list[str], rnd: random.Random) -> UnderAccess:
    """The access benchmark's users, teams and grants (``bench.access_bench.seed_access``: the measured user
    reads ~2% of the Items, through its own grants and its team's, its team's parent's and root's) on
    Trellis, and the same access given on Parse (:func:`parse_under_access`)."""
    measured, token, _ = sign_in(trellis)
    plan = seed_access(trellis, trellis_ids, measured, USERS, GRANTS, rnd, resource="Item")
    subjects = {f"User:{measured}", *(f"Team:{team}" for team in plan["teams"])}
    readable = sorted({d for s, _, d in plan["relations"] if s in subjects})
    editable = sorted({d for s, r, d in plan["relations"] if s in subjects and r != "reader"})
    if set(readable) != set(plan["readable"]):
        raise SystemExit("the measured user's readable Items differ from what authz_relations gives it")
    return UnderAccess(
        {"Authorization": f"Bearer {token}"},
        readable,
        editable,
        parse_under_access(plan, measured, trellis_ids, readable, editable),
    )


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


def run(
    rounds: int,
    warmup: int,
    seconds: int,
    documents: int,
    user: bool = False,
    only: list[str] | None = None,
    fields: dict[str, Any] = LIKE_PARSE,
    without_log: bool = False,
    base: str | None = None,
    triggers: bool = False,
) -> list[dict[str, Any]]:
    """Every round: each operation on each side, the sides' order turning round by round. With ``user``
    the user's Trellis (access control on) runs beside Parse's user under ACLs (:func:`under_access`) *and*
    beside an admin's Trellis (a second
    server, access off, its own database and Redis), so that user ÷ admin is a ratio of the same round.
    With ``without_log`` a third Trellis (the admin's, ``TRELLIS_EVENTS=false``, its own database and
    Redis) runs in the same rounds: what the event log costs against Parse, which records no event. With
    ``base`` (a revision) another admin's Trellis runs that revision's code (a worktree first on its
    ``PYTHONPATH``) in the same rounds: this tree ÷ base is a ratio of the same round. With ``triggers``
    Parse runs ``peer_triggers/triggers.js`` (a beforeSave and an afterSave on Item) and Trellis the same
    two triggers (``peer_triggers/triggers.py``), and a Trellis without triggers (the Functions module
    loaded, no file) runs in the same rounds: with ÷ without is a ratio of the same round."""
    rnd = random.Random(15)
    results: list[dict[str, Any]] = []
    modules = ACCESS_MODULES if user else PLAIN_MODULES
    functions: dict[str, str] = {}
    if triggers:
        modules += ",functions"
        functions = {"TRELLIS_FUNCTIONS_PATH": str(TRIGGERS)}
        fields = {**fields, "stamped": {"type": "Boolean", "index": False}}
    with contextlib.ExitStack() as stack:
        parse_ids = stack.enter_context(parse_server(documents, TRIGGERS / "triggers.js" if triggers else None))
        redis_url = stack.enter_context(redis_child())
        trellis = stack.enter_context(
            bench_server("postgresql", modules=modules, TRELLIS_REDIS_URL=redis_url, **functions)
        )
        ceiling = stack.enter_context(ceiling_server())
        trellis_ids = load_trellis(trellis.url, trellis.admin_headers, ACCESS if user else None, fields)
        access = under_access(trellis, trellis_ids, rnd) if user else None
        ours = (
            trellis_cases(access.readable, rnd, access.headers, access.editable)
            if access
            else trellis_cases(trellis_ids, rnd)
        )
        sides = {
            "trellis": _Side(trellis.url, ours, trellis.process.pid, trellis.database_url),
            "parse": _Side(
                PARSE_URL.rsplit("/parse", 1)[0],
                parse_cases(parse_ids, rnd, access.parse if access else None),
                parse_pid(),
                PARSE_DSN,
            ),
        }
        if user:
            admin_redis = stack.enter_context(redis_child())
            admin = stack.enter_context(
                bench_server("postgresql", modules=PLAIN_MODULES, TRELLIS_REDIS_URL=admin_redis)
            )
            admin_ids = load_trellis(admin.url, admin.admin_headers, None, fields)
            sides["admin"] = _Side(admin.url, trellis_cases(admin_ids, rnd), admin.process.pid, admin.database_url)
        if without_log:
            bare_redis = stack.enter_context(redis_child())
            bare = stack.enter_context(
                bench_server("postgresql", modules=PLAIN_MODULES, TRELLIS_REDIS_URL=bare_redis, TRELLIS_EVENTS="false")
            )
            bare_ids = load_trellis(bare.url, bare.admin_headers, None, fields)
            sides["unlogged"] = _Side(bare.url, trellis_cases(bare_ids, rnd), bare.process.pid, bare.database_url)
        if triggers:
            plain_redis = stack.enter_context(redis_child())
            plain = stack.enter_context(bench_server("postgresql", modules=modules, TRELLIS_REDIS_URL=plain_redis))
            plain_ids = load_trellis(plain.url, plain.admin_headers, None, fields)
            sides["plain"] = _Side(plain.url, trellis_cases(plain_ids, rnd), plain.process.pid, plain.database_url)
        if base is not None:
            pythonpath = stack.enter_context(checkout(base))
            base_redis = stack.enter_context(redis_child())
            before = stack.enter_context(
                bench_server("postgresql", modules=PLAIN_MODULES, TRELLIS_REDIS_URL=base_redis, PYTHONPATH=pythonpath)
            )
            base_ids = load_trellis(before.url, before.admin_headers, None, fields)
            sides["base"] = _Side(before.url, trellis_cases(base_ids, rnd), before.process.pid, before.database_url)
        names = [name for name in sides["trellis"].cases if only is None or name in only]
        for number in range(1, rounds + 1):
            # Every database starts every round vacuumed: a round's lists otherwise follow the previous
            # round's ~25,000 creates and updates, whose cleared visibility map sends every count to the heap
            # (on both sides: 2.39× in round 1, 1.61× and 0.84× after, with autovacuum running meanwhile).
            for side in sides.values():
                if user:
                    forget_created(side.database_url)
                vacuum(side.database_url)
            for name in names:
                turn = (number + len(results)) % len(sides)
                order = [*sides][turn:] + [*sides][:turn]
                row: dict[str, Any] = {"round": number, "operation": name}
                for label in order:
                    row[label] = sides[label].measure(name, warmup, seconds)
                results.append(row)
                _print_row(row)
            top = measure(ceiling.url, {"paths": ["/item"]}, ceiling.process.pid, list, warmup, seconds)
            results.append({"round": number, "operation": "floor", "floor": top})
            print(
                f"round {number}: bare Flask route (the floor) {top['rps']} req/s, "
                f"{top['server_cpu_us']:.0f} µs/request (foreign CPU {top['foreign_pct']:.0f}%)",
                flush=True,
            )
    return results


class _Side(NamedTuple):
    """One server of the comparison: its base URL, cases (:func:`_cases`), process and database."""

    url: str
    cases: dict[str, dict[str, Any]]
    pid: int
    database_url: str

    def measure(self, name: str, warmup: int, seconds: int) -> dict[str, float]:
        database = self.database_url.rsplit("/", 1)[1]
        return measure(self.url, self.cases[name], self.pid, lambda: _backends(PARSE_DSN, database), warmup, seconds)


def _print_row(row: dict[str, Any]) -> None:
    print(paired_line(row["round"], row["operation"], ("trellis", row["trellis"]), ("parse", row["parse"])), flush=True)
    print(
        "    µs/request server + PostgreSQL: trellis {:.0f} + {:.0f}, parse {:.0f} + {:.0f} "
        "(backends opened or closed during the run: {}, {})".format(
            row["trellis"]["server_cpu_us"],
            row["trellis"]["pg_cpu_us"],
            row["parse"]["server_cpu_us"],
            row["parse"]["pg_cpu_us"],
            row["trellis"]["backends_churned"],
            row["parse"]["backends_churned"],
        ),
        flush=True,
    )
    if "admin" in row:
        print(
            paired_line(row["round"], row["operation"], ("user", row["trellis"]), ("admin", row["admin"])), flush=True
        )
    if "unlogged" in row:
        print(
            paired_line(row["round"], row["operation"], ("without the log", row["unlogged"]), ("parse", row["parse"])),
            flush=True,
        )
    if "base" in row:
        print(
            paired_line(row["round"], row["operation"], ("this tree", row["trellis"]), ("base", row["base"])),
            flush=True,
        )


GOALS = {"get by id": 1.6, "list + exact count": 3.0, "list, no count": 1.5, "create": 1.2, "update": 1.2}
# A user under access beside Parse's user under ACLs: reads well ahead, writes at least level.
USER_GOALS = {"get by id": 1.2, "list + exact count": 1.2, "list, no count": 1.2, "create": 1.0, "update": 1.0}
BESIDE = {"list + exact count": "Parse with `count=1`", "list, no count": "Parse's plain list"}


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
        f"{args.load_before}, after: {_load()}. µs/request: CPU of the server process and of the PostgreSQL "
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


USER_GOAL = 0.8  # a user under access control, against the admin's figure


def _unlogged_columns(rows: list[dict[str, Any]]) -> str:
    """Trellis without the event log ÷ Parse (``--without-event-log``), with its own µs."""
    return _paired_columns(rows, "unlogged", "parse", "unlogged")


def _base_columns(rows: list[dict[str, Any]]) -> str:
    """This tree ÷ the base revision's Trellis (``--base``), with the base's own µs."""
    return _paired_columns(rows, "trellis", "base", "base")


def _load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=3, help="seconds of load before each measured run")
    parser.add_argument("--duration", type=int, default=15, help="measured seconds per run")
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--as-user", action="store_true", help="call Trellis as a user under access control")
    parser.add_argument("--only", action="append", help="an operation to run (repeat it; default: all)")
    parser.add_argument(
        "--index-all",
        action="store_true",
        help="index every field of Item (Trellis's default), not only price as Parse",
    )
    parser.add_argument(
        "--without-event-log",
        action="store_true",
        help="also run, in every round, a Trellis with TRELLIS_EVENTS=false beside Parse (what the log costs)",
    )
    parser.add_argument(
        "--base",
        help="also run, in every round, the admin on a Trellis of this revision (this tree ÷ base, paired)",
    )
    parser.add_argument(
        "--triggers",
        action="store_true",
        help="a trivial before- and after-trigger per write on both sides, and a Trellis without them in every round",
    )
    parser.add_argument("--output", type=Path, default=RESULTS, help="the markdown file the dated section is added to")
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    args = parser.parse_args(argv)
    if args.base and args.as_user:
        parser.error("--base compares the admin's Trellis: leave out --as-user")
    for tool in ("wrk", "redis-server", "psql", "node"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed (make bench-deps installs wrk)")
    command = " ".join([".venv/bin/python -m bench.peer_bench", *(argv if argv is not None else sys.argv[1:])])
    revision = (
        os.environ.get("TRELLIS_BENCH_REVISION")
        or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    )
    args.load_before = _load()
    fields = SCHEMA if args.index_all else LIKE_PARSE
    results = run(
        args.rounds,
        args.warmup,
        args.duration,
        args.documents,
        args.as_user,
        args.only,
        fields,
        args.without_event_log,
        args.base,
        args.triggers,
    )
    text = report(results, command, args, revision)
    print(text)
    if not args.no_write:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        with args.output.open("a") as out:
            out.write("\n" + text)


if __name__ == "__main__":
    main()
