"""``/graphql`` over HTTP, as the GraphQL-over-HTTP specification asks (Apollo Client, graphql-js, gql …).

POST takes ``{query, variables?, operationName?, extensions?}``; GET takes the same as query parameters
(``variables`` and ``extensions`` as JSON text) and serves queries only (a mutation → 405). The answer is
``application/graphql-response+json`` when the Accept header asks for it (then a request that cannot be
executed is a 400), else ``application/json`` with 200. Every error, including a bad credential (401) or
a malformed request, is a GraphQL error ``{message, extensions: {code}}``: clients parse one shape.
"""

from __future__ import annotations

import json
from typing import Any

from flask import Response, request
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from trellis.credentials import Security, identify
from trellis.errors import APIError, handle_http_exception
from trellis.errors import body as error_body
from trellis.http import Blueprint
from trellis.module_config import get as get_config

from . import documents, graphql_api
from .registry import snapshot
from .schemas import GraphQLQueryArgs, GraphQLRequestSchema, GraphQLResponseSchema

GRAPHQL_RESPONSE = "application/graphql-response+json"
# Anonymous, a user token or administrator credentials: each schema's CMS rules decide.
ANY_CALLER: Security = [{}, {"bearerAuth": []}, {"masterkey": []}]

graphql_blp = Blueprint("database-graphql", __name__, description="Database: GraphQL")


def _both_media_types(*statuses: int) -> dict[str, Any]:
    """Each answer is also served as ``application/graphql-response+json`` when Accept asks for it."""
    ref = {"schema": {"$ref": "#/components/schemas/GraphQLResponse"}}
    return {"responses": {status: {"content": {GRAPHQL_RESPONSE: ref}} for status in statuses}}


@graphql_blp.route("/graphql", methods=["POST"], endpoint="graphql_post")
@graphql_blp.doc(security=ANY_CALLER, **_both_media_types(200, 400, 401, 415))
@graphql_blp.arguments(GraphQLRequestSchema())
@graphql_blp.response(200, GraphQLResponseSchema)
@graphql_blp.alt_response(400, schema=GraphQLResponseSchema, description="The request cannot be executed")
@graphql_blp.alt_response(401, schema=GraphQLResponseSchema, description="An invalid credential was sent")
@graphql_blp.alt_response(415, schema=GraphQLResponseSchema, description="The body is not declared JSON")
def graphql(body: dict[str, Any]):
    """GraphQL over the CMS-enabled schemas: a query field per schema (``where``, ``skip``, ``limit``,
    ``sort``) and ``create<Name>``, ``update<Name>``, ``delete<Name>`` mutations; the same access rules as
    the REST routes. Errors come back as GraphQL ``errors`` with ``extensions.code``."""
    return _answer(
        body.get("query"),
        body.get("variables"),
        body.get("operationName"),
        read_only=False,
        extensions=body.get("extensions"),
    )


@graphql_blp.route("/graphql", methods=["GET"], endpoint="graphql_get")
@graphql_blp.doc(security=ANY_CALLER, **_both_media_types(200, 400, 401, 405))
@graphql_blp.arguments(GraphQLQueryArgs(), location="query")
@graphql_blp.response(200, GraphQLResponseSchema)
@graphql_blp.alt_response(400, schema=GraphQLResponseSchema, description="The request cannot be executed")
@graphql_blp.alt_response(401, schema=GraphQLResponseSchema, description="An invalid credential was sent")
@graphql_blp.alt_response(405, schema=GraphQLResponseSchema, description="A mutation sent with GET")
def graphql_query(args: dict[str, Any]):
    """A GraphQL query as URL parameters (``?query=…&variables=…``); mutations need POST."""
    variables = _json_object(args.get("variables"), "variables")
    extensions = _json_object(args.get("extensions"), "extensions")
    return _answer(args.get("query"), variables, args.get("operationName"), read_only=True, extensions=extensions)


def _answer(
    query: str | None,
    variables: dict[str, Any] | None,
    operation_name: str | None,
    read_only: bool,
    extensions: dict[str, Any] | None = None,
) -> Response:
    identify()  # a bad credential is a 401, as everywhere (answered as a GraphQL error below)
    if query is None:
        # Not a well-formed GraphQL-over-HTTP request: a 400 whatever the Accept header (an Apollo link
        # that sent a bare hash retries with the query either way).
        outcome = graphql_api.missing_query(extensions)
        status = outcome.status
    else:
        limits = graphql_api.Limits(get_config("database"))
        outcome = graphql_api.run(snapshot(), query, variables, operation_name, limits, read_only=read_only)
        status = outcome.status if outcome.status == 405 or _wants_graphql_response() else 200
    response = _response(outcome.body, status)
    if status == 405:
        response.headers["Allow"] = "POST"
    return response


def _json_object(text: str | None, name: str) -> dict[str, Any] | None:
    if text is None or text == "":
        return None
    try:
        value = json.loads(text)
    except ValueError:
        raise APIError(400, f"{name} must be a JSON object") from None
    if value is not None and not isinstance(value, dict):
        raise APIError(400, f"{name} must be a JSON object")
    return value


def _wants_graphql_response() -> bool:
    accept = request.accept_mimetypes
    return accept.quality(GRAPHQL_RESPONSE) > 0 and accept.quality(GRAPHQL_RESPONSE) >= accept.quality(
        "application/json"
    )


def _response(payload: dict[str, Any], status: int) -> Response:
    mimetype = GRAPHQL_RESPONSE if _wants_graphql_response() else "application/json"
    return Response(documents.serialise(payload), status=status, mimetype=mimetype)


def _as_graphql_error(status: int, contract: dict[str, Any], headers: dict[str, str]) -> Response:
    """The contract's error body, reshaped into a GraphQL response (same code, status and message)."""
    extensions = {"code": contract["name"], "status": status}
    for key in ("errors", "requestId"):
        if contract.get(key):
            extensions[key] = contract[key]
    response = _response({"errors": [{"message": contract["message"], "extensions": extensions}]}, status)
    for key, value in headers.items():
        response.headers[key] = value
    return response


@graphql_blp.errorhandler(APIError)
def _api_error(error: APIError) -> Response:
    return _as_graphql_error(
        error.status, error_body(error.status, error.message, error.errors, error.name), error.headers
    )


@graphql_blp.errorhandler(HTTPException)
def _http_error(error: HTTPException) -> Response:
    contract = handle_http_exception(error)
    keep = {k: v for k, v in contract.headers.items() if k in ("Allow", "Retry-After")}
    return _as_graphql_error(contract.status_code, contract.get_json(), keep)


@graphql_blp.app_errorhandler(MethodNotAllowed)
def _method_not_allowed(error: MethodNotAllowed) -> Response:
    # Routing refuses PUT /graphql before the blueprint is known, so its own handlers do not see it.
    if request.path.rstrip("/") == "/graphql":
        return _http_error(error)
    return handle_http_exception(error)


@graphql_blp.errorhandler(RecursionError)
def _too_deep(_error: RecursionError) -> Response:
    # json.loads recurses per nesting level; a body nested thousands deep is the client's fault.
    return _as_graphql_error(400, error_body(400, "The JSON body is nested too deeply"), {})
