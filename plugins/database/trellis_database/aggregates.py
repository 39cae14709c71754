"""Aggregation: ``GET /database/<Schema>/aggregate`` and GraphQL ``<Schema>__aggregate`` (``docs/database.md``,
"Aggregation").

One SQL statement per request: the list's filters and ``where``, AND the caller's read predicate, grouped by
the typed columns of the group fields, with ``count(*) OVER ()`` for the number of groups before ``limit``
(one round trip). Like the list, the statement is built once per *shape* (filters, groups, operations, sort,
access definitions) and cached on the compiled schema; a request only binds its values.

Decisions (docs/database.md, "Aggregation"):
- groups are made of single-valued fields (their typed columns) and ``_id``/``createdAt``/``updatedAt``; an
  array or JSON field is a 400 (grouping by an element would count a document in several groups, so the
  group counts would no longer add up to the documents);
- no ``groupBy`` is one group over every matching document (``key`` is ``{}``);
- a Date is bucketed in UTC by its calendar day: ``day``, ``week`` (starting Monday), ``month``, ``year``; a
  bucket is the ISO form of its first instant (``2026-11-23T00:00:00.000000Z``), the same on both databases;
- documents without a value of the field's type form the group whose key value is ``null``;
- ``sum`` of a group without values is 0, ``avg``/``min``/``max`` are ``null``;
- without ``sort``, groups come in the order of their keys (ascending; ``null`` first, as lists sort).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from werkzeug.datastructures import MultiDict

from trellis import reads
from trellis.access import Acting
from trellis.errors import APIError

from . import document_access
from . import search as full_text
from .documents import _stamp, _statement, dialect
from .fields import Field, FieldError, coerce_query_value
from .query import Compiler, Group, parse_filters, parse_where, query_error
from .registry import CompiledSchema

OPERATIONS = ("sum", "avg", "min", "max")
BUCKETS = ("day", "week", "month", "year")
PARAMS = frozenset({"groupBy", "count", *OPERATIONS, "sort", "limit", "scope", "where", "search"})
DEFAULT_LIMIT, MAX_LIMIT = 100, 1000
MAX_GROUP_FIELDS = 5
MAX_OPERATION_FIELDS = 20  # per operation
MAX_SORT_KEYS = 5
TIMESTAMPS = ("createdAt", "updatedAt")  # server columns (timestamps), not text in ``data``


@dataclass(frozen=True)
class Spec:
    """What an aggregate computes, checked against the schema; hashable (part of the statement's cache key).

    ``groups``: ``(field, bucket or None)``; ``operations``: ``(op, fields)``; ``sort``: ``(what, descending)``
    with ``what`` ``("count",)``, ``("key", field)`` or ``(op, field)``."""

    groups: tuple[tuple[str, str | None], ...]
    count: bool
    operations: tuple[tuple[str, tuple[str, ...]], ...]
    sort: tuple[tuple[tuple[str, ...], bool], ...]


# ---- checking what the client asks -------------------------------------------------------------------


def _names(value: str | list[str] | None, key: str, most: int) -> list[str]:
    """``a,b`` (or a list of such; an empty one names none) → names (each at most once, at most ``most``)."""
    parts = value if isinstance(value, list) else ([] if value is None else [value])
    names: list[str] = []
    for part in parts:
        if not isinstance(part, str):
            raise query_error(f"{key} takes field names", key)
        if part == "":  # `groupBy=` as no groupBy: one group
            continue
        for name in part.split(","):
            name = name.strip()
            if not name:
                raise query_error(f"{key} takes comma-separated field names", key)
            if name in names:
                raise query_error(f"{key} names {name} twice", key)
            names.append(name)
    if len(names) > most:
        raise query_error(f"{key} takes at most {most} fields", key)
    return names


def make_spec(
    schema: CompiledSchema,
    group_by: str | list[str] | None,
    count: bool,
    operations: dict[str, str | list[str] | None],
    sort: str | None,
) -> Spec:
    """The checked :class:`Spec` of a request (400 naming the parameter for anything that does not fit)."""
    compiler = Compiler(schema, dialect())
    groups: list[tuple[str, str | None]] = []
    for item in _names(group_by, "groupBy", MAX_GROUP_FIELDS):
        name, _, bucket = item.partition(":")
        field, column = compiler.field(name, "groupBy")
        if column is None:
            kind = "an array" if field.array else f"{field.type}"
            raise query_error(f"groupBy takes single-valued fields; {name} is {kind}", "groupBy")
        if bucket:
            if bucket not in BUCKETS:
                raise query_error(f"Unknown date bucket {bucket!r}; use one of {', '.join(BUCKETS)}", "groupBy")
            if field.type != "Date":
                raise query_error(f"Only Date fields take a bucket; {name} is {field.type}", "groupBy")
        if any(name == seen for seen, _ in groups):
            raise query_error(f"groupBy names {name} twice", "groupBy")
        groups.append((name, bucket or None))
    checked: list[tuple[str, tuple[str, ...]]] = []
    for op in OPERATIONS:
        names = _names(operations.get(op), op, MAX_OPERATION_FIELDS)
        for name in names:
            _operand(compiler, op, name, op)
        if names:
            checked.append((op, tuple(names)))
    return Spec(tuple(groups), count, tuple(checked), _sort(compiler, [name for name, _ in groups], sort))


def _operand(compiler: Compiler, op: str, name: str, key: str) -> Field:
    field, column = compiler.field(name, key)
    allowed = ("Number",) if op in ("sum", "avg") else ("Number", "Date")
    if column is None or field.type not in allowed:
        kind = "an array" if field.array else field.type
        wanted = "Number" if op in ("sum", "avg") else "Number or Date"
        raise query_error(f"{op} takes single-valued {wanted} fields; {name} is {kind}", key)
    return field


def _sort(compiler: Compiler, grouped: list[str], sort: str | None) -> tuple[tuple[tuple[str, ...], bool], ...]:
    if sort is None or sort == "":
        return ()
    keys = [key.strip() for key in sort.split(",")]
    if not all(keys) or len(keys) > MAX_SORT_KEYS:
        raise query_error(f"sort takes 1 to {MAX_SORT_KEYS} comma-separated keys, '-' for descending", "sort")
    out: list[tuple[tuple[str, ...], bool]] = []
    for key in keys:
        descending = key.startswith("-")
        what = key[1:] if descending else key
        op, dot, name = what.partition(".")
        if what == "count":
            out.append((("count",), descending))
        elif dot and op in OPERATIONS:
            _operand(compiler, op, name, "sort")
            out.append(((op, name), descending))
        elif what in grouped:
            out.append((("key", what), descending))
        else:
            raise query_error(
                f"Cannot sort by {what!r}: use count, a groupBy field or <op>.<field> (sum.price), '-' for descending",
                "sort",
            )
    return tuple(out)


def parse_limit(raw: Any) -> int:
    if raw is None or raw == "":
        return DEFAULT_LIMIT
    try:
        limit = int(raw)
    except (TypeError, ValueError):
        raise query_error("limit is a whole number of groups", "limit") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise query_error(f"limit takes 1 to {MAX_LIMIT} groups", "limit")
    return limit


def _flag(raw: str | None, key: str) -> bool:
    if raw is None:
        return False
    try:
        return bool(coerce_query_value("Boolean", raw))
    except FieldError:
        raise query_error(f"{key} is true or false", key) from None


def from_query(schema: CompiledSchema, args: MultiDict) -> tuple[Spec, Any, int]:
    """``(spec, condition tree, limit)`` of the REST route's query string: the list's field filters (every
    parameter that is not one of :data:`PARAMS`) and ``where`` (the REST operators as JSON) together."""
    for name in PARAMS - {"groupBy", *OPERATIONS}:
        if len(args.getlist(name)) > 1:
            raise query_error(f"{name} is given more than once", name)
    spec = make_spec(
        schema,
        args.getlist("groupBy"),
        _flag(args.get("count"), "count"),
        {op: args.getlist(op) for op in OPERATIONS},
        args.get("sort"),
    )
    conditions: list[Any] = parse_filters(args, PARAMS)
    if args.get("where"):
        try:
            where = json.loads(args["where"])
        except (ValueError, RecursionError):
            raise query_error("where is a JSON object of field conditions", "where") from None
        conditions.append(parse_where(where))
    return spec, Group("and", tuple(conditions)), parse_limit(args.get("limit"))


# ---- SQL -------------------------------------------------------------------------------------------------


def _text(value: str) -> sa.ColumnElement[Any]:
    """A constant as SQL text, not a parameter: the same expression appears in the select list and in
    GROUP BY, and PostgreSQL matches them only when they are written alike."""
    return sa.literal_column(f"'{value}'")


def _number(value: int) -> sa.ColumnElement[Any]:
    return sa.literal_column(str(value))


_MIDNIGHT = "T00:00:00.000000Z"


def _valid_day(column: sa.ColumnElement[Any], pg: bool) -> sa.ColumnElement[bool]:
    """A Date field's text starts with a calendar-like day (a value written before a type change may not):
    digits, month 01-12, day 01-31, year from 0001. The same test on both databases."""
    part = _substr_of(column)
    digits = (
        column.op("~")(_text("^[0-9]{4}-[0-9]{2}-[0-9]{2}"))
        if pg
        else column.op("GLOB")(_text("[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*"))
    )
    return sa.and_(
        digits,
        part(6, 2).between(_text("01"), _text("12")),
        part(9, 2).between(_text("01"), _text("31")),
        part(1, 4) != _text("0000"),
    )


def _substr_of(column: sa.ColumnElement[Any]) -> Callable[[int, int], sa.ColumnElement[Any]]:
    """``part(start, length)``: ``substr(column, start, length)`` with constants as SQL text (see :func:`_text`)."""
    return lambda start, length: sa.func.substr(column, _number(start), _number(length))


def _day(field: Field, column: sa.ColumnElement[Any], pg: bool) -> sa.ColumnElement[Any]:
    """The UTC calendar day of a value: a ``date`` on PostgreSQL, ``YYYY-MM-DD`` text on SQLite; NULL when
    there is none. A day past its month's end (``02-30``) rolls over into the next month on both."""
    if field.name in TIMESTAMPS:
        if pg:
            return sa.cast(sa.func.timezone(_text("UTC"), column), sa.Date)
        return sa.func.date(column)  # stored as UTC text by SQLAlchemy
    part = _substr_of(column)
    if pg:
        first = sa.func.make_date(
            sa.cast(part(1, 4), sa.Integer), sa.cast(part(6, 2), sa.Integer), _number(1), type_=sa.Date
        )
        day: sa.ColumnElement[Any] = first.op("+")(sa.cast(part(9, 2), sa.Integer).op("-")(_number(1)))
    else:
        shift = _text("+").op("||")(sa.cast(part(9, 2), sa.Integer).op("-")(_number(1))).op("||")(_text(" days"))
        day = sa.func.date(part(1, 7).op("||")(_text("-01")), shift)
    return sa.case((_valid_day(column, pg), day))


def _bucket(field: Field, column: sa.ColumnElement[Any], bucket: str, pg: bool) -> sa.ColumnElement[Any]:
    """The bucket of a Date value as the ISO text of its first instant (UTC), or NULL."""
    day = _day(field, column, pg)
    if pg:
        if bucket == "week":  # ISO day of the week: Monday is 1
            day = day.op("-")(sa.cast(sa.extract("isodow", day), sa.Integer).op("-")(_number(1)))
        pattern = {"day": "YYYY-MM-DD", "week": "YYYY-MM-DD", "month": 'YYYY-MM-"01"', "year": 'YYYY-"01-01"'}[bucket]
        start: sa.ColumnElement[Any] = sa.func.to_char(day, _text(pattern))
    elif bucket == "week":  # %w: Sunday is 0, so (w + 6) % 7 days back is the Monday
        back = sa.cast(sa.func.strftime(_text("%w"), day), sa.Integer).op("+")(_number(6)).op("%")(_number(7))
        start = sa.func.date(day, _text("-").op("||")(back).op("||")(_text(" days")))
    elif bucket == "day":
        start = day
    else:
        start = sa.func.strftime(_text("%Y-%m-01" if bucket == "month" else "%Y-01-01"), day)
    return start.op("||")(_text(_MIDNIGHT))


def _operation(op: str, column: sa.ColumnElement[Any], pg: bool) -> sa.ColumnElement[Any]:
    if op == "sum":
        # SQLite's sum() fails on a 64-bit overflow; total() adds as floats (and is 0 without values).
        return sa.func.coalesce(sa.func.sum(column), _number(0)) if pg else sa.func.total(column)
    functions: dict[str, Callable[[sa.ColumnElement[Any]], sa.ColumnElement[Any]]] = {
        "avg": sa.func.avg,
        "min": sa.func.min,
        "max": sa.func.max,
    }
    return functions[op](column)


def readable(
    compiler: Compiler, shape: Any, schema: CompiledSchema, acting: Acting | None, search: str | None = None
) -> sa.ColumnElement[bool] | None:
    """The documents an aggregate reads: the filters and ``where`` (one prepared shape) AND the words of
    ``search`` (bound as the ``search`` parameter, as on the list) AND what ``acting`` may read (the list's
    predicate). The one place where conditions meet."""
    parts = [compiler.build(shape)]
    if search is not None:
        parameter = sa.bindparam(full_text.PARAMETER, type_=sa.String)
        parts.append(full_text.condition(schema, search, "postgresql" if compiler.pg else "sqlite", parameter))
    if acting is not None:
        parts.append(document_access.read_condition(schema, acting))
    present = [part for part in parts if part is not None]
    return sa.and_(*present) if present else None


def _build(
    compiler: Compiler, shape: Any, schema: CompiledSchema, spec: Spec, acting: Acting | None, search: str | None
) -> sa.Select:
    pg = compiler.pg
    keys: dict[str, sa.ColumnElement[Any]] = {}
    for name, bucket in spec.groups:
        field, column = compiler.column(name)
        keys[name] = column if bucket is None else _bucket(field, column, bucket, pg)
    results: dict[tuple[str, ...], sa.ColumnElement[Any]] = {("count",): sa.func.count()}
    for op, names in spec.operations:
        for name in names:
            results[(op, name)] = _operation(op, compiler.column(name)[1], pg)
    for what, _ in spec.sort:
        if what[0] in OPERATIONS and what not in results:
            results[what] = _operation(what[0], compiler.column(what[1])[1], pg)
    labelled_keys = [expression.label(f"k{index}") for index, expression in enumerate(keys.values())]
    labelled = {what: expression.label(f"r{index}") for index, (what, expression) in enumerate(results.items())}
    statement = sa.select(*labelled_keys, *labelled.values(), sa.func.count().over().label("groups"))
    statement = statement.select_from(schema.documents_table)  # `count=true` alone names no column of it
    condition = readable(compiler, shape, schema, acting, search)
    if condition is not None:
        statement = statement.where(condition)
    if keys:
        statement = statement.group_by(*keys.values())
    order: list[sa.ColumnElement[Any]] = []
    key_labels = dict(zip(keys, labelled_keys, strict=True))
    for what, descending in spec.sort:
        target = key_labels[what[1]] if what[0] == "key" else labelled[what]
        order.append(_direction(target, descending, pg))
    order += [_direction(label, False, pg) for label in labelled_keys]  # ties (and no sort): by the keys
    return statement.order_by(*order).limit(sa.bindparam("limit"))


def _direction(label: sa.Label[Any], descending: bool, pg: bool) -> sa.ColumnElement[Any]:
    """As lists sort: missing values first when ascending, last when descending (SQLite's own order)."""
    clause = label.desc() if descending else label.asc()
    if pg:
        clause = clause.nulls_last() if descending else clause.nulls_first()
    return clause


# ---- running and shaping the answer -------------------------------------------------------------------


def aggregate(
    schema: CompiledSchema,
    spec: Spec,
    where: Any = None,
    limit: int = DEFAULT_LIMIT,
    acting: Acting | None = None,
    search: str | None = None,
) -> dict[str, Any]:
    """``{groups: [{key, count?, sum?, avg?, min?, max?}], count: <groups before limit>}``: one statement.
    ``search``: the list's full-text words (400 on a schema without searchable fields); words that leave
    nothing to look for match no document."""
    dialect_name = dialect()
    compiler = Compiler(schema, dialect_name)
    shape, values = compiler.prepare(where)
    access_key = None if acting is None else document_access.statement_key(schema)
    searched = None if search is None else full_text.query_value(schema, search, dialect_name)
    # "nothing to look for" builds `false` into the statement (no parameter), so it is a shape of its own
    searching = None if search is None else ("words" if searched is not None else "nothing")
    statement = _statement(
        schema,
        ("aggregate", dialect_name, shape, spec, access_key, searching),
        lambda: _build(compiler, shape, schema, spec, acting, search),
    )
    params: dict[str, Any] = {f"p{index}": value for index, value in enumerate(values)}
    if searched is not None:
        params[full_text.PARAMETER] = searched
    if acting is not None:
        params.update(acting.parameters())
    params["limit"] = limit
    rows = reads.reading(lambda connection: connection.execute(statement, params).all())
    return {"groups": [_group(compiler, spec, row) for row in rows], "count": rows[0][-1] if rows else 0}


def _group(compiler: Compiler, spec: Spec, row: Any) -> dict[str, Any]:
    width = len(spec.groups)
    group: dict[str, Any] = {
        "key": {name: _value(compiler, name, row[index]) for index, (name, _) in enumerate(spec.groups)}
    }
    if spec.count:
        group["count"] = row[width]
    index = width + 1
    for op, names in spec.operations:
        group[op] = {}
        for name in names:
            group[op][name] = _value(compiler, name, row[index], op)
            index += 1
    return group


def _value(compiler: Compiler, name: str, value: Any, op: str = "key") -> Any:
    """A result as documents show it: numbers as JSON numbers (whole ones as integers, so both databases
    answer alike), timestamps in the documents' ISO form; a bucket is already text."""
    if value is None:
        return None
    field, _ = compiler.field(name)
    if field.type == "Number" or op in ("sum", "avg"):
        number = float(value)
        if not math.isfinite(number):
            raise APIError(400, f"The {op} of {name} is beyond the range of a 64-bit float", {op: [name]})
        return int(number) if number.is_integer() and abs(number) < 2**53 else number
    if name in TIMESTAMPS:
        return _stamp(value)  # a datetime; a bucket is text already (and stays as it is)
    return value
