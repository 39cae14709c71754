"""OpenAPI paths of the generated routes, computed per ``/openapi.json`` request from the current schemas.

For every CMS-enabled schema: its document routes (only the enabled operations, with the security
they need) with request and response schemas derived from the fields, and the list route's filters
(``price[$lt]`` …) as declared query parameters; for every enabled custom endpoint: its path, method
and inputs. Merged into the static document by the core, where they replace the generic
``/database/{schemaName}…`` family they stand for (a generator gets one typed function per schema
and operation, and no path is ambiguous). Every operation has an ``operationId`` (``listProduct``,
``createProduct`` …) and lists every credential it accepts.

A schema under access control also shows it: a ``scope`` query parameter on its document routes and
custom endpoints, its sharing routes (``/database/<Name>/{id}/grants``), and the 403 a caller gets for a
document it may read but not change (or a team scope it is not in).
"""

from __future__ import annotations

from typing import Any

from flask import Flask

from .openapi_documents import schema_paths
from .openapi_endpoints import endpoint_path, generic_function_paths
from .registry import registry

# The generic routes the per-schema paths stand for (see routes.py).
GENERIC_DOCUMENT_PATHS = (
    "/database/{schemaName}",
    "/database/{schemaName}/many",
    "/database/{schemaName}/{docId}",
    "/database/{schemaName}/changes",
    "/database/{schemaName}/aggregate",
    "/database/{schemaName}/{docId}/grants",
)


def paths(app: Flask) -> dict[str, Any]:
    snap = registry(app).current()
    out: dict[str, Any] = {"paths": {}, "schemas": {}, "tags": [], "replaces": list(GENERIC_DOCUMENT_PATHS)}
    generic_function_paths(out)
    for schema in snap.schemas:
        if schema.cms_enabled:
            schema_paths(snap, schema, out)
    for endpoint in sorted(snap.endpoints.values(), key=lambda e: e.name):
        of_schema = snap.by_id.get(endpoint.schema_id)
        if endpoint.enabled and of_schema is not None and of_schema.table is not None:
            endpoint_path(endpoint, of_schema, out)
    return out
