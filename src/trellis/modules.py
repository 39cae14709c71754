"""The module contract: what a Trellis module declares, and how the host finds and orders modules.

A module is a pip-installable distribution that exposes one :class:`Module` object in the
``trellis.modules`` entry-point group. The host never imports a module by name; it only reads
the declarations below. See ``docs/modules.md``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import click
    import flask_smorest
    from flask import Flask
    from marshmallow import Schema

    from .settings import Setting

ENTRY_POINT_GROUP = "trellis.modules"


class ModuleError(RuntimeError):
    """A module set that cannot be loaded (missing dependency, duplicate, bad declaration)."""


@dataclass(frozen=True)
class OwnedSchema:
    """A data schema a module owns and publishes to the Database module's schema list."""

    name: str
    fields: dict[str, Any]
    owner_module: str
    can_modify: str = "Nothing"  # Everything | Nothing | ExtensionOnly
    extendable: bool = False
    timestamps: bool = True


_SLUG = re.compile(r"^[a-z][a-z0-9-]{0,39}$")


@dataclass(frozen=True)
class ConsolePage:
    """A page a module adds to the admin console, served at ``/console/<slug>`` and linked in its navigation.

    slug      the page's URL segment (lowercase letters, digits and ``-``); unique among loaded modules
    title     its link text and heading
    template  path of a Jinja template file in the module's package (``<package>/console/<slug>.html``);
              it extends ``console/layout.html`` and fills ``{% block content %}``
    script    path of an ES module file for the page, or None; served at ``/console/scripts/<slug>.js`` and
              free to ``import … from "/console/static/console.js"`` (the console's lists, forms and API helper)

    The console offers a page only while its module is loaded, so it never knows any module by name.
    """

    slug: str
    title: str
    template: str
    script: str | None = None

    def __post_init__(self) -> None:
        if not _SLUG.match(self.slug):
            raise ModuleError(f"console page slug {self.slug!r} must match {_SLUG.pattern}")


_TOPIC_SEGMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,99}$")


def _is_schema_class(value: object) -> bool:
    from marshmallow import Schema

    return isinstance(value, type) and issubclass(value, Schema)


@dataclass(frozen=True)
class EventTopic:
    """An event topic a module records (``trellis.events.record``): what webhooks and consumers may name.

    pattern      ``<module>.<thing>.<action>``, the module's own name first; ``*`` stands for one
                 segment the module fills at run time (the Database module's ``database.*.create``:
                 one ``<thing>`` per schema); segments of letters, digits, ``_`` and ``-``
    description  what happened, for the people who subscribe to it
    payload      what the event's payload holds: ``{key: what it holds}`` for its top-level keys, or a
                 marshmallow schema class when the payload is an object as the API shows it (its fields
                 are the keys). Tests refuse a recorded payload with a key the topic does not declare;
                 None: not declared (nothing checked). A module that reads another module's payloads
                 calls that module's parser (e.g. ``trellis.access.LiveAudiences.grant_change``)
    """

    pattern: str
    description: str
    payload: Mapping[str, str] | type[Schema] | None = None

    def __post_init__(self) -> None:
        parts = self.pattern.split(".") if isinstance(self.pattern, str) else []
        if len(parts) != 3 or not all(p == "*" or _TOPIC_SEGMENT.match(p) for p in parts) or parts[0] == "*":
            raise ModuleError(
                f"event topic {self.pattern!r} must be <module>.<thing>.<action> "
                "(letters, digits, '_', '-'; '*' for a segment filled at run time, never the module)"
            )
        if not isinstance(self.description, str) or not self.description.strip():
            raise ModuleError(f"event topic {self.pattern!r} needs a description")
        described = isinstance(self.payload, Mapping) and all(
            isinstance(key, str) and isinstance(text, str) and text.strip() for key, text in self.payload.items()
        )
        if not (self.payload is None or described or _is_schema_class(self.payload)):
            raise ModuleError(
                f"event topic {self.pattern!r}: payload must be {{key: description}} or a marshmallow schema class"
            )

    @property
    def module(self) -> str:
        return self.pattern.split(".", 1)[0]

    @property
    def payload_keys(self) -> frozenset[str] | None:
        """The top-level keys a payload may hold (None: not declared)."""
        if self.payload is None:
            return None
        if isinstance(self.payload, Mapping):
            return frozenset(self.payload)
        return frozenset(f.data_key or name for name, f in self.payload().dump_fields.items())

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` (a recorded topic, or a subscription pattern) can name an event of this topic."""
        return overlaps(self.pattern, topic)


def overlaps(left: str, right: str) -> bool:
    """Whether two dotted patterns (``*`` = any one segment) can name the same topic."""
    a, b = left.split("."), right.split(".")
    return len(a) == len(b) and all(x == y or x == "*" or y == "*" for x, y in zip(a, b, strict=True))


@dataclass(frozen=True)
class Module:
    """Declarative description of one module.

    name               unique module name, used in ``/config/{name}`` and ``TRELLIS_MODULES``
    requires           names of modules that must be loaded first
    uses               names of modules loaded first when they are installed and enabled: an optional
                       dependency (the module works without them, asking ``Trellis.module(name)``)
    blueprints         flask-smorest blueprints (registered through the Api, so they are documented)
    config_schema      marshmallow schema class of the module's configuration (defaults = load_default)
    migrations         path of the module's Alembic versions directory (a branch labelled ``name``)
    socket_namespaces  callables returning Flask-SocketIO ``Namespace`` instances
    cli                click group mounted as ``flask trellis <name> ...``
    owned_schemas      schema descriptors shown in the Database module's schema list
    hooks              objects with pluggy ``@hookimpl`` functions (see ``trellis.hooks``)
    openapi_paths      callable(app) -> {"paths": {...}, "schemas": {...}} computed per request
    init_app           callable(app) run once after the module's blueprints are registered
    background         callables(app) started once in each process that serves HTTP (``trellis.server.serve``),
                       never in the CLI or in test apps: a module's background green threads
    console_pages      :class:`ConsolePage` objects: the module's pages in the admin console (none: no page)
    settings           :class:`trellis.settings.Setting` entries: the module's ``TRELLIS_*`` process settings,
                       read into ``app.config`` and checked at start like the core's
    events             :class:`EventTopic` objects: every topic the module records, named after the module
    """

    name: str
    requires: Sequence[str] = ()
    uses: Sequence[str] = ()
    blueprints: Sequence[flask_smorest.Blueprint] = ()
    config_schema: type[Schema] | None = None
    migrations: str | None = None
    socket_namespaces: Sequence[Callable[[], Any]] = ()  # flask_socketio.Namespace (an untyped library)
    cli: click.Group | None = None
    owned_schemas: Sequence[OwnedSchema] = ()
    hooks: Sequence[object] = ()
    openapi_paths: Callable[[Flask], dict[str, Any]] | None = None
    init_app: Callable[[Flask], object] | None = None  # its answer is not used
    background: Sequence[Callable[[Flask], None]] = ()
    console_pages: Sequence[ConsolePage] = ()
    settings: Sequence[Setting] = ()
    events: Sequence[EventTopic] = ()
    description: str = ""

    def __post_init__(self) -> None:
        for topic in self.events:
            if not isinstance(topic, EventTopic):
                raise ModuleError(f"module {self.name!r} declares an event that is not an EventTopic: {topic!r}")
            if topic.module != self.name:
                raise ModuleError(
                    f"module {self.name!r} declares event topic {topic.pattern!r}: its topics begin with {self.name!r}"
                )
        patterns = [topic.pattern for topic in self.events]
        if len(set(patterns)) != len(patterns):
            raise ModuleError(f"module {self.name!r} declares an event topic twice")


def declared_topic(modules: Iterable[Module], topic: str) -> EventTopic | None:
    """The declaration among ``modules`` that names ``topic`` (a recorded topic or a pattern), if any."""
    return next((t for m in modules for t in m.events if t.matches(topic)), None)


def discover(allow: set[str] | None = None) -> list[Module]:
    """Load the Module objects of the installed ``trellis.modules`` entry points.

    Entry points outside ``allow`` are not even imported, so a module that is installed but not
    enabled adds no models to the metadata and cannot break start-up.
    """
    found: list[Module] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if allow is not None and ep.name not in allow:
            continue
        obj = ep.load()
        if callable(obj) and not isinstance(obj, Module):
            obj = obj()
        if not isinstance(obj, Module):
            raise ModuleError(f"entry point {ep.name!r} ({ep.value}) does not give a trellis Module")
        if obj.name != ep.name:
            raise ModuleError(f"entry point {ep.name!r} gives a module named {obj.name!r}")
        found.append(obj)
    return found


def parse_allow_list(value: str | Iterable[str] | None) -> set[str] | None:
    """``TRELLIS_MODULES`` as a set of names; None or empty means every installed module."""
    if value is None:
        return None
    names = value.split(",") if isinstance(value, str) else list(value)
    cleaned = {n.strip() for n in names if n and n.strip()}
    return cleaned or None


def resolve(modules: Iterable[Module], allow: set[str] | None = None) -> list[Module]:
    """Filter by the allow-list and order modules so each comes after the ones it requires or uses.

    Fails fast on a duplicate name, an allow-listed module that is not installed, a missing
    requirement, or a requirement cycle. Ties keep alphabetical order so start-up is deterministic.
    """
    by_name: dict[str, Module] = {}
    for module in modules:
        if module.name in by_name:
            raise ModuleError(f"two installed modules are named {module.name!r}")
        by_name[module.name] = module
    if allow is not None:
        unknown = sorted(allow - by_name.keys())
        if unknown:
            raise ModuleError(f"TRELLIS_MODULES names modules that are not installed: {', '.join(unknown)}")
        by_name = {name: m for name, m in by_name.items() if name in allow}
    for module in by_name.values():
        missing = [r for r in module.requires if r not in by_name]
        if missing:
            raise ModuleError(
                f"module {module.name!r} requires {', '.join(repr(m) for m in missing)}, "
                "which is not installed or not enabled"
            )
    ordered: list[Module] = []
    done: set[str] = set()
    visiting: set[str] = set()

    def visit(module: Module) -> None:
        if module.name in done:
            return
        if module.name in visiting:
            raise ModuleError(f"modules require each other in a cycle through {module.name!r}")
        visiting.add(module.name)
        for dep in sorted({*module.requires, *(name for name in module.uses if name in by_name)}):
            visit(by_name[dep])
        visiting.discard(module.name)
        done.add(module.name)
        ordered.append(module)

    for name in sorted(by_name):
        visit(by_name[name])
    return ordered


def load_modules(allow: str | Iterable[str] | None = None) -> list[Module]:
    """Discover installed modules and resolve them against ``allow`` (``TRELLIS_MODULES``; None: all)."""
    allowed = parse_allow_list(allow)
    names = {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    if allowed is not None and allowed - names:
        unknown = ", ".join(sorted(allowed - names))
        raise ModuleError(f"TRELLIS_MODULES names modules that are not installed: {unknown}")
    return resolve(discover(allowed), allowed)
