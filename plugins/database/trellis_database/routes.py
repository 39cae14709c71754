"""HTTP routes: schemas (admin), documents (generated per schema), custom endpoints (GraphQL: graphql_http.py).

Document routes are one generic family (``/database/<schemaName>…``); the per-schema OpenAPI paths
come from ``openapi.py``. Their responses are serialised once, straight to JSON, not through a
marshmallow dump (a document's fields are only known at run time).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from flask import Response, current_app, request
from sqlalchemy.exc import DBAPIError

from trellis import current, db, jsonbody
from trellis.credentials import Security, admin_required, current_user, identify
from trellis.errors import ErrorSchema, bad_request, not_found, unauthorized
from trellis.errors import body as error_body
from trellis.http import Blueprint, DeletedSchema, deleted

from . import aggregates, document_access, documents, endpoint_calls, endpoint_definitions, schema_service
from .crud_gate import authorize, check_permission
from .endpoint_definitions import EndpointBody, EndpointChangesBody, EndpointListSchema, EndpointRecordSchema
from .query import parse_filters, parse_populate, parse_select
from .registry import snapshot, snapshot_having
from .schemas import (
    AggregateResultSchema,
    DeleteSchemaArgs,
    DocumentBodySchema,
    DocumentListArgs,
    DocumentListSchema,
    DocumentSchema,
    EndpointListArgs,
    ExtensionBody,
    FunctionResultSchema,
    GrantBody,
    GrantListSchema,
    GrantSchema,
    ManyBodySchema,
    ManyResultSchema,
    SchemaBody,
    SchemaChangesBody,
    SchemaListArgs,
    SchemaListSchema,
    SchemaRecordSchema,
)

schemas_blp = Blueprint("database-schemas", __name__, description="Database: schemas (administrators)")
documents_blp = Blueprint(
    "database-documents",
    __name__,
    description="Database: documents of every CMS-enabled schema (see the per-schema paths)",
)
endpoints_blp = Blueprint("database-custom-endpoints", __name__, description="Database: custom endpoints")

OPTIONAL_USER: Security = [{}, {"bearerAuth": []}, {"masterkey": []}]


def _too_deep(_error: RecursionError):
    # json.loads recurses per nesting level; a body nested thousands deep is the client's fault.
    return json_response(error_body(400, "The JSON body is nested too deeply"), 400)


for _blueprint in (schemas_blp, documents_blp, endpoints_blp):
    _blueprint.register_error_handler(RecursionError, _too_deep)


def json_response(payload: Any, status: int = 200) -> Response:
    return _json_text(documents.serialise(payload), status)


def _json_text(text: str, status: int = 200) -> Response:
    return current.app().response_class(text, status=status, mimetype="application/json")


def require_json() -> None:
    jsonbody.require_json(current.request(), "the document")


def _retry_stale(func: Callable[..., Any]) -> Callable[..., Any]:
    """Another worker dropped a table or column this process still has cached: refresh once and retry."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except DBAPIError as exc:
            if isinstance(exc.orig, Exception) and _is_missing_object(exc):
                db.session.rollback()
                current_app.extensions["trellis"].generations.reset()
                return func(*args, **kwargs)
            raise

    return wrapper


def _is_missing_object(exc: DBAPIError) -> bool:
    text = str(exc.orig).lower()
    return "no such table" in text or "no such column" in text or "does not exist" in text


# ---- schemas ----------------------------------------------------------------------------------------


def _list_schemas(args: dict[str, Any]) -> dict[str, Any]:
    owner = [o.strip() for o in args["owner"].split(",") if o.strip()] if args.get("owner") else None
    found = schema_service.list_schemas(snapshot(), args.get("enabled"), owner, args.get("search"))
    page = found[args["skip"] : args["skip"] + args["limit"]]
    return {"schemas": [s.record() for s in page], "count": len(found)}


@schemas_blp.route("/admin/database/schemas", methods=["GET"])
@admin_required
@schemas_blp.arguments(SchemaListArgs, location="query")
@schemas_blp.response(200, SchemaListSchema)
def admin_list_schemas(args: dict[str, Any]):
    """Every schema: admin-defined ones and those owned by modules (``ownerModule``)."""
    return _list_schemas(args)


@schemas_blp.route("/database/schemas", methods=["GET"])
@admin_required
@schemas_blp.arguments(SchemaListArgs, location="query")
@schemas_blp.response(200, SchemaListSchema)
def list_schemas(args: dict[str, Any]):
    """Schemas, filtered by ``enabled`` (CMS routes on) and ``owner`` (comma-separated module names)."""
    return _list_schemas(args)


@schemas_blp.route("/admin/database/schemas", methods=["POST"])
@admin_required
@schemas_blp.arguments(SchemaBody)
@schemas_blp.response(201, SchemaRecordSchema)
@schemas_blp.alt_response(409, schema=ErrorSchema, description="A schema of that name exists")
def admin_create_schema(body: dict[str, Any]):
    """Create a schema; its document routes exist at once, in every worker."""
    return schema_service.create(body)


@schemas_blp.route("/database/schemas", methods=["POST"])
@admin_required
@schemas_blp.arguments(SchemaBody)
@schemas_blp.response(201, SchemaRecordSchema)
@schemas_blp.alt_response(409, schema=ErrorSchema, description="A schema of that name exists")
def create_schema(body: dict[str, Any]):
    """Create a schema (same as ``POST /admin/database/schemas``)."""
    return schema_service.create(body)


@schemas_blp.route("/admin/database/schemas/<string:schemaId>", methods=["GET"])
@admin_required
@schemas_blp.response(200, SchemaRecordSchema)
def admin_get_schema(schemaId: str):
    """One schema, by id (or name)."""
    snap = snapshot_having(lambda s: schemaId in s.by_id or schemaId in s.by_name)
    return schema_service.find(snap, schemaId).record()


@schemas_blp.route("/admin/database/schemas/<string:schemaId>", methods=["PUT"])
@admin_required
@schemas_blp.arguments(SchemaChangesBody)
@schemas_blp.response(200, SchemaRecordSchema)
@schemas_blp.alt_response(
    409,
    schema=ErrorSchema,
    description="The name is taken, documents break a new unique field, or a custom endpoint uses a dropped field",
)
def admin_update_schema(body: dict[str, Any], schemaId: str):
    """Rename, replace the fields (add, drop, change), or change options; documents stay readable."""
    return schema_service.update(schemaId, body)


@schemas_blp.route("/admin/database/schemas/<string:schemaId>", methods=["DELETE"])
@admin_required
@schemas_blp.arguments(DeleteSchemaArgs, location="query")
@schemas_blp.response(200, DeletedSchema)
@schemas_blp.alt_response(
    409,
    schema=ErrorSchema,
    description="The schema has documents (add ?deleteData=true) or another has a Relation to it",
)
def admin_delete_schema(args: dict[str, Any], schemaId: str):
    """Delete a schema; one with documents needs ``?deleteData=true`` (409 otherwise)."""
    return deleted(schema_service.delete(schemaId, args["deleteData"]))


@schemas_blp.route("/admin/database/schemas/<string:schemaId>/extensions", methods=["POST"])
@admin_required
@schemas_blp.arguments(ExtensionBody)
@schemas_blp.response(200, SchemaRecordSchema)
@schemas_blp.alt_response(
    409, schema=ErrorSchema, description="Documents break a new unique field, or a custom endpoint uses a dropped one"
)
def admin_set_extension(body: dict[str, Any], schemaId: str):
    """Set the admin's extension fields of an extendable (or ``ExtensionOnly``) schema; ``{}`` removes them."""
    return schema_service.set_extension(schemaId, body["fields"])


# ---- documents ------------------------------------------------------------------------------------


def _document_access(operation: str):
    """Guard of a document route: resolves the schema and applies its access rules (404/401); the
    view gets the snapshot, the schema and who the caller acts as under access control (``acting``:
    None when no per-document rule applies)."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        # The doc wrapper only carries the documentation (copied by functools.wraps); requests call func.
        @functools.wraps(Blueprint.doc(security=OPTIONAL_USER)(func))
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            name = kwargs["schemaName"]
            snap = snapshot_having(lambda s: s.document_schema(name) is not None)
            schema = snap.document_schema(name)
            identity = authorize(schema, operation, name)
            assert schema is not None  # authorize answered 404 otherwise
            acting = document_access.acting(schema, identity, document_access.scope_argument())
            return func(*args, snap=snap, schema=schema, acting=acting, **kwargs)

        return wrapper

    return decorate


@documents_blp.route("/database/<string:schemaName>", methods=["GET"])
@_retry_stale
@_document_access("read")
@documents_blp.arguments(DocumentListArgs(), location="query")
@documents_blp.response(200, DocumentListSchema())
def list_documents(args: dict[str, Any], schemaName: str, snap: Any, schema: Any, acting: Any):
    """Documents, with ``skip``, ``limit``, ``sort``, ``select``, ``populate`` and field filters:
    ``field=v``, ``field[$ne|$lt|$lte|$gt|$gte]=v``, ``field[$in|$nin]=a,b``, ``field[$contains]=text``,
    ``field[$exists]=true``, ``field<v``, ``field>v``. ``count`` is the total before skip/limit;
    ``count=none`` leaves it out (no counting). ``search``: full-text words over the searchable fields,
    best match first without ``sort``."""
    conditions = parse_filters(current.request().args)
    select = parse_select(schema, args.get("select"))
    tree = parse_populate(snap, schema, args.get("populate"))
    counted = args.get("count", "exact") == "exact"
    words = args.get("search")
    if not tree and select is None:  # the stored JSON goes out as it is, never decoded
        texts, count = documents.find_json(
            schema, conditions, args.get("sort"), args["skip"], args["limit"], counted, acting, words
        )
        return _json_text(f'{{"documents":[{",".join(texts)}]' + (f',"count":{count}}}' if counted else "}"))
    docs, count = documents.find(
        schema, conditions, args.get("sort"), args["skip"], args["limit"], counted, acting, words
    )
    if tree:
        documents.populate(snap, schema, docs, tree, identify(), document_access.scope_argument())
    if select is not None:
        docs = [documents.project(doc, select) for doc in docs]
    return json_response({"documents": docs, "count": count} if counted else {"documents": docs})


@documents_blp.route("/database/<string:schemaName>/aggregate", methods=["GET"])
@_retry_stale
@_document_access("read")
@documents_blp.response(200, AggregateResultSchema)
def aggregate_documents(schemaName: str, snap: Any, schema: Any, acting: Any):
    """Groups of the documents the caller may read: ``groupBy=field[,field]`` (a Date as
    ``field:day|week|month|year``), ``count=true``, ``sum|avg|min|max=field[,field]``, ``sort``, ``limit``
    (groups, at most 1000), with the list's field filters, ``where`` (JSON), ``search`` and ``scope``. One SQL
    statement."""
    spec, where, limit = aggregates.from_query(schema, request.args)
    return json_response(aggregates.aggregate(schema, spec, where, limit, acting, request.args.get("search")))


@documents_blp.route("/database/<string:schemaName>", methods=["POST"])
@_retry_stale
@_document_access("create")
@documents_blp.arguments(DocumentBodySchema())
@documents_blp.response(201, DocumentSchema())
def create_document(body: dict[str, Any], schemaName: str, snap: Any, schema: Any, acting: Any):
    """Create a document (``_id``, ``createdAt``, ``updatedAt``, ``__v`` are set by the server); under
    access control the caller (or the ``scope`` team) owns it."""
    require_json()
    check_permission(schema, "create")
    text = documents.create_json(snap, schema, body, acting=acting)
    db.commit()  # nothing left when the write committed alone
    return _json_text(text, 201)


@documents_blp.route("/database/<string:schemaName>/many", methods=["POST"])
@_retry_stale
@_document_access("create")
@documents_blp.arguments(ManyBodySchema())
@documents_blp.response(201, ManyResultSchema)
def create_many(body: dict[str, Any], schemaName: str, snap: Any, schema: Any, acting: Any):
    """Create up to 1000 documents in one transaction: all of them, or none (errors name ``docs.<i>``)."""
    check_permission(schema, "create")
    docs = documents.create(snap, schema, body["docs"], many=True, acting=acting)
    db.session.commit()
    return json_response({"docs": docs, "count": len(docs)}, 201)


@documents_blp.route("/database/<string:schemaName>/<string:docId>", methods=["GET"])
@_retry_stale
@_document_access("read")
@documents_blp.response(200, DocumentSchema())
def get_document(schemaName: str, docId: str, snap: Any, schema: Any, acting: Any):
    """One document; ``populate`` and ``select`` work as on the list. Under access control a document
    the caller may not read is the 404 of a missing one."""
    if not current.request().environ.get("QUERY_STRING"):  # no `request.args` to build on the hottest read
        return _json_text(documents.get_json(schema, docId, acting))
    unknown = set(request.args) - {"populate", "select", "scope"}
    if unknown:
        raise bad_request(
            f"Unknown query parameter {min(unknown)!r}", {name: ["Unknown query parameter"] for name in unknown}
        )
    doc = documents.get(schema, docId, acting)
    tree = parse_populate(snap, schema, request.args.get("populate"))
    if tree:
        documents.populate(snap, schema, [doc], tree, identify(), document_access.scope_argument())
    return json_response(documents.project(doc, parse_select(schema, request.args.get("select"))))


@documents_blp.route("/database/<string:schemaName>/<string:docId>", methods=["PUT"])
@_retry_stale
@_document_access("update")
@documents_blp.arguments(DocumentBodySchema())
@documents_blp.response(200, DocumentSchema())
def replace_document(body: dict[str, Any], schemaName: str, docId: str, snap: Any, schema: Any, acting: Any):
    """Replace a document: fields left out are removed (defaults apply, required fields are needed)."""
    require_json()
    text = documents.update_json(snap, schema, docId, body, "replace", acting)
    db.commit()  # nothing left when the write committed alone
    return _json_text(text)


@documents_blp.route("/database/<string:schemaName>/<string:docId>", methods=["PATCH"])
@_retry_stale
@_document_access("update")
@documents_blp.arguments(DocumentBodySchema())
@documents_blp.response(200, DocumentSchema())
def patch_document(body: dict[str, Any], schemaName: str, docId: str, snap: Any, schema: Any, acting: Any):
    """Change some fields of a document; ``null`` removes an optional field."""
    require_json()
    text = documents.update_json(snap, schema, docId, body, "patch", acting)
    db.commit()  # nothing left when the write committed alone
    return _json_text(text)


@documents_blp.route("/database/<string:schemaName>/<string:docId>", methods=["DELETE"])
@_retry_stale
@_document_access("delete")
@documents_blp.response(200, DeletedSchema)
def delete_document(schemaName: str, docId: str, snap: Any, schema: Any, acting: Any):
    """Delete a document."""
    check_permission(schema, "delete")
    documents.delete(schema, docId, acting)
    db.commit()  # nothing left when the write committed alone
    return json_response(deleted(docId))


# ---- sharing -------------------------------------------------------------------------------------------


def _shared(schema: Any, acting: Any, doc_id: str, permission: str) -> Any:
    """The document's resource, once the caller holds ``permission`` on it (404 as a missing document when
    it may not read it; 403 when it may read but not ``permission``)."""
    if not document_access.opted_in(schema):
        raise not_found(f"{schema.name} is not under access control: its documents have no grants")
    document_access.require(schema, acting, doc_id, permission, exists=True)
    return document_access.describe(schema)


@documents_blp.route("/database/<string:schemaName>/<string:docId>/grants", methods=["GET"])
@_retry_stale
@_document_access("read")
@documents_blp.response(200, GrantListSchema)
def list_grants(schemaName: str, docId: str, snap: Any, schema: Any, acting: Any):
    """Who holds which relation on the document (needs ``read``)."""
    resource = _shared(schema, acting, docId, "read")
    grants = document_access.sharing().grants(resource.name, docId)
    return {"grants": grants, "count": len(grants)}


@documents_blp.route("/database/<string:schemaName>/<string:docId>/grants", methods=["POST"])
@_retry_stale
@_document_access("read")
@documents_blp.arguments(GrantBody)
@documents_blp.response(201, GrantSchema)
def create_grant(body: dict[str, Any], schemaName: str, docId: str, snap: Any, schema: Any, acting: Any):
    """Share the document: ``subject`` gets ``relation`` (needs ``share``; only relations the caller holds,
    except for owners)."""
    resource = _shared(schema, acting, docId, "share")
    grant = document_access.sharing().share(resource, acting, docId, body["subject"], body["relation"])
    db.session.commit()
    return grant


@documents_blp.route("/database/<string:schemaName>/<string:docId>/grants", methods=["DELETE"])
@_retry_stale
@_document_access("read")
@documents_blp.arguments(GrantBody, location="query")
@documents_blp.response(200, GrantSchema)
def delete_grant(args: dict[str, Any], schemaName: str, docId: str, snap: Any, schema: Any, acting: Any):
    """Revoke a grant (needs ``share``)."""
    resource = _shared(schema, acting, docId, "share")
    document_access.sharing().unshare(resource, acting, docId, args["subject"], args["relation"])
    db.session.commit()
    return {"subject": args["subject"], "relation": args["relation"], "resource": f"{schema.name}:{docId}"}


# ---- custom endpoints --------------------------------------------------------------------------------


@endpoints_blp.route("/admin/database/customEndpoints", methods=["GET"])
@admin_required
@endpoints_blp.arguments(EndpointListArgs, location="query")
@endpoints_blp.response(200, EndpointListSchema)
def list_endpoints(args: dict[str, Any]):
    """Custom endpoints, by name."""
    snap = snapshot()
    found = sorted(snap.endpoints.values(), key=lambda e: e.name)
    if args.get("search"):
        found = [e for e in found if args["search"].lower() in e.name.lower()]
    if args.get("schema"):
        schema = snap.by_id.get(args["schema"]) or snap.by_name.get(args["schema"])
        found = [e for e in found if schema is not None and e.schema_id == schema.id]
    page = found[args["skip"] : args["skip"] + args["limit"]]
    return {"customEndpoints": [endpoint_definitions.record(e, snap) for e in page], "count": len(found)}


@endpoints_blp.route("/admin/database/customEndpoints/<string:endpointId>", methods=["GET"])
@admin_required
@endpoints_blp.response(200, EndpointRecordSchema)
def get_endpoint(endpointId: str):
    """One custom endpoint, by id (or name)."""
    snap = snapshot()
    return endpoint_definitions.record(endpoint_definitions.find(snap, endpointId), snap)


@endpoints_blp.route("/admin/database/customEndpoints", methods=["POST"])
@admin_required
@endpoints_blp.arguments(EndpointBody)
@endpoints_blp.response(201, EndpointRecordSchema)
@endpoints_blp.alt_response(409, schema=ErrorSchema, description="A custom endpoint of that name exists")
def create_endpoint(body: dict[str, Any]):
    """Create a custom endpoint, served at ``/database/function/{name}`` with its operation's method."""
    return endpoint_definitions.create(body)


@endpoints_blp.route("/admin/database/customEndpoints/<string:endpointId>", methods=["PUT", "PATCH"])
@admin_required
@endpoints_blp.arguments(EndpointChangesBody)
@endpoints_blp.response(200, EndpointRecordSchema)
@endpoints_blp.alt_response(409, schema=ErrorSchema, description="Another custom endpoint has that name")
def update_endpoint(body: dict[str, Any], endpointId: str):
    """Change a custom endpoint (the body is merged over the current definition, then checked)."""
    return endpoint_definitions.update(endpointId, body)


@endpoints_blp.route("/admin/database/customEndpoints/<string:endpointId>", methods=["DELETE"])
@admin_required
@endpoints_blp.response(200, DeletedSchema)
def delete_endpoint(endpointId: str):
    """Delete a custom endpoint."""
    return deleted(endpoint_definitions.delete(endpointId))


FUNCTION_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


@endpoints_blp.route("/database/function/<string:endpointName>", methods=FUNCTION_METHODS, defaults={"params": ""})
@endpoints_blp.route("/database/function/<string:endpointName>/<path:params>", methods=FUNCTION_METHODS)
@_retry_stale
@endpoints_blp.response(200, FunctionResultSchema)
def call_endpoint(endpointName: str, params: str):
    """Run a custom endpoint (its inputs and results are in the per-endpoint paths of this document)."""
    snap = snapshot_having(lambda s: endpointName in s.endpoints)
    endpoint = snap.endpoints.get(endpointName)
    if endpoint is None or not endpoint.enabled:
        raise not_found(f"No custom endpoint named {endpointName!r}")
    if request.method != endpoint.operation:
        raise endpoint_calls.method_not_allowed(endpoint)
    identity = identify()
    if endpoint.authentication and (identity is None or (identity.kind != "user" and not identity.is_admin)):
        raise unauthorized(f"{endpoint.name} needs a user Bearer token")
    body = None
    if request.method in ("POST", "PUT", "PATCH", "DELETE") and request.content_length:
        require_json()
        body = request.get_json(silent=True)
        if body is None:
            raise bad_request("The body is not valid JSON")
    segments = [s for s in params.split("/") if s] if params else []
    call = endpoint_calls.Call(endpoint, identity, current_user(), body, request.args, segments)
    result, status = endpoint_calls.run(snap, endpoint, call, request.args)
    return json_response(result, status)
