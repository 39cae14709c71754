"""``flask trellis types --lang ts``: the documents of every schema with documents as TypeScript interfaces.

The Database module answers the core's ``trellis_client_types`` hook. Each schema whose documents the
``/database/<Schema>`` routes serve (admins read them all, CMS switches aside) becomes one interface, typed as
``GET /database/<Schema>/{id}`` returns a document (``documents.json_text``): ``_id``, the fields (optional
unless ``required``: a document holds only the fields it was given), ``createdAt``/``updatedAt`` when the
schema keeps timestamps, ``__v``. A Relation field is its id unless the interface's parameter names it as
populated; what a populated value may be follows ``documents.populate`` (a deleted target: null, or left out
of an array; one under access control the reader may not see, and a missing user: the id).
"""

from __future__ import annotations

import json
import re

from trellis.hooks import hookimpl

from .document_access import opted_in
from .fields import Field
from .registry import CompiledSchema, Snapshot, snapshot

# Field types other than Relation → TypeScript (aliases declared in HELPERS).
SCALARS = {
    "String": "string",
    "Number": "number",
    "Boolean": "boolean",
    "Date": "IsoDate",
    "ObjectId": "string",
    "JSON": "Json",
}

HEADER = """\
/**
 * Documents of the Trellis Database module, typed as `GET /database/<Schema>/{id}` returns them.
 *
 * - One interface per schema with documents. A field the schema does not mark required is optional:
 *   a document holds only the fields it was given values for.
 * - `_id` and `__v` (the revision counter) are always there; `createdAt` and `updatedAt` when the
 *   schema keeps timestamps.
 * - Date fields and the timestamps are ISO 8601 text in UTC (`IsoDate`); JSON fields any JSON (`Json`).
 * - A Relation field holds the related document's id. Read with `?populate=`, name the populated fields
 *   in the interface's parameter (schemas with such fields have one), nesting as the dots do:
 *       Task                                    project is the id (a string)
 *       Task<{ project: true }>                 ?populate=project: project is the Project
 *       Task<{ project: { owner: true } }>      ?populate=project,project.owner
 *   A populated Relation whose document was deleted is null (left out of an array). The type adds
 *   `| string` where the id can stay: a target under access control that the reader may not read, and
 *   a Relation to User, which populates to `PublicUser` (a user that is gone stays its id). A Relation
 *   to Team is always the id.
 * - `?select=` returns only some fields: type such a document as `Pick<Task, "_id" | "title">`.
 */"""

HELPERS = """\
/** ISO 8601 date-time text in UTC, e.g. "2024-05-01T12:00:00.000000Z" (`new Date(value)` reads it). */
export type IsoDate = string;

/** A JSON field's value: any JSON but null (a field is never null: null removes it); null may be inside. */
export type Json = string | number | boolean | (Json | null)[] | { [key: string]: Json | null };

/** The Relation fields `?populate=` replaced by their documents: `{ field: true }`, nested for `a,a.b`. */
export type Populate = { [field: string]: true | Populate };

/** Relation field `Field` of a document read with populate tree `P`: `Doc` when `P` names it, else the id. */
export type Rel<P, Field extends string, Doc> = P extends { [K in Field]: unknown } ? Doc : string;

/** The part of populate tree `P` below field `Field` (`{}` when it is just `true`). */
export type Below<P, Field extends string> = P extends { [K in Field]: infer Q extends Populate } ? Q : {};

/** A user as a populated Relation to User shows it: its id and email, nothing else. */
export interface PublicUser {
  _id: string;
  email: string | null;
}"""

HELPER_NAMES = frozenset({"IsoDate", "Json", "Populate", "Rel", "Below", "PublicUser"})
# Names an interface may not have (reserved words, predefined types) or that are better left alone
# (contextual keywords): such a schema's interface is called <Name>Document.
NOT_TYPE_NAMES = frozenset(
    "break case catch class const continue debugger default delete do else enum export extends false finally "
    "for function if import in instanceof new null return super switch this throw true try typeof var void "
    "while with implements interface let package private protected public static yield await any unknown "
    "never object string number boolean symbol bigint undefined type as from of is keyof readonly infer "
    "unique global declare module namespace abstract async get set require asserts out satisfies accessor "
    "override intrinsic using constructor".split()
)
IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")


class ClientTypes:
    """The module's answer to ``trellis_client_types`` (``Module.hooks``)."""

    @hookimpl
    def trellis_client_types(self, lang: str) -> str | None:
        return typescript(snapshot()) if lang == "ts" else None


def typescript(snap: Snapshot) -> str:
    """The declarations of every schema with documents in ``snap``: the header, the helpers, the interfaces."""
    schemas = sorted((s for s in snap.schemas if s.table is not None), key=lambda s: s.name)
    names = type_names([s.name for s in schemas])
    interfaces = [interface(snap, schema, names) for schema in schemas]
    return "\n\n".join([HEADER, HELPERS, *interfaces]) + "\n"


def type_names(schema_names: list[str]) -> dict[str, str]:
    """Schema name → interface name: the same, unless TypeScript or the helpers keep it (``<Name>Document``,
    then ``_`` until no other name has it)."""
    taken = set(schema_names) | HELPER_NAMES
    out: dict[str, str] = {}
    for name in schema_names:
        if name in NOT_TYPE_NAMES or name in HELPER_NAMES:
            renamed = f"{name}Document"
            while renamed in taken:
                renamed += "_"
            taken.add(renamed)
            out[name] = renamed
        else:
            out[name] = name
    return out


def interface(snap: Snapshot, schema: CompiledSchema, names: dict[str, str]) -> str:
    # Only a schema with a Relation that ?populate= fills takes the parameter: an unused one is an error under
    # the compiler's noUnusedParameters.
    parameter = "<P extends Populate = {}>" if populatable(snap, schema) else ""
    lines = [
        f"/** The {schema.name} schema's documents: GET /database/{schema.name}/{{id}}. */",
        f"export interface {names[schema.name]}{parameter} {{",
        "  _id: string;",
    ]
    for name, field in sorted(schema.fields.items()):
        comment = field_comment(field)
        if comment:
            lines.append(f"  /** {comment} */")
        optional = "" if field.required else "?"
        lines.append(f"  {property_name(name)}{optional}: {field_type(snap, field, names)};")
    if schema.timestamps:
        lines += ["  createdAt: IsoDate;", "  updatedAt: IsoDate;"]
    lines += ["  __v: number;", "}"]
    return "\n".join(lines)


def field_type(snap: Snapshot, field: Field, names: dict[str, str]) -> str:
    if field.type == "Relation":
        populated = populated_type(snap, field, names)
        value = "string" if populated is None else f"Rel<P, {json.dumps(field.name)}, {populated}>"
    else:
        value = SCALARS[field.type]
    return f"{value}[]" if field.array else value


def populatable(snap: Snapshot, schema: CompiledSchema) -> bool:
    """Whether ``?populate=`` can fill one of the schema's fields (its interface takes the parameter ``P``)."""
    return any(can_populate(snap, field) for field in schema.fields.values())


def can_populate(snap: Snapshot, field: Field) -> bool:
    """A Relation to User, or to a schema with documents here (``query.parse_populate`` refuses the others)."""
    return field.type == "Relation" and (field.model == "User" or snap.document_schema(field.target) is not None)


def populated_type(snap: Snapshot, field: Field, names: dict[str, str]) -> str | None:
    """What ``?populate=`` puts in place of one id of ``field`` (as ``documents.populate`` does); None: the
    field cannot be populated (a Relation to Team, or to a schema without documents here)."""
    if field.type != "Relation":
        return None
    if field.model == "User":
        return "PublicUser | string"
    target = snap.document_schema(field.target)
    if target is None:
        return None
    below = f"<Below<P, {json.dumps(field.name)}>>" if populatable(snap, target) else ""
    document = f"{names[target.name]}{below}"
    kept = " | string" if opted_in(target) else ""
    return f"{document}{kept}" if field.array else f"{document}{kept} | null"


def field_comment(field: Field) -> str:
    parts: list[str] = []
    if field.description:
        parts.append(" ".join(field.description.split()))
    if field.type == "Relation":
        parts.append(f"Relation to {field.model}.")
    return " ".join(parts).replace("*/", "*\\/")


def property_name(name: str) -> str:
    """A property name as written in an interface: quoted unless it is an identifier."""
    return name if IDENTIFIER.match(name) else json.dumps(name)
