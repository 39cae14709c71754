"""Module configuration: stored in the database, validated by each module's marshmallow schema.

``get(name)`` is what module code calls on a request path; it serves from a per-process cache that
follows the ``module-config`` generation (see ``trellis.cache``), so a ``PUT`` in one worker reaches
every worker.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from typing import Any

from flask import current_app, g
from marshmallow import Schema, ValidationError, fields, pre_load

from . import audit, current, db
from .errors import bad_request, not_found
from .fields import JsonBoolean
from .models import ModuleConfig
from .redact import drop_masked, redact

GENERATION = "module-config"
_CHANGED_HERE = "trellis_config_changed"  # on flask.g: a config changed in an atomic() block not committed yet


class ModuleConfigSchema(Schema):
    """Base of every module's config schema: the ``active`` flag its public routes honour."""

    active = JsonBoolean(load_default=True, metadata={"description": "public routes answer 404 when false"})


class ConfigStore:
    def __init__(self, schemas: dict[str, type[Schema] | None]) -> None:
        self._schemas = schemas
        self._cache: dict[str, dict[str, Any]] = {}
        self._cache_stamp: tuple[int, int] | None = None
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        return list(self._schemas)

    def schema(self, name: str) -> Schema:
        if name not in self._schemas:
            raise not_found(f"No module named {name!r} is loaded")
        schema_class = self._schemas[name] or ModuleConfigSchema
        return schema_class()

    def json_schema(self, name: str) -> dict[str, Any]:
        """The module's config schema as JSON Schema (nested schemas inlined), for forms and docs."""
        from apispec import APISpec
        from apispec.ext.marshmallow import OpenAPIConverter

        # Nested schemas get no name, so they are inlined and the spec holds no component.
        spec = APISpec(title="config", version="1", openapi_version="3.0.3")
        converter = OpenAPIConverter(openapi_version="3.0.3", schema_name_resolver=lambda _schema: None, spec=spec)
        return converter.schema2jsonschema(self.schema(name))

    def defaults(self, name: str) -> dict[str, Any]:
        return self.schema(name).load({})

    def get(self, name: str) -> dict[str, Any]:
        """The effective configuration (defaults merged with what is stored). Do not mutate it."""
        stamp = current.app().extensions["trellis"].generations.stamp(GENERATION)
        if g.get(_CHANGED_HERE):  # changed in this transaction, not committed yet (a project apply): never cached
            return self._effective(self._known(name), self._stored(name))
        if stamp != self._cache_stamp:
            stored = {row.module: row.data for row in db.session.query(ModuleConfig).all()}
            fresh = {module: self._effective(module, stored.get(module)) for module in self._schemas}
            with self._lock:
                self._cache, self._cache_stamp = fresh, stamp
        if name not in self._cache:
            raise not_found(f"No module named {name!r} is loaded")
        return self._cache[name]

    def _known(self, name: str) -> str:
        if name not in self._schemas:
            raise not_found(f"No module named {name!r} is loaded")
        return name

    def _effective(self, name: str, stored: dict[str, Any] | None) -> dict[str, Any]:
        schema = self.schema(name)
        try:
            return schema.load(stored or {})
        except ValidationError:
            # Stored config no longer fits a newer schema: keep what still loads, default the rest.
            current_app.logger.warning("stored config of module %s does not validate; using defaults", name)
            return schema.load({})

    def shown(self, name: str, config: dict[str, Any] | None = None) -> dict[str, Any]:
        """``config`` (default: the effective one) as an admin may see it: secret fields masked."""
        return redact(self.get(name) if config is None else config, self.schema(name))

    def put(self, name: str, changes: dict[str, Any]) -> dict[str, Any]:
        """Merge ``changes`` into the current config, validate, store; returns the new config.

        A secret sent back masked (as ``GET`` showed it) keeps the stored value.
        """
        if not isinstance(changes, dict):
            raise bad_request("The configuration must be a JSON object")
        schema = self.schema(name)
        try:
            loaded = self.merged(name, changes)
        except ValidationError as exc:
            raise bad_request(f"Invalid configuration for module {name!r}", exc.normalized_messages()) from None
        changes = drop_masked(changes, schema)
        row = db.session.get(ModuleConfig, name)
        stored = schema.dump(loaded)
        if row is None:
            db.session.add(ModuleConfig(module=name, data=stored))
        else:
            row.data = stored
        audit.record(name, "config.update", name, changes, schema=schema)
        current_app.extensions["trellis"].generations.bump(GENERATION)
        if db.in_atomic():  # what comes next in the same transaction reads the new config
            g.setdefault(_CHANGED_HERE, True)
        db.session.commit()
        return loaded

    def merged(self, name: str, changes: dict[str, Any]) -> dict[str, Any]:
        """The configuration :meth:`put` would store for ``changes``, loaded (``ValidationError`` when invalid)."""
        schema = self.schema(name)
        return schema.load(deep_merge(copy.deepcopy(self._stored(name)), drop_masked(changes, schema)))

    def _stored(self, name: str) -> dict[str, Any]:
        row = db.session.get(ModuleConfig, name)
        return dict(row.data) if row is not None else {}

    def is_active(self, name: str) -> bool:
        return bool(self.get(name).get("active", True))


def api_url(default: str, description: str = "API address (change it only to reach a test server)") -> fields.Url:
    """A provider's API base address in a config schema: http(s), any host (127.0.0.1 in tests)."""
    return fields.Url(
        require_tld=False, schemes={"http", "https"}, load_default=default, metadata={"description": description}
    )


def missing_provider_settings(data: dict[str, Any], required: dict[str, Sequence[str]]) -> dict[str, Any]:
    """Field errors for a config whose chosen ``provider`` lacks settings that provider needs.

    For config schemas shaped ``{provider, <provider>: {...}}`` (email, SMS, push …): returns
    ``{provider: {field: [reason]}}``, empty when nothing is missing. Check the merged config only.
    """
    provider = data.get("provider")
    if not isinstance(provider, str):
        return {}
    settings = data.get(provider) or {}
    missing = [name for name in required.get(provider, ()) if not settings.get(name)]
    return {provider: {name: [f"Required when provider is {provider}."] for name in missing}} if missing else {}


def deep_merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            deep_merge(base[key], value)
        else:
            base[key] = value
    return base


def require_active(name: str) -> dict[str, Any]:
    """The effective config of module ``name``, or 404 when it is switched off.

    The host lets admins through an inactive module's routes (to configure it); a module calls this
    where an action must be refused to everybody, e.g. sending through a disabled provider.
    """
    settings = get(name)
    if not settings.get("active", True):
        raise not_found(f"The {name} module is not active")
    return settings


def admin_config_routes(blp: Any, module: str, schema: type[Schema], example: str = "") -> None:
    """Register ``GET/PUT /admin/<module>/config`` on ``blp`` (a ``trellis.http.Blueprint``).

    Both go through the core ConfigStore, so they show and change the same data as
    ``/config/<module>``. The PUT body is any part of the configuration, validated field by field,
    merged into the current one, then validated whole (400 with field errors).
    """
    from .credentials import admin_required
    from .errors import ErrorSchema

    def _changes_init(self: Schema, *args: Any, **kwargs: Any) -> None:
        kwargs["partial"] = True
        schema.__init__(self, *args, **kwargs)

    def _keep_masked_secrets(self: Schema, data: Any, **_kwargs: Any) -> Any:
        return drop_masked(data, self)  # a secret sent back as GET showed it is not validated, and kept

    name = schema.__name__.removesuffix("Schema")
    members = {"__init__": _changes_init, "_keep_masked_secrets": pre_load(_keep_masked_secrets)}
    changes = type(f"{name}Changes", (schema,), {**members, "__doc__": "Any part of the configuration."})
    path = f"/admin/{module}/config"

    def get_config() -> dict[str, Any]:
        return current_app.extensions["trellis"].configs.shown(module)

    def put_config(body: dict[str, Any]) -> dict[str, Any]:
        configs = current_app.extensions["trellis"].configs
        return configs.shown(module, configs.put(module, body))

    get_config.__doc__ = f"The {module} configuration (same as `GET /config/{module}`; secrets masked)."
    put_config.__doc__ = (
        f"Change the {module} configuration{': e.g. ' + example if example else ''}.\n\n"
        "The body is merged into the current configuration, then validated as a whole."
    )
    blp.route(path, methods=["GET"], endpoint="get_config")(admin_required(blp.response(200, schema)(get_config)))
    put = blp.alt_response(400, schema=ErrorSchema, description="The merged configuration does not validate")(
        put_config
    )
    blp.route(path, methods=["PUT"], endpoint="put_config")(
        admin_required(blp.arguments(changes)(blp.response(200, schema)(put)))
    )


def get(name: str) -> dict[str, Any]:
    """The current app's effective configuration of module ``name``."""
    return current_app.extensions["trellis"].configs.get(name)
