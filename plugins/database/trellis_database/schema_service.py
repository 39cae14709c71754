"""The schema service: create, change, extend and delete schemas, with their tables, in one transaction.

Each write validates against the current snapshot, applies the row change and the DDL in the
request's transaction, bumps the ``database-schemas`` generation last, and commits. Nothing here
reads the registry after the bump (see ``registry.changed``).
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from trellis import access, audit, db
from trellis.db import new_id, utcnow
from trellis.errors import APIError, bad_request, conflict, forbidden, not_found

from . import document_access, tables
from . import search as full_text
from .definitions import (
    DefinitionError,
    check_name,
    default_options,
    extension_fields,
    field_definitions,
    merge_options,
    parse_fields,
)
from .fields import Field, FieldError, check_value, format_datetime
from .models import CustomEndpointRecord, SchemaRecord
from .registry import OWNER, CompiledSchema, Snapshot, changed, compile_record, owned_fields, snapshot


def _invalid(exc: DefinitionError) -> APIError:
    return bad_request("Invalid schema: " + str(exc), exc.errors)


def find(snap: Snapshot, schema_id: str) -> CompiledSchema:
    """A schema by id (or, for convenience, by name)."""
    schema = snap.by_id.get(schema_id) or snap.by_name.get(schema_id)
    if schema is None:
        raise not_found(f"No schema with id {schema_id!r}")
    return schema


def list_schemas(
    snap: Snapshot, enabled: bool | None = None, owner: list[str] | None = None, search: str | None = None
) -> list[CompiledSchema]:
    found = []
    for schema in snap.schemas:
        if enabled is not None and schema.cms_enabled != enabled:
            continue
        if owner and schema.owner_module not in owner:
            continue
        if search and search.lower() not in schema.name.lower():
            continue
        found.append(schema)
    return found


def _check_relations(snap: Snapshot, name: str, fields: dict[str, Field]) -> None:
    errors = {}
    for field in fields.values():
        if (
            field.type == "Relation"
            and field.model != name
            and field.model not in document_access.PRINCIPAL_MODELS
            and snap.document_schema(field.target) is None
        ):
            errors[f"fields.{field.name}"] = [f"model {field.model!r} is not a schema with documents"]
    if errors:
        raise bad_request("A Relation field names an unknown schema", errors)


def _check_access(row: SchemaRecord) -> None:
    """An opted-in schema needs the Authorization module, and its field-backed relations must name
    Relation fields to User or Team and relations its definition has (400, nothing written)."""
    settings = (row.model_options.get("conduit") or {}).get("authorization") or {}
    if not settings.get("enabled") and not settings.get("fields"):
        return
    control = access.control()
    if control is None:
        db.session.rollback()
        raise bad_request(
            "Access control needs the Authorization module (trellis-authorization), which is not installed",
            {"modelOptions.conduit.authorization": ["Not available"]},
        )
    fields = settings.get("fields") or {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in fields.items()):
        db.session.rollback()
        raise bad_request(
            "authorization.fields maps field names to relation names",
            {"modelOptions.conduit.authorization.fields": ["Not a map of names"]},
        )
    errors = {
        f"modelOptions.conduit.authorization.fields.{name}": problems
        for name, problems in control.check_options(document_access.describe(compile_record(row))).items()
    }
    if errors:
        db.session.rollback()  # the table and row this change made so far go too
        raise bad_request("The schema's access settings are not valid", errors)


def _check_unique_name(snap: Snapshot, name: str, own_id: str | None = None) -> None:
    existing = snap.by_name.get(name)
    if existing is not None and existing.id != own_id:
        raise conflict(f"A schema named {name!r} already exists", {"name": ["Already taken"]})


def _flush(row: SchemaRecord) -> None:
    try:
        db.session.flush()
    except IntegrityError:
        db.session.rollback()
        raise conflict(f"A schema named {row.name!r} already exists", {"name": ["Already taken"]}) from None


def _sync(row: SchemaRecord, fields: dict[str, Field], what: str) -> None:
    """Bring the table's generated columns and indexes in line with ``fields``."""
    try:
        columns = tables.sync_columns(
            db.session.connection(), row.storage["table"], row.storage.get("columns") or {}, fields
        )
    except IntegrityError:
        db.session.rollback()
        raise conflict(f"Existing documents break the {what}: a unique field has duplicate values") from None
    row.storage = {**row.storage, "columns": columns}


def _sync_search(row: SchemaRecord, fields: dict[str, Field], options: dict[str, Any]) -> full_text.State | None:
    """Bring the full-text search structures in line with ``fields``/``options`` in this transaction; returns
    the state whose PostgreSQL index is left to :func:`_build_search` after the commit (None: nothing left)."""
    connection = db.session.connection()
    table = row.storage["table"]
    wanted = full_text.desired(table, fields, options, connection.dialect.name)
    pending = full_text.sync(connection, table, row.storage.get("search"), wanted)
    row.storage = {**row.storage, "search": wanted.as_dict() if wanted else None}
    return wanted if pending else None


def _build_search(schema_id: str, table: str | None, pending: full_text.State | None, changed_search: bool) -> None:
    """After the commit (PostgreSQL): build the new index concurrently and drop the old one; writes go on
    meanwhile, and the admin's request answers once the index is there. Runs with the session outside any
    transaction: a concurrent build waits for every older transaction, the caller's own included."""
    if not changed_search or table is None or db.engine().dialect.name != "postgresql":
        return
    records = SchemaRecord.__table__

    def current(connection: sa.Connection) -> full_text.State | None:
        storage = connection.execute(sa.select(records.c.storage).where(records.c.id == schema_id)).scalar()
        return full_text.State.of((storage or {}).get("search"))

    full_text.build_pending(db.engine(), table, pending, current)


def _drop_data(row: SchemaRecord, names: list[str]) -> None:
    """Remove dropped fields from stored documents (like dropping a column)."""
    if not names or not row.storage.get("table"):
        return
    table = tables.make_table(row.storage["table"], {})
    if db.session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import JSONB

        data: sa.ColumnElement[Any] = sa.type_coerce(table.c.data, JSONB).op("-")(
            sa.cast(sa.literal(names), sa.ARRAY(sa.Text))
        )
        db.session.execute(sa.update(table).values(data=sa.type_coerce(data, JSONB)))
    else:
        data = sa.func.json_remove(table.c.data, *[f"$.{name}" for name in names])
        db.session.execute(sa.update(table).values(data=data))


def _constraints(field: Field) -> tuple[Any, ...]:
    """What a stored value must fit, beyond being present."""
    return field.type, field.array, field.length_limit, field.unique


def check_stored_values(schema: CompiledSchema, fields: dict[str, Field]) -> None:
    """Stored documents fit every field whose type, length limit or uniqueness changes, or 409 naming the
    schema and field. A project applies only changes its data survives; the schema route keeps values a
    new type does not fit readable as they are (filters on the field never match them)."""
    changing = {
        name: field
        for name, field in fields.items()
        if name in schema.fields and _constraints(schema.fields[name]) != _constraints(field)
    }
    if not changing or schema.table is None:
        return
    table = schema.table
    seen: dict[str, set[str]] = {name: set() for name, f in changing.items() if f.unique}
    for data in db.session.execute(sa.select(table.c.data).execution_options(yield_per=1000)).scalars():
        document = json.loads(data) if isinstance(data, str) else data
        for name, field in changing.items():
            value = document.get(name)
            if value is None:
                continue
            try:
                check_value(field, value)
            except FieldError as exc:
                raise conflict(
                    f"Schema {schema.name!r}: stored documents have values of {name!r} the new definition refuses "
                    f"({exc}): change or remove them first",
                    {f"fields.{name}": [str(exc)]},
                ) from None
            if name in seen:
                key = json.dumps(value, sort_keys=True)
                if key in seen[name]:
                    raise conflict(
                        f"Schema {schema.name!r}: stored documents share values of {name!r}, which would become unique",
                        {f"fields.{name}": ["Duplicate values are stored"]},
                    )
                seen[name].add(key)


def _was_required(schema: CompiledSchema, name: str) -> bool:
    field = schema.fields.get(name)
    return field is not None and field.required


def _fill_required(row: SchemaRecord, fields: list[Field]) -> None:
    """A field that becomes required: existing documents without a value get its default; without a
    default the change is refused (409), so no stored document breaks the documented response."""
    if not fields or not row.storage.get("table"):
        return
    table = tables.make_table(row.storage["table"], {})
    postgresql = db.session.get_bind().dialect.name == "postgresql"
    for field in fields:
        if postgresql:
            from sqlalchemy.dialects.postgresql import JSONB

            data = sa.type_coerce(table.c.data, JSONB)
            missing = sa.or_(~data.has_key(field.name), data[field.name] == sa.cast(sa.literal("null"), JSONB))
        else:
            kind = sa.func.json_type(table.c.data, f"$.{field.name}")
            missing = sa.or_(kind.is_(None), kind == "null")
        if field.default is None:
            lacking = db.session.execute(sa.select(sa.func.count()).select_from(table).where(missing)).scalar_one()
            if lacking:
                raise conflict(
                    f"{lacking} document(s) have no value for {field.name!r}, which would become "
                    "required: give the field a default (filled in) or fill them first",
                    {f"fields.{field.name}": ["Documents lack a value; add a default"]},
                )
            continue
        if postgresql:
            patch = sa.cast(sa.literal(json.dumps({field.name: field.default})), JSONB)
            db.session.execute(sa.update(table).where(missing).values(data=sa.type_coerce(data.op("||")(patch), JSONB)))
        else:
            value = sa.func.json(sa.literal(json.dumps(field.default)))
            db.session.execute(
                sa.update(table).where(missing).values(data=sa.func.json_set(table.c.data, f"$.{field.name}", value))
            )


def _endpoint_fields(schema_id: str) -> dict[str, set[str]]:
    """Custom endpoint name → schema fields it uses (they must not disappear under it)."""
    used: dict[str, set[str]] = {}
    rows = db.session.execute(sa.select(CustomEndpointRecord).where(CustomEndpointRecord.schema_id == schema_id))
    for endpoint in rows.scalars():
        names = {a.get("schemaField") for a in endpoint.assignments or []}
        names |= _query_fields(endpoint.query)
        used[endpoint.name] = {n for n in names if isinstance(n, str)}
    return used


def _query_fields(node: Any) -> set[str]:
    if not isinstance(node, dict):
        return set()
    names = {node["schemaField"]} if isinstance(node.get("schemaField"), str) else set()
    for key in ("AND", "OR"):
        for child in node.get(key) or []:
            names |= _query_fields(child)
    return names


def _check_endpoints_keep(schema_id: str, fields: dict[str, Field]) -> None:
    for endpoint, names in _endpoint_fields(schema_id).items():
        lost = sorted(n for n in names if n not in fields and n != "_id")
        if lost:
            raise conflict(f"Custom endpoint {endpoint!r} uses {', '.join(lost)}; change or delete it first")


def record(row: SchemaRecord) -> dict[str, Any]:
    return compile_record(row).record()


# ---- writes -----------------------------------------------------------------------------------------


def create(body: dict[str, Any]) -> dict[str, Any]:
    snap = snapshot()
    try:
        name = check_name(body.get("name"))
        fields = parse_fields(body.get("fields"))
        options = merge_options(default_options(), body.get("modelOptions"), body.get("conduitOptions"))
    except DefinitionError as exc:
        raise _invalid(exc) from None
    _check_unique_name(snap, name)
    _check_relations(snap, name, fields)
    now = utcnow()
    row = SchemaRecord(
        id=new_id(),
        name=name,
        owner_module=OWNER,
        fields=field_definitions(fields),
        model_options=options,
        extensions=[],
        storage={},
        version=0,
        created_at=now,
        updated_at=now,
    )
    db.session.add(row)
    _flush(row)
    table = tables.table_name(row.id)
    connection = db.session.connection()
    columns = tables.create_table(connection, table, fields)
    wanted = full_text.desired(table, fields, options, connection.dialect.name)
    full_text.create(connection, table, wanted)  # an empty table: built at once, in this transaction
    row.storage = {"table": table, "columns": columns, "search": wanted.as_dict() if wanted else None}
    _check_access(row)
    out = record(row)
    audit.record("database", "schema.create", row.id, body)
    changed()
    db.session.commit()
    return out


def update(schema_id: str, body: dict[str, Any]) -> dict[str, Any]:
    snap = snapshot()
    schema = find(snap, schema_id)
    if schema.owned and schema.permission("canModify") != "Everything":
        raise forbidden(
            f"{schema.name} belongs to the {schema.owner_module} module; its canModify is "
            f"{schema.permission('canModify')} (extensions: POST …/extensions)"
        )
    if schema.owned and body.get("name", schema.name) != schema.name:
        raise forbidden(f"{schema.name} is named by the {schema.owner_module} module and cannot be renamed")
    if schema.owned and "fields" in body:
        raise forbidden(
            f"The fields of {schema.name} are declared by the {schema.owner_module} module; "
            "add fields through an extension"
        )
    row = _row_for(schema)
    try:
        name = check_name(body["name"]) if "name" in body else row.name
        fields = parse_fields(body["fields"]) if "fields" in body else {n: f for n, f in schema.base_fields.items()}
        options = merge_options(row.model_options, body.get("modelOptions"), body.get("conduitOptions"))
    except DefinitionError as exc:
        raise _invalid(exc) from None
    extension = extension_fields(row.extensions)
    clash = sorted(set(fields) & set(extension))
    if clash:
        raise bad_request(
            "Fields clash with extension fields", {f"fields.{n}": ["Defined by an extension"] for n in clash}
        )
    _check_unique_name(snap, name, own_id=schema.id)
    effective = {**fields, **extension}
    _check_relations(snap, name, effective)
    _check_endpoints_keep(schema.id, effective)
    old_name = row.name
    before = (row.storage or {}).get("search")
    pending = None
    if not schema.owned:
        row.fields = field_definitions(fields)
        _drop_data(row, [n for n in schema.fields if n not in effective])
        _fill_required(row, [f for n, f in effective.items() if f.required and not _was_required(schema, n)])
        _sync(row, effective, "schema change")
        pending = _sync_search(row, effective, options)
    row.name, row.model_options = name, options
    row.version += 1
    row.updated_at = utcnow()
    if name != old_name:
        _rename_relations(snap, old_name, name, schema.id)
        control = access.control()
        if control is not None:
            control.renamed(old_name, name)
    _flush(row)
    if not schema.owned:
        _check_access(row)
    out = record(row) if not schema.owned else _owned_record(schema, row)
    audit.record("database", "schema.update", schema.id, body)
    changed()
    table, after = (row.storage or {}).get("table"), (row.storage or {}).get("search")
    # After the commit that holds the change (a project apply commits several changes at once).
    db.after_commit(lambda: _build_search(schema.id, table, pending, after != before))
    db.session.commit()
    return out


def _rename_relations(snap: Snapshot, old: str, new: str, own_id: str) -> None:
    """Relation fields name their model; follow a rename in every schema that points here."""
    for other in snap.schemas:
        if other.owned:
            continue
        row = db.session.get_one(SchemaRecord, other.id)
        touched = False
        fields = dict(row.fields)
        for name, definition in fields.items():
            if definition.get("model") == old:
                fields[name] = {**definition, "model": new}
                touched = True
        extensions = []
        for extension in row.extensions or []:
            ext_fields = {
                n: ({**d, "model": new} if d.get("model") == old else d)
                for n, d in (extension.get("fields") or {}).items()
            }
            touched |= ext_fields != extension.get("fields")
            extensions.append({**extension, "fields": ext_fields})
        if touched:
            row.fields, row.extensions = fields, extensions
            if other.id != own_id:  # the renamed schema counts its own change once
                row.version += 1
                row.updated_at = utcnow()


def delete(schema_id: str, delete_data: bool) -> str:
    snap = snapshot()
    schema = find(snap, schema_id)
    if schema.owned:
        raise forbidden(f"{schema.name} belongs to the {schema.owner_module} module and cannot be deleted")
    for other in snap.schemas:
        if other.id != schema.id and any(
            f.type == "Relation" and f.model == schema.name for f in other.fields.values()
        ):
            raise conflict(f"Schema {other.name!r} has a Relation to {schema.name!r}; change it first")
    row = db.session.get_one(SchemaRecord, schema.id)
    table = (row.storage or {}).get("table")
    if table:
        count = tables.count_rows(db.session.connection(), table)
        if count and not delete_data:
            raise conflict(f"{schema.name} has {count} documents; add ?deleteData=true to delete them too")
        full_text.drop(db.session.connection(), full_text.State.of(row.storage.get("search")))
        tables.drop_table(db.session.connection(), table)
    db.session.execute(sa.delete(CustomEndpointRecord).where(CustomEndpointRecord.schema_id == schema.id))
    control = access.control()
    if control is not None:
        control.dropped(schema.name)
    db.session.delete(row)
    audit.record("database", "schema.delete", schema.id, {"name": schema.name, "deleteData": delete_data})
    changed()
    db.session.commit()
    return schema.id


def set_extension(schema_id: str, raw_fields: Any) -> dict[str, Any]:
    """Replace the admin's extension of a schema (``{}`` removes it)."""
    snap = snapshot()
    schema = find(snap, schema_id)
    if not schema.extendable:
        raise forbidden(f"{schema.name} cannot be extended (permissions.extendable is false)")
    try:
        fields = parse_fields(raw_fields)
    except DefinitionError as exc:
        raise _invalid(exc) from None
    clash = sorted(set(fields) & set(schema.base_fields))
    if clash:
        raise bad_request(
            "Extension fields clash with the schema's own fields",
            {f"fields.{n}": ["Already a field of the schema"] for n in clash},
        )
    _check_relations(snap, schema.name, fields)
    row = _row_for(schema)
    now = utcnow()
    others = [e for e in row.extensions or [] if e.get("ownerModule") != OWNER]
    mine = next((e for e in row.extensions or [] if e.get("ownerModule") == OWNER), None)
    extensions = list(others)
    if fields:
        created = mine.get("createdAt") if mine else None
        extensions.append(
            {
                "fields": field_definitions(fields),
                "ownerModule": OWNER,
                "createdAt": created or format_datetime(now),
                "updatedAt": format_datetime(now),
            }
        )
    effective = {**schema.base_fields, **extension_fields(extensions)}
    _check_endpoints_keep(schema.id, effective)
    row.extensions = extensions
    before = (row.storage or {}).get("search")
    pending = None
    if row.storage.get("table"):
        _drop_data(row, [n for n in schema.fields if n not in effective])
        _sync(row, effective, "extension")
        pending = _sync_search(row, effective, row.model_options)
    row.version += 1
    row.updated_at = now
    _flush(row)
    out = record(row) if not schema.owned else _owned_record(schema, row)
    audit.record("database", "schema.extension", schema.id, {"fields": raw_fields})
    changed()
    table, after = (row.storage or {}).get("table"), (row.storage or {}).get("search")
    # After the commit that holds the change (a project apply commits several changes at once).
    db.after_commit(lambda: _build_search(schema.id, table, pending, after != before))
    db.session.commit()
    return out


def _row_for(schema: CompiledSchema) -> SchemaRecord:
    """The stored row of a schema; a module-owned schema gets one the first time it is changed."""
    row = db.session.get(SchemaRecord, schema.id)
    if row is not None:
        return row
    now = utcnow()
    row = SchemaRecord(
        id=schema.id,
        name=schema.name,
        owner_module=schema.owner_module,
        fields=schema.raw_fields or {},
        model_options=schema.options,
        extensions=[],
        storage={},
        version=0,
        created_at=now,
        updated_at=now,
    )
    db.session.add(row)
    return row


def _owned_record(schema: CompiledSchema, row: SchemaRecord) -> dict[str, Any]:
    base = owned_fields(schema.raw_fields or {})
    compiled = CompiledSchema(
        id=schema.id,
        name=row.name,
        owner_module=schema.owner_module,
        base_fields=base,
        fields={**base, **extension_fields(row.extensions)},
        options=row.model_options,
        extensions=row.extensions,
        version=row.version,
        created_at=row.created_at,
        updated_at=row.updated_at,
        table=None,
        raw_fields=schema.raw_fields,
    )
    return compiled.record()
