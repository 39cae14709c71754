"""The module's share of project as code: ``modules.authorization.resources.<schema>``, the resource
definition of each schema under access control (``{relations, permissions}``, as the admin routes show it).

A resource is not made here: it exists while its schema is opted in to access control (the Database
module's part, which runs first, may opt one in in the same project), so a project only updates
definitions, and never deletes one (it goes with its schema).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from marshmallow import ValidationError

from trellis.access import ResourceTable, catalog
from trellis.errors import APIError
from trellis.project import Change, ProjectInvalid, ProjectPart, invalid

from . import definitions
from .schemas import ResourcePatchSchema


def _thing(found: definitions.Definition) -> dict[str, Any]:
    return {"relations": found.relations, "permissions": found.permissions}


def _resource(name: str, path: str) -> ResourceTable:
    """The opted-in schema ``name``, looked up now: after the parts that run first changed the schemas."""
    found = catalog()
    resource = found.resource(name) if found is not None else None
    if resource is None:
        raise ProjectInvalid(
            path, f"{name!r} is not a schema under access control (modelOptions.conduit.authorization)"
        )
    return resource


class ResourcesPart(ProjectPart):
    module = "authorization"
    kinds = {"resources": "resource"}
    after = ("database",)

    def stored(self, key: str) -> dict[str, Any]:
        found = catalog()
        return {name: _thing(definitions.definition(name)) for name in sorted(found.names() if found else [])}

    def normalise(self, key: str, name: str, thing: Any, path: str) -> Any:
        """A key the thing leaves out is the default definition's (what a newly opted-in schema has)."""
        if not isinstance(thing, dict):
            raise ProjectInvalid(path, "must be an object with relations and permissions")
        try:
            loaded = ResourcePatchSchema().load({**_thing(definitions.default(name)), **thing})
        except ValidationError as exc:
            raise invalid(path, exc) from None
        errors = definitions.check(_resource(name, path), loaded["relations"], loaded["permissions"])
        if errors:
            raise invalid(path, APIError(400, "invalid definition", errors))
        return loaded

    def plan(self, section: Mapping[str, Any], path: str, prune: bool) -> list[Change]:
        """As any part's, except that prune deletes nothing: a resource goes when its schema leaves access
        control (the Database module's part), never on its own."""
        return super().plan(section, path, prune=False)

    def update(self, key: str, name: str, thing: Any, current: Any) -> None:
        definitions.update(_resource(name, f"modules.{self.module}.{key}.{name}"), thing)
