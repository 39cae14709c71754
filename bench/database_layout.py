"""Storage layout experiment behind the Database module's design (docs/database.md), on PostgreSQL.

    .venv/bin/python -m bench.database_layout            # prints a Markdown table

100,000 documents {title, price, tags, owner} stored three ways, queried with plain SQL (no HTTP):

- per-table + generated columns: what Trellis does (one table per schema; a STORED generated column
  per single-valued field, computed from the JSONB document, with a b-tree index);
- per-table + expression indexes: the same table without generated columns, indexes on the
  expression ``(CASE WHEN jsonb_typeof(data->'price') = 'number' THEN (data->>'price')::numeric END)``;
- shared table: every schema's documents in one table with a ``schema_id`` column (here 100,000 more
  of another schema), partial expression indexes ``WHERE schema_id = …``.

Each query runs 25 times after 5 warm-ups; the table shows the median in ms. ``database_bench``
includes this table in ``bench/results/database.md``.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import psycopg2

from bench.common import throwaway_database

PRICE = "(CASE WHEN jsonb_typeof(data->'price') = 'number' THEN (data->>'price')::numeric END)"
DOCS = """SELECT md5(i::text), jsonb_build_object(
    'title', 'Product ' || i, 'price', round((random() * 1000)::numeric, 2),
    'tags', jsonb_build_array('t' || mod(i, 10), 'x' || mod(i, 7)), 'owner', 'user' || mod(i, 100))
FROM generate_series(1, %(n)s) i"""

SETUP = {
    "per-table + generated columns": [
        (
            "CREATE TABLE gen (id varchar(32) PRIMARY KEY, data jsonb NOT NULL, "
            f"f_price numeric GENERATED ALWAYS AS ({PRICE}) STORED)"
        ),
        f"INSERT INTO gen (id, data) {DOCS}",
        "CREATE INDEX gen_price ON gen (f_price NULLS FIRST, id)",
    ],
    "per-table + expression indexes": [
        "CREATE TABLE expr (id varchar(32) PRIMARY KEY, data jsonb NOT NULL)",
        f"INSERT INTO expr (id, data) {DOCS}",
        f"CREATE INDEX expr_price ON expr ({PRICE} NULLS FIRST, id)",
    ],
    "shared table (+100k other docs)": [
        "CREATE TABLE shared (id varchar(32) PRIMARY KEY, schema_id varchar(32) NOT NULL, data jsonb NOT NULL)",
        f"INSERT INTO shared (id, schema_id, data) SELECT id, 'product', data FROM ({DOCS}) AS d(id, data)",
        f"INSERT INTO shared (id, schema_id, data) SELECT md5('o' || id), 'other', data FROM ({DOCS}) AS d(id, data)",
        f"CREATE INDEX shared_price ON shared ({PRICE} NULLS FIRST, id) WHERE schema_id = 'product'",
    ],
}
# (table, filter every query of that layout adds, price expression)
LAYOUT_SQL = {
    "per-table + generated columns": ("gen", "", "f_price"),
    "per-table + expression indexes": ("expr", "", PRICE),
    "shared table (+100k other docs)": ("shared", "schema_id = 'product' AND ", PRICE),
}


def queries(layout: str) -> dict[str, str]:
    table, scope, price = LAYOUT_SQL[layout]
    return {
        "count price < 500 (50%)": f"SELECT count(*) FROM {table} WHERE {scope}{price} < 500",
        "count price < 50 (5%)": f"SELECT count(*) FROM {table} WHERE {scope}{price} < 50",
        "page price < 500, -price, limit 20": f"SELECT id, data FROM {table} WHERE {scope}{price} < 500 ORDER BY {price} DESC NULLS LAST, id DESC LIMIT 20",
        "get by id": f"SELECT id, data FROM {table} WHERE {scope}id = md5('4242')",
    }


def median_ms(cursor: Any, sql: str, runs: int = 25) -> float:
    for _ in range(5):
        cursor.execute(sql)
        cursor.fetchall()
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        cursor.execute(sql)
        cursor.fetchall()
        samples.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(samples), 2)


def run(documents: int = 100_000) -> str:
    with throwaway_database("postgresql") as url:
        dsn = url.replace("postgresql+psycopg2://", "postgresql://")
        connection = psycopg2.connect(dsn)
        connection.autocommit = True
        cursor = connection.cursor()
        cursor.execute("SET max_parallel_workers_per_gather = 0")  # one core per query, as under load
        for statements in SETUP.values():
            for sql in statements:
                cursor.execute(sql, {"n": documents} if "%(n)s" in sql else None)
        cursor.execute("VACUUM ANALYZE")
        rows = {layout: {name: median_ms(cursor, sql) for name, sql in queries(layout).items()} for layout in SETUP}
        for layout, (table, scope, _) in LAYOUT_SQL.items():
            # Write cost with the indexes in place: 10,000 more documents in one statement.
            columns, extra = ("id, schema_id, data", "'product', ") if scope else ("id, data", "")
            started = time.perf_counter()
            cursor.execute(
                f"INSERT INTO {table} ({columns}) SELECT md5('new' || i), {extra}jsonb_build_object("
                "'title', 'New ' || i, 'price', round((random() * 1000)::numeric, 2)) "
                "FROM generate_series(1, 10000) i"
            )
            rows[layout]["insert 10,000 more"] = round((time.perf_counter() - started) * 1000, 1)
        connection.close()
    names = list(next(iter(rows.values())))
    lines = ["| layout | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for layout, values in rows.items():
        lines.append(f"| {layout} | " + " | ".join(str(values[n]) for n in names) + " |")
    return "\n".join(lines) + "\n\nMedian ms per query (psycopg2, no HTTP), " + f"{documents:,} documents per schema."


if __name__ == "__main__":
    print(run())
