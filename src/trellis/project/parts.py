"""What a module implements to take part in project as code: a :class:`ProjectPart`.

A module that keeps administrator-made state (schemas, templates, forms …) returns one part from the
``trellis_project_parts`` hook. The part shows that state as plain JSON things by name, says how a wanted
thing differs from the stored one, and creates, updates and deletes things through the module's own
services. The core runs every part inside one transaction (``trellis.project.runner``), so a project
applies all or nothing across modules; the module's services commit as usual, which inside that
transaction only flushes (``trellis.db.atomic``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from marshmallow import ValidationError

from trellis.errors import APIError
from trellis.hooks import hookimpl

from .diff import differences


class ProjectInvalid(APIError):
    """A project that cannot be applied as written: 400 naming the path (``modules.database.schemas.Task``)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(400, f"Invalid project at {path}: {message}", {path: [message]})
        self.path = path


def first_error(messages: Any, prefix: str = "") -> tuple[str, str]:
    """The first field error of marshmallow's nested messages (or an APIError's ``errors``) as a dotted path
    and its text. A ``Dict`` field files an entry's errors under ``key``/``value``, which the document has not."""
    if isinstance(messages, dict):
        for key in sorted(messages, key=str):
            if key in ("key", "value") and prefix:
                return first_error(messages[key], prefix)
            return first_error(messages[key], f"{prefix}.{key}" if prefix else str(key))
    if isinstance(messages, list) and messages:
        first = messages[0]
        return (prefix, first) if isinstance(first, str) else first_error(first, prefix)
    return prefix, str(messages)


def invalid(path: str, error: ValidationError | APIError) -> ProjectInvalid:
    """A marshmallow load's or a module service's refusal of a thing at ``path``, as the 400 of its first field."""
    messages = error.normalized_messages() if isinstance(error, ValidationError) else error.errors
    where, message = first_error(messages) if messages else ("", getattr(error, "message", str(error)))
    return ProjectInvalid(f"{path}.{where}" if where else path, message)


def taking_part(part: ProjectPart) -> object:
    """The object a module lists in ``Module.hooks`` to take part in projects with ``part``."""
    return _Hooks(part)


class _Hooks:
    def __init__(self, part: ProjectPart) -> None:
        self.part = part

    @hookimpl
    def trellis_project_parts(self) -> ProjectPart:
        return self.part


@dataclass(frozen=True)
class Change:
    """One thing created, updated or deleted. ``wanted`` (what to store) and ``current`` (what is stored) stay
    on the server; ``detail`` is what a person reads: the paths added, removed and changed."""

    module: str
    kind: str
    name: str
    action: str
    detail: list[dict[str, Any]] | None = None
    wanted: Any = field(default=None, compare=False, repr=False)
    current: Any = field(default=None, compare=False, repr=False)

    def shown(self) -> dict[str, Any]:
        out: dict[str, Any] = {"module": self.module, "kind": self.kind, "name": self.name, "action": self.action}
        if self.detail:
            out["detail"] = self.detail
        return out


class ProjectPart:
    """A module's share of the project: the keys of its section, each a kind of thing by name.

    module    the module's name: its section is ``modules.<module>``
    kinds     section key → the kind of thing it holds (``{"schemas": "schema"}``)
    after     modules whose changes must be in place first (the schemas a resource definition names)

    Subclasses implement :meth:`stored`, :meth:`normalise` and :meth:`create`/:meth:`update`/:meth:`delete`;
    :meth:`plan` compares, and may be extended for checks across things (:meth:`check_project`).
    """

    module: str = ""
    kinds: Mapping[str, str] = {}
    after: Sequence[str] = ()

    def stored(self, key: str) -> dict[str, Any]:
        """Every thing of section key ``key`` as it is stored now, by name, in the form :meth:`normalise` gives."""
        raise NotImplementedError

    def export(self, key: str) -> dict[str, Any]:
        """What an export shows of ``key`` (by default :meth:`stored`; a part with secrets masks them)."""
        return self.stored(key)

    def normalise(self, key: str, name: str, thing: Any, path: str) -> Any:
        """``thing`` as the project gives it, checked and in the stored form (defaults filled in), so that
        equal things compare equal; raise :class:`ProjectInvalid` naming ``path`` when it is not valid."""
        raise NotImplementedError

    def check_project(self, section: dict[str, dict[str, Any]], path: str) -> None:
        """Checks across the things of the section (normalised), after each one passed :meth:`normalise`."""

    def create(self, key: str, name: str, thing: Any) -> None:
        raise NotImplementedError

    def update(self, key: str, name: str, thing: Any, current: Any) -> None:
        raise NotImplementedError

    def delete(self, key: str, name: str, current: Any) -> None:
        raise NotImplementedError

    def describe(self, key: str, current: Any, wanted: Any) -> list[dict[str, Any]]:
        """The detail of an update (a part with secrets masks their values here)."""
        return differences(current, wanted)

    def order(self, changes: list[Change]) -> list[Change]:
        """The order to apply the section's changes in (by default: creates and updates, then deletes)."""
        return sorted(changes, key=lambda change: change.action == "delete")

    def plan(self, section: Mapping[str, Any], path: str, prune: bool) -> list[Change]:
        """The changes that make the stored state what ``section`` says. Kinds the section does not name are
        left alone; with ``prune`` a named kind loses the things the section lacks."""
        wanted: dict[str, dict[str, Any]] = {}
        for key, things in section.items():
            if not isinstance(things, dict):
                raise ProjectInvalid(f"{path}.{key}", "must be an object of things by name")
            wanted[key] = {
                name: self.normalise(key, name, thing, f"{path}.{key}.{name}") for name, thing in sorted(things.items())
            }
        self.check_project(wanted, path)
        changes: list[Change] = []
        for key, things in wanted.items():
            kind = self.kinds[key]
            current = self.stored(key)
            for name, thing in things.items():
                if name not in current:
                    changes.append(Change(self.module, kind, name, "create", None, thing))
                elif thing != current[name]:
                    detail = self.describe(key, current[name], thing)
                    changes.append(Change(self.module, kind, name, "update", detail, thing, current[name]))
            if prune:
                for name in sorted(set(current) - set(things)):
                    changes.append(Change(self.module, kind, name, "delete", None, None, current[name]))
        return self.order(changes)

    def key_of(self, kind: str) -> str:
        """The section key that holds things of ``kind``."""
        return next(key for key, named in self.kinds.items() if named == kind)

    def apply(self, change: Change) -> None:
        key = self.key_of(change.kind)
        if change.action == "create":
            self.create(key, change.name, change.wanted)
        elif change.action == "update":
            self.update(key, change.name, change.wanted, change.current)
        else:
            self.delete(key, change.name, change.current)
