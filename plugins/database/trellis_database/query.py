"""The query language: conditions, sort, select and populate → SQLAlchemy expressions.

The REST list route, GraphQL ``where`` and custom endpoints all build the same tree (``Condition``,
``Group``) and compile it here, so the three agree. Values are always bound parameters; identifiers
come only from validated schema field names.

Semantics (the same on SQLite and PostgreSQL):
- a single-valued field compares through its typed generated column (see ``storage.py``); a document
  whose value is missing or of another type never matches a comparison and sorts as missing;
- ``ne``/``nin`` also match documents without the field (as MongoDB does);
- ``contains`` on text is a case-insensitive substring; on an array it means "has this element";
- on an array, ``eq``/``in`` mean "has this element / one of these";
- ascending sorts put missing values first, descending last; ``_id`` breaks ties.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterable

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from werkzeug.datastructures import MultiDict

from trellis.errors import APIError, bad_request

from .fields import Field, FieldError, coerce_query_value, parse_datetime
from .registry import CompiledSchema

OPERATORS = ("eq", "ne", "lt", "lte", "gt", "gte", "in", "nin", "contains", "exists")
COMPARISONS = {"lt", "lte", "gt", "gte"}
LIST_PARAMS = frozenset({"skip", "limit", "sort", "select", "populate"})
MAX_POPULATE_DEPTH = 5
MAX_CONDITIONS = 100

# Columns every document has; createdAt/updatedAt compare as dates.
SPECIAL_FIELDS = {
    "_id": (Field(name="_id", type="ObjectId"), "id"),
    "createdAt": (Field(name="createdAt", type="Date"), "created_at"),
    "updatedAt": (Field(name="updatedAt", type="Date"), "updated_at"),
}


@dataclass(frozen=True)
class Condition:
    field: str
    op: str
    value: Any


@dataclass(frozen=True)
class Group:
    kind: str  # "and" | "or"
    items: tuple[Any, ...]


def query_error(message: str, key: str) -> APIError:
    return bad_request(message, {key: [message]})


# ---- REST query string → conditions ---------------------------------------------------------------

_BRACKET = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\[\$?([A-Za-z]+)\]$")
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_filters(args: MultiDict) -> list[Condition]:
    """Filters of the list route's query string (everything but skip/limit/sort/select/populate).

    ``price[$lt]=10``; ``price<10`` (werkzeug hands it over as the key ``price<10`` with an empty
    value); ``price<=10`` arrives as key ``price<`` with value ``10``.
    """
    conditions: list[Condition] = []
    for key, values in args.lists():
        if key in LIST_PARAMS:
            continue
        for value in values:
            conditions.append(_parse_filter(key, value))
            if len(conditions) > MAX_CONDITIONS:
                raise query_error(f"At most {MAX_CONDITIONS} filters", "query")
    return conditions


def _parse_filter(key: str, value: str) -> Condition:
    match = _BRACKET.match(key)
    if match:
        field, op = match.group(1), match.group(2).lower()
        if op not in OPERATORS:
            raise query_error(f"Unknown operator ${op}; use one of {', '.join('$' + o for o in OPERATORS)}", key)
        return Condition(field, op, value)
    split = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)([<>])(.*)$", key, re.S)
    if split:
        field, sign, rest = split.groups()
        if rest == "" and value != "":  # price<=10
            return Condition(field, "lte" if sign == "<" else "gte", value)
        if rest != "" and value == "":  # price<10
            return Condition(field, "lt" if sign == "<" else "gt", rest)
        raise query_error("Write comparisons as field<value, field<=value or field[$lt]=value", key)
    if not _FIELD.match(key):
        raise query_error(f"Unknown query parameter {key!r}", key)
    return Condition(key, "eq", value)


def split_list(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):
        return [] if value == "" else value.split(",")
    return [value]


# ---- compiling ---------------------------------------------------------------------------------------


class Compiler:
    """Compiles conditions and sorts for one schema on one database dialect."""

    def __init__(self, schema: CompiledSchema, dialect: str) -> None:
        self.schema = schema
        self.table = schema.table
        self.pg = dialect == "postgresql"

    # fields

    def field(self, name: str, key: str | None = None) -> tuple[Field, sa.ColumnElement | None]:
        if name in SPECIAL_FIELDS:
            field, column = SPECIAL_FIELDS[name]
            return field, self.table.c[column]
        field = self.schema.fields.get(name)
        if field is None:
            raise query_error(f"Unknown field {name!r} in schema {self.schema.name}", key or name)
        column = self.table.c[field.column] if field.column and field.column in self.table.c else None
        return field, column

    def value(self, field: Field, raw: Any, key: str) -> Any:
        try:
            value = coerce_query_value(field.type, raw)
        except FieldError as exc:
            raise query_error(f"{key}: {exc}", key) from None
        if field.name in ("createdAt", "updatedAt"):
            return parse_datetime(value)
        return value

    # conditions

    def where(self, node: Any) -> sa.ColumnElement | None:
        if node is None:
            return None
        if isinstance(node, list):
            node = Group("and", tuple(node))
        if isinstance(node, Group) and not node.items:
            return None
        return self._node(node)

    def _node(self, node: Any) -> sa.ColumnElement:
        if isinstance(node, Group):
            parts = [self._node(item) for item in node.items]
            if not parts:
                return sa.true() if node.kind == "and" else sa.false()
            return sa.and_(*parts) if node.kind == "and" else sa.or_(*parts)
        return self.condition(node)

    def condition(self, cond: Condition) -> sa.ColumnElement:
        key = cond.field if cond.op == "eq" else f"{cond.field}[${cond.op}]"
        field, column = self.field(cond.field, key)
        if cond.op == "exists":
            wanted = self.value(Field(name="exists", type="Boolean"), cond.value, key)
            present = self._present(field, column)
            return present if wanted else sa.not_(present)
        if field.array:
            return self._array_condition(field, cond, key)
        if field.type == "JSON" or column is None:
            raise query_error(f"{cond.field} ({field.type}) can only be filtered with $exists", key)
        if cond.op in ("in", "nin"):
            values = [self.value(field, item, key) for item in split_list(cond.value)]
            if cond.op == "in":
                return column.in_(values) if values else sa.false()
            return sa.or_(column.is_(None), column.not_in(values)) if values else sa.true()
        if cond.op == "contains":
            if field.type not in ("String", "ObjectId", "Relation"):
                raise query_error(f"$contains needs a text or array field; {cond.field} is {field.type}", key)
            text = self.value(field, cond.value, key)
            return self._contains_text(column, text)
        value = self.value(field, cond.value, key)
        if cond.op == "eq":
            return column == value
        if cond.op == "ne":
            return sa.or_(column.is_(None), column != value)
        if field.type == "Boolean":
            raise query_error(f"{cond.field} is Boolean: only equality, $in, $nin and $exists apply", key)
        return {"lt": column < value, "lte": column <= value, "gt": column > value, "gte": column >= value}[cond.op]

    def _present(self, field: Field, column: sa.ColumnElement | None) -> sa.ColumnElement:
        if field.name in SPECIAL_FIELDS:
            return sa.true()
        if self.pg:
            return sa.type_coerce(self.table.c.data, JSONB).has_key(field.name)
        return sa.func.json_type(self.table.c.data, f"$.{field.name}").is_not(None)

    def _contains_text(self, column: sa.ColumnElement, text: str) -> sa.ColumnElement:
        if self.pg:
            # The column sorts as "C"; case folding needs the database's own (Unicode-aware) collation.
            return sa.func.strpos(sa.func.lower(sa.collate(column, "default")), sa.func.lower(text)) > 0
        # SQLite's lower() folds ASCII only; trellis_lower is Python's str.lower (registered per connection).
        return sa.func.instr(sa.func.trellis_lower(column), sa.func.trellis_lower(text)) > 0

    def _array_condition(self, field: Field, cond: Condition, key: str) -> sa.ColumnElement:
        element = Field(name=field.name, type=field.type)
        if field.type == "JSON" or cond.op in COMPARISONS:
            raise query_error(f"{cond.field} is an array: use equality, $contains, $in, $nin, $ne or $exists", key)
        if cond.op in ("in", "nin"):
            values = [self.value(element, item, key) for item in split_list(cond.value)]
            has_any = self._array_has(field, values) if values else sa.false()
            return has_any if cond.op == "in" else sa.not_(has_any)
        value = self.value(element, cond.value, key)
        has = self._array_has(field, [value])
        return has if cond.op in ("eq", "contains") else sa.not_(has)

    def _array_has(self, field: Field, values: list[Any]) -> sa.ColumnElement:
        """True when the array holds one of ``values``; never NULL (so NOT works on missing arrays)."""
        if self.pg:
            node = sa.type_coerce(self.table.c.data, JSONB)[field.name]
            tests = [sa.func.coalesce(node.contains([value]), sa.false()) for value in values]
            return tests[0] if len(tests) == 1 else sa.or_(*tests)
        items = sa.func.json_each(self.table.c.data, f"$.{field.name}").table_valued("value", "type")
        match = items.c.value == values[0] if len(values) == 1 else items.c.value.in_(values)
        # json_each on a non-array walks the scalar itself; only real arrays count.
        is_array = sa.func.json_type(self.table.c.data, f"$.{field.name}") == "array"
        return sa.and_(is_array, sa.exists(sa.select(sa.literal(1)).select_from(items).where(match)))

    # sorting

    def order_by(self, spec: str | None) -> list[sa.ColumnElement]:
        if not spec:
            return [self.table.c.created_at.asc(), self.table.c.id.asc()]
        keys = [key.strip() for key in spec.split(",") if key.strip()]
        if not keys or len(keys) > 10:
            raise query_error("sort takes 1 to 10 comma-separated fields, '-' for descending", "sort")
        clauses: list[sa.ColumnElement] = []
        descending = False
        for key in keys:
            descending = key.startswith("-")
            name = key.lstrip("-+")
            field, column = self.field(name, "sort")
            if column is None:
                raise query_error(f"Cannot sort by {name} ({'array' if field.array else field.type})", "sort")
            clause = column.desc() if descending else column.asc()
            if self.pg and name not in SPECIAL_FIELDS:
                # Missing values first when ascending, last when descending: one index serves both.
                clause = clause.nulls_last() if descending else clause.nulls_first()
            clauses.append(clause)
            if name == "_id":
                return clauses
        clauses.append(self.table.c.id.desc() if descending else self.table.c.id.asc())
        return clauses


# ---- select and populate -------------------------------------------------------------------------


def parse_select(schema: CompiledSchema, spec: str | Iterable[str] | None) -> frozenset[str] | None:
    if spec is None or spec == "":
        return None
    names = [n.strip() for n in (spec.split(",") if isinstance(spec, str) else spec) if n.strip()]
    for name in names:
        if name not in schema.fields and name not in SPECIAL_FIELDS and name != "__v":
            raise query_error(f"Unknown field {name!r} in select", "select")
    return frozenset(names) | {"_id"}


def parse_populate(snapshot: Any, schema: CompiledSchema, spec: str | Iterable[str] | None) -> dict[str, Any]:
    """``author,author.company`` → ``{"author": {"company": {}}}``, each step a Relation field."""
    tree: dict[str, Any] = {}
    if spec is None or spec == "":
        return tree
    paths = [p.strip() for p in (spec.split(",") if isinstance(spec, str) else spec) if p.strip()]
    for path in paths:
        parts = path.split(".")
        if len(parts) > MAX_POPULATE_DEPTH:
            raise query_error(f"populate goes at most {MAX_POPULATE_DEPTH} levels deep", "populate")
        current, node = schema, tree
        for part in parts:
            field = current.fields.get(part)
            if field is None or field.type != "Relation":
                raise query_error(f"{part!r} is not a Relation field of {current.name}", "populate")
            target = snapshot.document_schema(field.model)
            if target is None:
                raise query_error(f"The schema {field.model!r} of {part!r} has no documents", "populate")
            node = node.setdefault(part, {})
            current = target
    return tree


def json_param(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
