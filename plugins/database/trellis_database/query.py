"""The query language: conditions, sort, select and populate → SQLAlchemy expressions.

The REST list route, GraphQL ``where`` and custom endpoints all build the same tree (``Condition``,
``Group``) and compile it here, so the three agree. Values are always bound parameters; identifiers
come only from validated schema field names.

Semantics (the same on SQLite and PostgreSQL):
- a single-valued field compares through its typed generated column (see ``tables.py``); a document
  whose value is missing or of another type never matches a comparison and sorts as missing;
- ``ne``/``nin`` also match documents without the field (as MongoDB does);
- ``contains`` on text is a case-insensitive substring; on an array it means "has this element";
- on an array, ``eq``/``in`` mean "has this element / one of these";
- ascending sorts put missing values first, descending last; ``_id`` breaks ties.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from werkzeug.datastructures import MultiDict

from trellis.errors import APIError, bad_request
from trellis.fields import MAX_ITEMS

from .fields import Field, FieldError, coerce_query_value, parse_datetime
from .registry import CompiledSchema

OPERATORS = ("eq", "ne", "lt", "lte", "gt", "gte", "in", "nin", "contains", "exists")
COMPARISONS = {"lt", "lte", "gt", "gte"}
LIST_PARAMS = frozenset({"skip", "limit", "sort", "select", "populate", "count", "scope", "search"})
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


def parse_filters(args: MultiDict, reserved: frozenset[str] = LIST_PARAMS) -> list[Condition]:
    """Filters of a query string: every parameter but the route's own (``reserved``; the list's are
    skip/limit/sort/select/populate/count/scope).

    ``price[$lt]=10``; ``price<10`` (werkzeug hands it over as the key ``price<10`` with an empty
    value); ``price<=10`` arrives as key ``price<`` with value ``10``.
    """
    conditions: list[Condition] = []
    for key, values in args.lists():
        if key in reserved:
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
    split = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)([<>])(.*)$", key, re.DOTALL)
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


def _listed(value: Any, key: str) -> list[Any]:
    """The values of ``$in``/``$nin``, at most MAX_ITEMS of them (each is bound in SQL), counted before any
    is converted."""
    items = split_list(value)
    if len(items) > MAX_ITEMS:
        raise query_error(f"$in and $nin take at most {MAX_ITEMS} values", key)
    return items


_LOGIC = {"$and": "and", "$or": "or", "AND": "and", "OR": "or"}
MAX_WHERE_DEPTH = 8


def parse_where(where: Any, key: str = "where") -> Group:
    """The REST operators as JSON (live subscriptions): ``{"price": {"$lt": 10}, "title": "x"}``, with
    ``$and``/``$or`` lists of such objects. Fields, operators and values are checked by ``prepare``."""
    counted = [0]
    return _parse_where(where, key, counted, 0)


def _parse_where(where: Any, key: str, counted: list[int], depth: int) -> Group:
    if where is None:
        return Group("and", ())
    if not isinstance(where, dict):
        raise query_error("where must be an object of field conditions", key)
    if depth > MAX_WHERE_DEPTH:
        raise query_error(f"where nests $and/$or at most {MAX_WHERE_DEPTH} deep", key)
    items: list[Any] = []
    for name, spec in where.items():
        if name in _LOGIC:
            if not isinstance(spec, list) or not all(isinstance(item, dict) for item in spec):
                raise query_error(f"{name} takes a list of objects", f"{key}.{name}")
            parts = tuple(_parse_where(item, f"{key}.{name}", counted, depth + 1) for item in spec)
            items.append(Group(_LOGIC[name], parts))
            continue
        if not isinstance(name, str) or not _FIELD.match(name):
            raise query_error(f"Unknown field {name!r}", key)
        if isinstance(spec, dict) and spec and all(isinstance(op, str) and op.startswith("$") for op in spec):
            items += [Condition(name, op[1:].lower(), value) for op, value in spec.items()]
        else:
            items.append(Condition(name, "eq", spec))
        counted[0] += len(spec) if isinstance(spec, dict) else 1
        if counted[0] > MAX_CONDITIONS:
            raise query_error(f"At most {MAX_CONDITIONS} conditions", key)
    return Group("and", tuple(items))


# ---- compiling ---------------------------------------------------------------------------------------


class Compiler:
    """Compiles conditions and sorts for one schema on one database dialect."""

    def __init__(self, schema: CompiledSchema, dialect: str) -> None:
        self.schema = schema
        self.pg = dialect == "postgresql"

    @property
    def table(self) -> sa.Table:
        table = self.schema.table
        if table is None:  # the documents live in another module: there is no table to query here
            raise LookupError(f"schema {self.schema.name} has no documents table in this module")
        return table

    # fields

    def field(self, name: str, key: str | None = None) -> tuple[Field, sa.ColumnElement | None]:
        if name in SPECIAL_FIELDS:
            special, column_name = SPECIAL_FIELDS[name]
            return special, self.table.c[column_name]
        field = self.schema.fields.get(name)
        if field is None:
            raise query_error(f"Unknown field {name!r} in schema {self.schema.name}", key or name)
        column = self.table.c[field.column] if field.column and field.column in self.table.c else None
        return field, column

    def column(self, name: str) -> tuple[Field, sa.ColumnElement[Any]]:
        """:meth:`field` for a field the caller checked has a column (grouped, summed, compared)."""
        field, column = self.field(name)
        if column is None:
            raise query_error(f"{name} has no column to group, compute or compare", name)
        return field, column

    def value(self, field: Field, raw: Any, key: str) -> Any:
        try:
            value = coerce_query_value(field.type, raw)
        except FieldError as exc:
            raise query_error(f"{key}: {exc}", key) from None
        if field.name in ("createdAt", "updatedAt"):
            return parse_datetime(value)
        return value

    # conditions: prepare (validate, coerce) → a shape and the values; build the SQL of a shape.
    # The SQL depends only on the shape, so statements are cached per shape and values are bound.

    def prepare(self, node: Any) -> tuple[Any, list[Any]]:
        """``(shape, values)`` of a condition tree; raises 400 for unknown fields, operators, bad values."""
        if isinstance(node, list):
            node = Group("and", tuple(node))
        if node is None or (isinstance(node, Group) and not node.items):
            return None, []
        values: list[Any] = []
        return self._prepare(node, values), values

    def where(self, node: Any) -> sa.ColumnElement | None:
        """The condition with its values bound in place (for one-off statements)."""
        shape, values = self.prepare(node)
        return self.build(shape, values)

    def build(self, shape: Any, values: list[Any] | None = None) -> sa.ColumnElement | None:
        """SQL of ``shape``; parameters are named ``p0``, ``p1``… in the order of ``prepare``'s values."""
        if shape is None:
            return None
        return self._build(shape, iter(range(1 << 30)), values)

    def _prepare(self, node: Any, values: list[Any]) -> Any:
        if isinstance(node, Group):
            return ("group", node.kind, tuple(self._prepare(item, values) for item in node.items))
        cond = node
        key = cond.field if cond.op == "eq" else f"{cond.field}[${cond.op}]"
        if cond.op not in OPERATORS:
            raise query_error(f"Unknown operator {cond.op}", key)
        field, column = self.field(cond.field, key)
        if cond.op == "exists":
            wanted = self.value(Field(name="exists", type="Boolean"), cond.value, key)
            return ("cond", field.name, "exists", bool(wanted))
        if field.array:
            element = Field(name=field.name, type=field.type)
            if field.type == "JSON" or cond.op in COMPARISONS:
                raise query_error(f"{cond.field} is an array: use equality, $contains, $in, $nin, $ne or $exists", key)
            items = _listed(cond.value, key) if cond.op in ("in", "nin") else [cond.value]
            coerced = [self.value(element, item, key) for item in items]
            if self.pg:
                values.extend([item] for item in coerced)  # each one a JSON array for @>
            elif coerced:
                values.append(coerced)
            return ("array", field.name, cond.op, len(coerced))
        if field.type == "JSON" or column is None:
            raise query_error(f"{cond.field} ({field.type}) can only be filtered with $exists", key)
        if cond.op in ("in", "nin"):
            coerced = [self.value(field, item, key) for item in _listed(cond.value, key)]
            if coerced:
                values.append(coerced)
            return ("cond", field.name, cond.op, bool(coerced))
        if cond.op == "contains" and field.type not in ("String", "ObjectId", "Relation"):
            raise query_error(f"$contains needs a text or array field; {cond.field} is {field.type}", key)
        if cond.op in COMPARISONS and field.type == "Boolean":
            raise query_error(f"{cond.field} is Boolean: only equality, $in, $nin and $exists apply", key)
        values.append(self.value(field, cond.value, key))
        return ("cond", field.name, cond.op, None)

    def _param(self, names: Any, values: list[Any] | None, type_: Any = None, expanding: bool = False) -> Any:
        name = f"p{next(names)}"
        if values is None:
            return sa.bindparam(name, type_=type_, expanding=expanding)
        return sa.bindparam(name, values[int(name[1:])], type_=type_, expanding=expanding)

    def _build(self, shape: Any, names: Any, values: list[Any] | None) -> sa.ColumnElement:
        kind = shape[0]
        if kind == "group":
            parts = [self._build(child, names, values) for child in shape[2]]
            if not parts:
                return sa.true() if shape[1] == "and" else sa.false()
            return sa.and_(*parts) if shape[1] == "and" else sa.or_(*parts)
        _, name, op, variant = shape
        field, column = self.field(name)
        if op == "exists":
            present = self._present(field)
            return present if variant else sa.not_(present)
        if kind == "array":
            has = self._array_has(field, variant, names, values)
            return has if op in ("eq", "contains", "in") else sa.not_(has)
        assert column is not None, f"{name} is compared but has no column"  # prepare() admitted scalar fields only
        if op in ("in", "nin"):
            if not variant:
                return sa.false() if op == "in" else sa.true()
            param = self._param(names, values, column.type, expanding=True)
            return column.in_(param) if op == "in" else sa.or_(column.is_(None), column.not_in(param))
        param = self._param(names, values, column.type)
        if op == "contains":
            return self._contains_text(column, param)
        if op == "eq":
            return column == param
        if op == "ne":
            return sa.or_(column.is_(None), column != param)
        return {"lt": column < param, "lte": column <= param, "gt": column > param, "gte": column >= param}[op]

    def _present(self, field: Field) -> sa.ColumnElement:
        if field.name in SPECIAL_FIELDS:
            return sa.true()
        if self.pg:
            return sa.type_coerce(self.table.c.data, JSONB).has_key(sa.literal_column(f"'{field.name}'"))
        return sa.func.json_type(self.table.c.data, sa.literal_column(f"'$.{field.name}'")).is_not(None)

    def _contains_text(self, column: sa.ColumnElement, text: Any) -> sa.ColumnElement:
        if self.pg:
            # The column sorts as "C"; case folding needs the database's own (Unicode-aware) collation.
            return sa.func.strpos(sa.func.lower(sa.collate(column, "default")), sa.func.lower(text)) > 0
        # SQLite's lower() folds ASCII only; trellis_lower is Python's str.lower (registered per connection).
        return sa.func.instr(sa.func.trellis_lower(column), sa.func.trellis_lower(text)) > 0

    def _array_has(self, field: Field, count: int, names: Any, values: list[Any] | None) -> sa.ColumnElement:
        """True when the array holds one of the values; never NULL (so NOT works on missing arrays)."""
        if count == 0:
            return sa.false()
        path: sa.ColumnClause[Any] = (
            sa.literal_column(f"'{field.name}'") if self.pg else sa.literal_column(f"'$.{field.name}'")
        )
        if self.pg:
            node = sa.type_coerce(self.table.c.data, JSONB)[path]
            tests = [
                sa.func.coalesce(node.contains(self._param(names, values, JSONB)), sa.false()) for _ in range(count)
            ]
            return tests[0] if count == 1 else sa.or_(*tests)
        items = sa.func.json_each(self.table.c.data, path).table_valued("value", "type")
        match = items.c.value.in_(self._param(names, values, expanding=True))
        # json_each on a non-array walks the scalar itself; only real arrays count.
        is_array = sa.func.json_type(self.table.c.data, path) == "array"
        return sa.and_(is_array, sa.exists(sa.select(sa.literal(1)).select_from(items).where(match)))

    # evaluating in Python (live subscriptions): the same prepared shape and values as the SQL, so a
    # filter that a list accepts is accepted here, and both answer alike (tests/…/test_database_filters.py)

    def predicate(self, node: Any) -> Callable[[dict[str, Any]], bool]:
        """``doc → bool`` for a condition tree, with the semantics of the SQL (see the module docstring)."""
        shape, values = Compiler(self.schema, "python").prepare(node)  # SQLite's layout of array values
        if shape is None:
            return _always
        return self._evaluator(shape, iter(values))

    def _evaluator(self, shape: Any, values: Iterator[Any]) -> Callable[[dict[str, Any]], bool]:
        kind = shape[0]
        if kind == "group":
            parts = tuple(self._evaluator(child, values) for child in shape[2])
            if shape[1] == "and":
                return lambda doc: all(part(doc) for part in parts)
            return lambda doc: any(part(doc) for part in parts)
        _, name, op, variant = shape
        field, _ = self.field(name)
        if op == "exists":
            present = _always if name in SPECIAL_FIELDS else (lambda doc: name in doc)
            return present if variant else (lambda doc: not present(doc))
        if kind == "array":
            wanted = _typed_items(field.type, next(values)) if variant else ()

            def has(doc: dict[str, Any]) -> bool:
                items = doc.get(name)
                return isinstance(items, list) and any(_typed(field.type, item) in wanted for item in items)

            return has if op in ("eq", "contains", "in") else (lambda doc: not has(doc))
        read = _reader(field, name)
        # createdAt/updatedAt compare as datetimes (prepare parsed the values); the rest as typed JSON.
        typed = _as_is if name in ("createdAt", "updatedAt") else functools.partial(_typed, field.type)
        if op in ("in", "nin"):
            if not variant:
                return _never if op == "in" else _always
            options = frozenset(typed(item) for item in next(values))
            if op == "in":
                return lambda doc: read(doc) in options
            return lambda doc: read(doc) not in options
        wanted = next(values)
        if op == "contains":
            folded = wanted.lower()
            return lambda doc: (value := read(doc)) is not None and folded in value.lower()
        if op == "eq":
            wanted = typed(wanted)
            return lambda doc: read(doc) == wanted
        if op == "ne":
            wanted = typed(wanted)
            return lambda doc: read(doc) != wanted
        compare = _COMPARE[op]
        return lambda doc: (value := read(doc)) is not None and compare(value, wanted)

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


# ---- Python evaluation helpers ---------------------------------------------------------------------

_COMPARE = {"lt": operator.lt, "lte": operator.le, "gt": operator.gt, "gte": operator.ge}


def _always(_doc: dict[str, Any]) -> bool:
    return True


def _never(_doc: dict[str, Any]) -> bool:
    return False


def _typed(kind: str, value: Any) -> Any:
    """A JSON value as the typed column sees it: None when it is not of the field's type (a Number
    column holds no booleans, a text column no numbers). Booleans are tagged so ``True != 1``."""
    if kind == "Number":
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if kind == "Boolean":
        return ("bool", value) if isinstance(value, bool) else None
    return value if isinstance(value, str) else None


def _typed_items(kind: str, items: list[Any]) -> frozenset[Any]:
    return frozenset(_typed(kind, item) for item in items)


def _as_is(value: Any) -> Any:
    return value


def _reader(field: Field, name: str) -> Callable[[dict[str, Any]], Any]:
    """``doc → value`` as the generated column (or server column) holds it."""
    if name in ("createdAt", "updatedAt"):

        def stamp(doc: dict[str, Any]) -> Any:
            text = doc.get(name)
            try:
                return parse_datetime(text) if isinstance(text, str) else None
            except FieldError:
                return None

        return stamp
    if name == "_id":
        return lambda doc: doc.get("_id")
    kind = field.type
    return lambda doc: _typed(kind, doc.get(name))


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
            node = node.setdefault(part, {})
            if field.model == "User" and part == parts[-1]:
                break  # a user populates to its public fields (documents.populate); nothing beyond
            target = snapshot.document_schema(field.model)
            if target is None:
                raise query_error(f"The schema {field.model!r} of {part!r} has no documents", "populate")
            current = target
    return tree
