"""Full-text search: the words a client types → a SQL condition and a rank, and the index behind them.

A schema's ``String`` and ``[String]`` fields declared ``searchable: true`` are indexed together in the
language of ``modelOptions.search.language`` (default ``simple``: lower-cased words, no stemming).

- PostgreSQL: a GIN index over an expression of ``data`` (``to_tsvector`` per field, concatenated), which
  the database keeps in step with every write itself. An expression index rather than a stored generated
  column: adding a generated column rewrites the table under an exclusive lock, while an index is built
  with ``CREATE INDEX CONCURRENTLY`` after the schema change commits (writes go on; see
  :func:`build_pending` and bench/results/search.md for 100,000 documents). Queries are correct without
  the index (the same expression is evaluated row by row), so a change is searchable at once.
- SQLite: an FTS5 table ``dbfts_<schema id>`` (rowid = the document row's rowid) kept in step by
  triggers on the document table, so every write path (REST, ``/many``, GraphQL, custom endpoints,
  restores) updates it in the same transaction. English stems with FTS5's ``porter`` tokenizer; every
  other language is ``unicode61 remove_diacritics 2`` (case- and accent-insensitive, no stemming).

The words: split on anything that is not a letter or a digit; every word must occur in some searchable
field (not necessarily the same one); only the last word also matches as a prefix (search-as-you-type);
``-word`` excludes documents holding it. English stop words are dropped on both databases (PostgreSQL's
list, so they agree); a query left without words to look for matches nothing. Quotes and ``or`` are not
operators: they are punctuation and an ordinary word.

The one entry point for queries is :func:`condition` (and :func:`rank` for ordering); their signatures
stay stable for other routes (aggregation).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import re
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection

from trellis import reads
from trellis.errors import bad_request

from .fields import Field

log = logging.getLogger(__name__)

DEFAULT_LANGUAGE = "simple"
# PostgreSQL text search configurations every installation has (pg_ts_config), one per Snowball stemmer
# we offer; a fixed list, so the name can be written into SQL as a literal.
LANGUAGES = (
    "simple",
    "danish",
    "dutch",
    "english",
    "finnish",
    "french",
    "german",
    "hungarian",
    "italian",
    "norwegian",
    "portuguese",
    "romanian",
    "russian",
    "spanish",
    "swedish",
    "turkish",
)
MAX_SEARCH_LENGTH = 500  # characters of ``search``
MAX_WORDS = 32
PARAMETER = "search"  # the bound parameter carrying the compiled query text

# PostgreSQL's english.stop (tsearch_data), so both databases drop the same words.
ENGLISH_STOP_WORDS = frozenset(
    """i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers
    herself it its itself they them their theirs themselves what which who whom this that these those am is are
    was were be been being have has had having do does did doing a an the and but if or because as until while
    of at by for with about against between into through during before after above below to from up down in out
    on off over under again further then once here there when where why how all any both each few more most
    other some such no nor not only own same so than too very s t can will just don should now""".split()
)

_WORD = re.compile(r"[^\W_]+")


# ---- what a schema declares --------------------------------------------------------------------------


def searchable_fields(fields: dict[str, Field]) -> list[str]:
    """Names of the searchable fields, sorted (the index expression and FTS5 columns follow this order)."""
    return sorted(name for name, field in fields.items() if field.searchable)


def language(options: dict[str, Any]) -> str:
    return ((options or {}).get("search") or {}).get("language") or DEFAULT_LANGUAGE


@dataclass(frozen=True)
class State:
    """What is built for a schema's search (stored in ``SchemaRecord.storage["search"]``)."""

    fields: tuple[str, ...]
    language: str
    index: str  # PostgreSQL: the GIN index; SQLite: the FTS5 table

    def as_dict(self) -> dict[str, Any]:
        return {"fields": list(self.fields), "language": self.language, "index": self.index}

    @classmethod
    def of(cls, stored: Any) -> State | None:
        if not stored:
            return None
        return cls(tuple(stored["fields"]), stored["language"], stored["index"])


def desired(table: str, fields: dict[str, Field], options: dict[str, Any], dialect: str) -> State | None:
    names = tuple(searchable_fields(fields))
    if not names:
        return None
    lang = language(options)
    if dialect == "postgresql":  # one name per expression: a change builds a new index beside the old
        digest = hashlib.sha1(f"{table}.{lang}.{','.join(names)}".encode()).hexdigest()[:24]
        return State(names, lang, f"dbfts_{digest}")
    return State(names, lang, f"dbfts_{table.removeprefix('dbdoc_')}")


# ---- the words → a query -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Terms:
    words: tuple[str, ...]  # each must occur
    excluded: tuple[str, ...]  # none may occur
    prefix: bool  # the last of ``words`` also matches as a prefix


def parse(text: str, lang: str) -> Terms | None:
    """The words of ``text``, or None when nothing is left to look for (only stop words, punctuation or
    exclusions): such a search matches nothing."""
    words: list[str] = []
    excluded: list[str] = []
    chunks = text.split()
    prefix = False
    for position, chunk in enumerate(chunks):
        negated = chunk.startswith("-")
        found = [w.lower() for w in _WORD.findall(chunk)]
        if lang == "english":
            found = [w for w in found if w not in ENGLISH_STOP_WORDS]
        (excluded if negated else words).extend(found)
        # Search-as-you-type: the word being typed is the very last one (an exclusion is never a prefix).
        prefix = position == len(chunks) - 1 and bool(found) and not negated
    if len(words) + len(excluded) > MAX_WORDS:
        raise bad_request(f"search takes at most {MAX_WORDS} words", {"search": ["Too many words"]})
    if not words:
        return None
    return Terms(tuple(words), tuple(excluded), prefix)


def tsquery_text(terms: Terms) -> str:
    """``to_tsquery`` input: words are letters and digits only, so they carry no operator."""
    parts = list(terms.words)
    if terms.prefix:
        parts[-1] += ":*"
    return " & ".join(parts + [f"!{word}" for word in terms.excluded])


def fts5_text(terms: Terms) -> str:
    """An FTS5 MATCH expression: quoted words (letters and digits only), ``*`` for the prefix."""
    parts = [f'"{word}"' for word in terms.words]
    if terms.prefix:
        parts[-1] += "*"
    text = " AND ".join(parts)
    for word in terms.excluded:
        text = f'({text}) NOT "{word}"'
    return text


def check_text(raw: Any, key: str = "search") -> str:
    if not isinstance(raw, str):
        raise bad_request("search takes the words to look for", {key: ["Not a string"]})
    if len(raw) > MAX_SEARCH_LENGTH:
        raise bad_request(f"search takes at most {MAX_SEARCH_LENGTH} characters", {key: ["Too long"]})
    return raw


def state_of(schema: Any) -> State:
    """The schema's search state; 400 when it has no searchable field."""
    state = State.of((schema.storage or {}).get("search"))
    if state is None:
        raise bad_request(
            f"{schema.name} has no searchable fields (declare String fields with searchable: true)",
            {"search": ["Not searchable"]},
        )
    return state


def query_value(schema: Any, text: str, dialect: str) -> str | None:
    """The compiled query text bound to the ``search`` parameter, None when the search matches nothing."""
    state = state_of(schema)
    terms = parse(check_text(text), state.language)
    if terms is None:
        return None
    return tsquery_text(terms) if dialect == "postgresql" else fts5_text(terms)


# ---- SQL ---------------------------------------------------------------------------------------------


def _pg_vector(data: Any, state: State) -> sa.ColumnElement:
    """The tsvector of a document: every searchable field's text values in the schema's language."""
    config: sa.ColumnClause[Any] = sa.literal_column(f"'{state.language}'::regconfig")
    # The ``->`` operator spelled out: SQLAlchemy renders a JSONB index as ``data['f']`` on recent servers,
    # a different expression from the index's ``data -> 'f'``, which the planner would then not use.
    parts = [
        sa.func.coalesce(
            sa.func.to_tsvector(config, data.op("->", return_type=JSONB)(sa.literal_column(f"'{name}'"))),
            sa.literal_column("''::tsvector"),
        )
        for name in state.fields
    ]
    return functools.reduce(lambda left, right: left.op("||")(right), parts)


def _pg_query(state: State, value: Any) -> sa.ColumnElement:
    return sa.func.to_tsquery(sa.literal_column(f"'{state.language}'::regconfig"), value)


def _rowid(table: sa.Table) -> sa.ColumnElement:
    return sa.literal_column(f'"{table.name}".rowid')


def _fts_match(state: State, value: Any) -> sa.ColumnElement:
    return sa.literal_column(f'"{state.index}"').op("MATCH")(value)


def condition(schema: Any, text: str, dialect: str, parameter: Any = None) -> sa.ColumnElement[bool]:
    """Documents of ``schema`` matching the words of ``text`` (400 when the schema has no searchable
    field or ``text`` is not usable). Words that leave nothing to look for give ``false``: no document,
    not an error. The query text is bound as the ``search`` parameter (``parameter``: an existing bind
    parameter to reuse, e.g. one without a value in a statement built once)."""
    state = state_of(schema)
    value = query_value(schema, text, dialect)
    if value is None:
        return sa.false()
    bound = parameter if parameter is not None else sa.bindparam(PARAMETER, value)
    table = schema.table
    if dialect == "postgresql":
        return _pg_vector(table.c.data, state).op("@@")(_pg_query(state, bound))
    matching: sa.Select[Any] = (
        sa.select(sa.literal_column("rowid")).select_from(sa.table(state.index)).where(_fts_match(state, bound))
    )
    return _rowid(table).in_(matching)


def rank(schema: Any, text: str, dialect: str, parameter: Any = None) -> sa.ColumnElement:
    """How well a document matches (higher is better; order by it descending, then by id). Only
    meaningful beside :func:`condition` with the same words."""
    state = state_of(schema)
    value = query_value(schema, text, dialect)
    if value is None:
        return sa.literal(0)
    bound = parameter if parameter is not None else sa.bindparam(PARAMETER, value)
    table = schema.table
    if dialect == "postgresql":
        return sa.func.ts_rank(_pg_vector(table.c.data, state), _pg_query(state, bound))
    # FTS5's rank is bm25(), lower for better matches.
    fts = sa.table(state.index, sa.column("rowid"))
    score: sa.Select[Any] = sa.select(-sa.literal_column("rank")).select_from(fts).where(_fts_match(state, bound))
    return score.where(fts.c.rowid == _rowid(table)).scalar_subquery()


# ---- live subscriptions: one document against the words --------------------------------------------


def matcher(schema: Any, text: str, dialect: str) -> Callable[[dict[str, Any]], bool]:
    """``doc → bool`` agreeing with :func:`condition`: PostgreSQL evaluates the same expression over the
    document (one statement, no table); SQLite runs the same FTS5 tokenizer on a private in-memory table."""
    state = state_of(schema)
    value = query_value(schema, text, dialect)
    if value is None:
        return lambda _doc: False
    if dialect == "postgresql":
        return functools.partial(_pg_matches, state, value)
    return functools.partial(_fts5_matches, state, value)


def _pg_matches(state: State, value: str, doc: dict[str, Any]) -> bool:
    data = json.dumps({name: doc[name] for name in state.fields if name in doc})
    with contextlib.closing(reads.provider().open()) as connection:  # given back at once, as live_access does
        return bool(connection.execute(_pg_probe(state), {"data": data, PARAMETER: value}).scalar())


@functools.lru_cache(maxsize=256)
def _pg_probe(state: State) -> sa.Select:
    data = sa.cast(sa.bindparam("data", type_=sa.Text), JSONB)
    return sa.select(_pg_vector(data, state).op("@@")(_pg_query(state, sa.bindparam(PARAMETER, type_=sa.Text))))


_probes = threading.local()


def _fts5_matches(state: State, value: str, doc: dict[str, Any]) -> bool:
    connection = getattr(_probes, "connection", None)
    if connection is None:
        connection = _probes.connection = sqlite3.connect(":memory:", check_same_thread=False)
    tokenizer = _tokenizer(state.language)
    table = f"probe_{len(state.fields)}_{'porter' if 'porter' in tokenizer else 'plain'}"
    columns = ", ".join(f"c{i}" for i in range(len(state.fields)))
    connection.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5({columns}, tokenize = '{tokenizer}')")
    texts = [_text_value(doc.get(name)) for name in state.fields]
    try:
        connection.execute(f"INSERT INTO {table} (rowid, {columns}) VALUES (1, {', '.join('?' * len(texts))})", texts)
        return connection.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", (value,)).fetchone()[0] > 0
    finally:
        connection.execute(f"DELETE FROM {table}")


def _text_value(value: Any) -> str | None:
    """A field's text as the SQLite triggers index it: a string, or an array's strings joined by spaces."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [item for item in value if isinstance(item, str)]
        return " ".join(texts) if texts else None
    return None


# ---- DDL ---------------------------------------------------------------------------------------------


def _tokenizer(lang: str) -> str:
    return "porter unicode61 remove_diacritics 2" if lang == "english" else "unicode61 remove_diacritics 2"


def _sqlite_text(row: str, name: str) -> str:
    """SQL text of one field's searchable text in ``row`` (``new``, ``old`` or a table name); see _text_value."""
    path = f"'$.{name}'"
    return (
        f"CASE json_type({row}.data, {path}) WHEN 'text' THEN json_extract({row}.data, {path}) "
        f"WHEN 'array' THEN (SELECT group_concat(value, ' ') FROM json_each({row}.data, {path}) "
        "WHERE type = 'text') END"
    )


def create(connection: Connection, table: str, state: State | None, concurrently: bool = False) -> None:
    """Build the search structures of ``state`` on ``table`` (a new or restored table: no concurrency)."""
    if state is None:
        return
    if connection.dialect.name == "postgresql":
        connection.exec_driver_sql(_pg_index_sql(table, state, concurrently))
        return
    columns = [f"c_{name}" for name in state.fields]
    connection.exec_driver_sql(
        f'CREATE VIRTUAL TABLE "{state.index}" USING fts5({", ".join(columns)}, '
        f"tokenize = '{_tokenizer(state.language)}')"
    )
    names = ", ".join(["rowid", *columns])

    def values(row: str) -> str:
        return ", ".join([f"{row}.rowid", *(_sqlite_text(row, name) for name in state.fields)])

    insert = f'INSERT INTO "{state.index}" ({names}) VALUES ({values("new")});'
    delete = f'DELETE FROM "{state.index}" WHERE rowid = old.rowid;'
    for suffix, when, body in (
        ("ai", "AFTER INSERT", insert),
        ("ad", "AFTER DELETE", delete),
        ("au", "AFTER UPDATE", delete + " " + insert),
    ):
        connection.exec_driver_sql(
            f'CREATE TRIGGER "{state.index}_{suffix}" {when} ON "{table}" FOR EACH ROW BEGIN {body} END'
        )
    connection.exec_driver_sql(f'INSERT INTO "{state.index}" ({names}) SELECT {values(table)} FROM "{table}"')


def drop(connection: Connection, state: State | None) -> None:
    """Remove what :func:`create` made (SQLite: its triggers go with the FTS5 table's; PostgreSQL: the index)."""
    if state is None:
        return
    if connection.dialect.name == "postgresql":
        connection.exec_driver_sql(f'DROP INDEX IF EXISTS "{state.index}"')
        return
    for suffix in ("ai", "ad", "au"):
        connection.exec_driver_sql(f'DROP TRIGGER IF EXISTS "{state.index}_{suffix}"')
    connection.exec_driver_sql(f'DROP TABLE IF EXISTS "{state.index}"')


def _pg_index_sql(table: str, state: State, concurrently: bool) -> str:
    expression = _pg_vector(sa.column("data"), state).compile(
        dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}
    )
    how = "CONCURRENTLY IF NOT EXISTS " if concurrently else ""
    return f'CREATE INDEX {how}"{state.index}" ON "{table}" USING gin (({expression}))'


def sync(connection: Connection, table: str, current: Any, wanted: State | None) -> bool:
    """In the schema change's transaction: make the search structures match ``wanted``. SQLite rebuilds the
    FTS5 table here (its one writer waits anyway); PostgreSQL leaves the index to :func:`build_pending`
    after the commit. Returns True when an index is left to build."""
    have = State.of(current)
    if have == wanted:
        return False
    if connection.dialect.name == "postgresql":
        return wanted is not None or have is not None
    drop(connection, have)
    create(connection, table, wanted)
    return False


def build_pending(
    engine: sa.Engine, table: str, wanted: State | None, current: Callable[[Connection], State | None]
) -> None:
    """After a committed schema change (PostgreSQL): build ``wanted``'s index with ``CREATE INDEX
    CONCURRENTLY`` and drop the table's other search indexes the same way, so writes go on meanwhile.
    ``current()`` reads the schema's search state again afterwards: a change that overtook this one keeps
    its own index only. A failed or interrupted build leaves searches correct (they evaluate the
    expression without the index) and is redone at the schema's next change."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        if connection.exec_driver_sql(f"SELECT to_regclass('\"{table}\"')").scalar() is None:
            return  # not committed (a test's rolled-back transaction) or dropped meanwhile
        if wanted is not None:
            valid = connection.exec_driver_sql(
                "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = %s",
                (wanted.index,),
            ).scalar()
            if valid is False:  # an interrupted concurrent build leaves an invalid index behind
                connection.exec_driver_sql(f'DROP INDEX CONCURRENTLY IF EXISTS "{wanted.index}"')
            connection.exec_driver_sql(_pg_index_sql(table, wanted, concurrently=True))
        keep = current(connection)
        stale = connection.exec_driver_sql(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = to_regclass(%s) AND c.relname LIKE 'dbfts\\_%%'",
            (f'"{table}"',),
        ).scalars()
        for name in list(stale):
            if keep is None or name != keep.index:
                connection.exec_driver_sql(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')
