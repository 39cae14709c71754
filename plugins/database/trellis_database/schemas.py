"""Marshmallow schemas of the module's routes (request validation and the static OpenAPI document).

Document bodies are checked against the admin-defined schema by ``documents.validate``; the schemas
here only describe the generic route family. Per-schema request/response schemas are generated at
request time by ``openapi.py``. The custom endpoint definition's schemas live with its checks in
``endpoint_definitions.py``.
"""

from __future__ import annotations

from marshmallow import INCLUDE, Schema, validate
from marshmallow import fields as ma

from trellis.fields import BoundedList
from trellis.http import FreeFormSchema, ListArgs, list_schema

from .definitions import CAN_MODIFY, default_options
from .fields import TYPES
from .search import LANGUAGES, MAX_SEARCH_LENGTH

# A field definition as OpenAPI describes it (the schema service checks it): clients and the console read
# the type names here rather than keeping a copy.
_FIELD_TYPE = {"type": "string", "enum": list(TYPES)}
FIELD_DEFINITION = {
    "oneOf": [
        _FIELD_TYPE,
        {"type": "array", "items": _FIELD_TYPE, "minItems": 1, "maxItems": 1},
        {
            "type": "object",
            "required": ["type"],
            "properties": {
                "type": {"oneOf": [_FIELD_TYPE, {"type": "array", "items": _FIELD_TYPE, "minItems": 1, "maxItems": 1}]},
                "model": {"type": "string", "description": "the related schema (Relation)"},
                "required": {"type": "boolean"},
                "unique": {"type": "boolean"},
                "default": {"description": "a value of the field's type"},
                "description": {"type": "string"},
                "index": {"type": "boolean"},
                "maxLength": {"type": "integer", "minimum": 1},
                "searchable": {"type": "boolean", "description": "full-text search (String and [String])"},
            },
        },
    ]
}
MODEL_OPTIONS = {
    "default": default_options(),
    "properties": {
        "timestamps": {"type": "boolean"},
        "search": {
            "type": "object",
            "properties": {"language": {"type": "string", "enum": list(LANGUAGES), "default": "simple"}},
        },
        "conduit": {
            "type": "object",
            "properties": {
                "permissions": {
                    "type": "object",
                    "properties": {"canModify": {"type": "string", "enum": list(CAN_MODIFY)}},
                }
            },
        },
    },
}


class SchemaBody(Schema):
    name = ma.String(required=True, metadata={"description": "^[A-Za-z][A-Za-z0-9_]{0,62}$, unique"})
    fields_ = ma.Dict(
        required=True,
        data_key="fields",
        attribute="fields",
        metadata={
            "description": "field name → type name (`String`), `[type]`, or {type, model?, required?, unique?, "
            "default?, description?, index?}; types: String, Number, Boolean, Date, ObjectId, JSON, "
            "Relation (needs model)",
            "example": {"title": {"type": "String", "required": True}, "price": "Number", "tags": ["String"]},
            "additionalProperties": FIELD_DEFINITION,
        },
    )
    modelOptions = ma.Dict(metadata={"description": "{timestamps, conduit: {permissions, cms}}", **MODEL_OPTIONS})
    conduitOptions = ma.Dict(metadata={"description": "Conduit's name for modelOptions.conduit"})


class SchemaChangesBody(Schema):
    name = ma.String()
    fields_ = ma.Dict(
        data_key="fields",
        attribute="fields",
        metadata={"description": "the complete new field map (fields left out are dropped)"},
    )
    modelOptions = ma.Dict(metadata={"description": "merged into the current options"})
    conduitOptions = ma.Dict()


class ExtensionBody(Schema):
    fields_ = ma.Dict(
        required=True,
        data_key="fields",
        attribute="fields",
        metadata={"description": "the admin's extension fields ({} removes it)"},
    )


class SchemaRecordSchema(Schema):
    _id = ma.String(required=True)
    name = ma.String(required=True)
    fields_ = ma.Dict(required=True, data_key="fields", attribute="fields")
    modelOptions = ma.Dict(required=True)
    ownerModule = ma.String(required=True)
    extensions = ma.List(ma.Dict(), required=True)
    createdAt = ma.String(allow_none=True)
    updatedAt = ma.String(allow_none=True)
    version = ma.Integer(data_key="__v", attribute="__v", metadata={"description": "revision counter"})


SchemaListSchema = list_schema("DatabaseSchemaList", "schemas", SchemaRecordSchema)


class SchemaListArgs(ListArgs):
    enabled = ma.Boolean(metadata={"description": "only schemas whose CMS routes are (or are not) enabled"})
    owner = ma.String(metadata={"description": "comma-separated owner module names, e.g. database,authentication"})
    search = ma.String(metadata={"description": "part of the name"})


class DeleteSchemaArgs(Schema):
    deleteData = ma.Boolean(load_default=False, metadata={"description": "also delete the documents"})


class DocumentSchema(Schema):
    """Any document: ``_id``, the schema's fields, ``createdAt``, ``updatedAt``, ``__v``."""

    class Meta:
        unknown = INCLUDE

    _id = ma.String(dump_only=True)
    createdAt = ma.String(dump_only=True)
    updatedAt = ma.String(dump_only=True)


class DocumentBodySchema(FreeFormSchema):
    """The schema's fields (checked against the schema; unknown fields are a 400)."""


class DocumentListArgs(ListArgs):
    class Meta:
        unknown = INCLUDE  # field filters: field=v, field[$op]=v, field<v

    sort = ma.String(metadata={"description": "fields, `-` for descending: `-price,title`"})
    select = ma.String(metadata={"description": "fields to return: `title,price` (`_id` always)"})
    populate = ma.String(
        metadata={
            "description": "relation fields to replace by their documents, nested with dots: `author,author.company`"
        }
    )
    count = ma.String(
        validate=validate.OneOf(["exact", "none"]),
        metadata={
            "description": "`exact` (default): the total before skip/limit; `none`: no `count` "
            "in the answer, and no counting"
        },
    )
    scope = ma.String(
        validate=validate.Length(max=80),
        metadata={"description": "`Team:<id>`: act as that team (its grants only); schemas under access control"},
    )
    search = ma.String(
        validate=validate.Length(max=MAX_SEARCH_LENGTH),
        metadata={
            "description": "words to find in the schema's searchable fields: every word in some field, the last "
            "one also as a prefix, `-word` excludes; best match first unless `sort` is given (400 when the "
            "schema has no searchable field)",
            "example": "red shoe",
        },
    )


DocumentListSchema = Schema.from_dict(
    {
        "documents": ma.List(ma.Nested(DocumentSchema), required=True),
        "count": ma.Integer(metadata={"description": "total before skip/limit; absent with `count=none`"}),
    },
    name="DatabaseDocumentList",
)


AggregateResultSchema = Schema.from_dict(
    {
        "groups": ma.List(
            ma.Dict(),
            required=True,
            metadata={"description": "`{key: {<field>: value}, count?, sum?: {<field>: n}, avg?, min?, max?}`"},
        ),
        "count": ma.Integer(required=True, metadata={"description": "the number of groups before `limit`"}),
    },
    name="DatabaseAggregate",
)


class ManyBodySchema(Schema):
    docs = BoundedList(ma.Dict(), required=True, min_items=1, max_items=1000)


class ManyResultSchema(Schema):
    docs = ma.List(ma.Nested(DocumentSchema), required=True)
    count = ma.Integer(required=True)


class EndpointListArgs(ListArgs):
    search = ma.String(metadata={"description": "part of the name"})
    schema = ma.String(metadata={"description": "schema id or name"})


class FunctionResultSchema(Schema):
    """GET: {documents, count}; POST: the created document; PUT/PATCH: {documents, count}; DELETE: {deleted, count}."""

    class Meta:
        unknown = INCLUDE


_QUERY_DOC = (
    "the GraphQL document; needed (400) unless `extensions.persistedQuery` is sent: there is no persisted "
    "query store, so a hash alone answers PERSISTED_QUERY_NOT_FOUND and Apollo's link sends the query"
)
_EXTENSIONS_DOC = "accepted, not used (e.g. Apollo's clientLibrary, persistedQuery)"


class GraphQLRequestSchema(Schema):
    """A GraphQL-over-HTTP POST body; ``extensions`` is accepted and its keys are ignored."""

    query = ma.String(metadata={"description": _QUERY_DOC})
    variables = ma.Dict(allow_none=True)
    operationName = ma.String(allow_none=True)
    extensions = ma.Dict(allow_none=True, metadata={"description": _EXTENSIONS_DOC})


class GraphQLQueryArgs(Schema):
    """``GET /graphql?query=…&variables=…``: queries only; ``variables`` and ``extensions`` are JSON text."""

    query = ma.String(metadata={"description": _QUERY_DOC})
    variables = ma.String(allow_none=True, metadata={"description": "a JSON object"})
    operationName = ma.String(allow_none=True)
    extensions = ma.String(allow_none=True, metadata={"description": "a JSON object; " + _EXTENSIONS_DOC})


class GraphQLErrorSchema(Schema):
    message = ma.String(required=True)
    extensions = ma.Dict(
        required=True,
        metadata={
            "description": "`code`: INVALID_ARGUMENTS, UNAUTHORIZED, "
            "NOT_FOUND, GRAPHQL_PARSE_FAILED, GRAPHQL_VALIDATION_FAILED …"
        },
    )
    path = ma.List(ma.Raw())
    locations = ma.List(ma.Dict())


class GraphQLResponseSchema(Schema):
    data = ma.Dict(allow_none=True)
    errors = ma.List(ma.Nested(GraphQLErrorSchema))


class GrantBody(Schema):
    subject = ma.String(
        required=True,
        validate=validate.Length(max=100),
        metadata={"description": "`User:<id>`, `Team:<id>`, `User:*` or `*`"},
    )
    relation = ma.String(
        required=True,
        validate=validate.Length(max=32),
        metadata={"description": "`owner`, `editor`, `reader`, or one the schema's definition adds"},
    )


class GrantSchema(Schema):
    subject = ma.String(required=True)
    relation = ma.String(required=True)
    resource = ma.String(metadata={"description": "`<Schema>:<documentId>`"})


GrantListSchema = Schema.from_dict(
    {"grants": ma.List(ma.Nested(GrantSchema), required=True), "count": ma.Integer(required=True)},
    name="DatabaseGrantList",
)
