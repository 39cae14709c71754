"""The access benchmarks' users, teams and grants: a measured user who reads ~2% of a schema's documents
through its own grants and its teams' (``seed_access``), written by bulk SQL into the Authentication and
Authorization modules' tables, and the plan returned so that a peer can be given the same access."""

from __future__ import annotations

import contextlib
import random
import time
import uuid
from typing import Any

import psycopg2
import requests

from bench.common import ADMIN, Server


def _dsn(server: Server) -> str:
    return server.database_url.replace("postgresql+psycopg2://", "postgresql://")


def _new_id() -> str:
    return uuid.uuid4().hex


def sign_in(server: Server) -> tuple[str, str, str]:
    """(measured user's id, its access token, an admin token)."""
    body = {"email": "measured@example.com", "password": "measured-password-1"}
    created = requests.post(f"{server.url}/authentication/users", json=body, headers=server.admin_headers, timeout=30)
    created.raise_for_status()
    tokens = requests.post(f"{server.url}/authentication/local", json=body, timeout=30)
    tokens.raise_for_status()
    admin = requests.post(
        f"{server.url}/login",
        json={"username": ADMIN[0], "password": ADMIN[1]},
        headers=server.admin_headers,
        timeout=30,
    )
    admin.raise_for_status()
    return tokens.json()["userId"], tokens.json()["accessToken"], admin.json()["token"]


def insert_people(
    cursor: Any,
    users: list[tuple[str, str]],
    teams: list[tuple[str, str | None]],
    members: list[tuple[str, str, str]],
) -> None:
    """Users (id, email), teams (id, parent) and memberships (team, user, role) in the Authentication
    module's tables, one statement each."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    _insert(
        cursor,
        "auth_users",
        ["id", "email", "is_active", "is_verified", "two_fa_enabled", "providers", "extra", "created_at", "updated_at"],
        [(user, email, True, True, False, "[]", "{}", now, now) for user, email in users],
    )
    _insert(
        cursor,
        "auth_teams",
        ["id", "name", "parent_id", "created_at", "updated_at"],
        [(team, f"team {k}", parent, now, now) for k, (team, parent) in enumerate(teams)],
    )
    _insert(
        cursor,
        "auth_team_members",
        ["team_id", "user_id", "role", "created_at"],
        [(team, user, role, now) for team, user, role in members],
    )


def _insert(cursor: Any, table: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    """Many rows in one statement: one array per column, unnested by PostgreSQL."""
    arrays = [list(column) for column in zip(*rows, strict=True)]
    casts = ", ".join(f"%s::{kind}[]" for kind in _TYPES[table])
    cursor.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT * FROM unnest({casts})", arrays)


_TYPES = {
    "auth_users": [
        "varchar",
        "varchar",
        "boolean",
        "boolean",
        "boolean",
        "jsonb",
        "jsonb",
        "timestamptz",
        "timestamptz",
    ],
    "auth_teams": ["varchar", "varchar", "varchar", "timestamptz", "timestamptz"],
    "auth_team_members": ["varchar", "varchar", "varchar", "timestamptz"],
    "authz_relations": ["varchar", "varchar", "varchar", "varchar", "varchar", "timestamptz"],
}


def seed_access(
    server: Server,
    doc_ids: list[str],
    measured: str,
    users: int,
    grants: int,
    rnd: random.Random,
    resource: str = "Doc",
) -> dict[str, Any]:
    """Users, teams, memberships, owner tuples and grants on the documents of schema ``resource`` (see the
    module docstring); returns what the measured user may read, counted by SQL afterwards, its teams, and
    the plan itself (``users``, ``teams`` as (id, parent), ``members`` as (team, user), ``relations`` as
    (subject, relation, document)) for a peer to be given the same access."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    others = [_new_id() for _ in range(users - 1)]
    everyone = [measured, *others]
    roots = [_new_id() for _ in range(10)]
    middles = [(_new_id(), roots[i // 9]) for i in range(90)]
    leaves = [(_new_id(), middles[i // 10][0]) for i in range(900)]
    teams = [(t, None) for t in roots] + middles + leaves
    members = list(everyone)
    rnd.shuffle(members)
    members.remove(measured)
    members.insert(len(roots) * 10 + len(middles) * 10, measured)  # the first member of the first leaf
    leaf, middle = leaves[0]
    root = dict(middles)[middle]
    relations: set[tuple[str, str, str]] = set()  # (subject, relation, document)
    for doc_id in doc_ids:
        relations.add((f"User:{rnd.choice(everyone)}", "owner", doc_id))
    mine = rnd.sample(doc_ids, 1990)
    for subject, chunk in (
        (f"User:{measured}", mine[:490]),
        (f"Team:{leaf}", mine[490:990]),
        (f"Team:{middle}", mine[990:1490]),
        (f"Team:{root}", mine[1490:]),
    ):
        relations.update((subject, rnd.choice(("reader", "editor")), doc_id) for doc_id in chunk)
    team_ids = [t for t, _ in teams]
    while len(relations) < len(doc_ids) + grants:
        subject = f"User:{rnd.choice(others)}" if rnd.random() < 0.7 else f"Team:{rnd.choice(team_ids)}"
        relations.add((subject, rnd.choice(("reader", "editor")), rnd.choice(doc_ids)))
    with contextlib.closing(psycopg2.connect(_dsn(server))) as connection, connection.cursor() as cursor:
        insert_people(
            cursor,
            [(u, f"user{i}@example.com") for i, u in enumerate(others)],
            teams,
            [(team_ids[i // 10], u, "owner" if i % 10 == 0 else "member") for i, u in enumerate(members)],
        )
        _insert(
            cursor,
            "authz_relations",
            ["id", "subject", "relation", "resource_type", "resource_id", "created_at"],
            [(_new_id(), s, r, resource, d, now) for s, r, d in relations],
        )
        connection.commit()
        subjects = [f"User:{measured}", "User:*", "*", f"Team:{leaf}", f"Team:{middle}", f"Team:{root}"]
        cursor.execute(
            "SELECT DISTINCT resource_id FROM authz_relations WHERE resource_type = %s AND subject = ANY(%s)",
            (resource, subjects),
        )
        readable = [row[0] for row in cursor.fetchall()]
        connection.commit()
        connection.autocommit = True
        cursor.execute("VACUUM ANALYZE")
    return {
        "readable": readable,
        "teams": (leaf, middle, root),
        "tuples": len(relations),
        "owners": len(doc_ids),
        "grants": len(relations) - len(doc_ids),
        "users": everyone,
        "teams_tree": teams,
        "members": [(team_ids[i // 10], u) for i, u in enumerate(members)],
        "relations": relations,
    }
