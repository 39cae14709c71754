"""Export, plan and apply a project: every module's part in one transaction.

A plan runs exactly what an apply would, in a transaction it rolls back: each part plans against the
state the parts before it left (a resource definition names a schema the same project creates), and
whatever the modules' own services refuse (a 409 for data a change would break) is refused at plan time
too. An apply commits that transaction; two applies at once are serialised by the one revision row,
and the later finds it moved (409).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, OperationalError

from trellis import audit, db, hooks
from trellis.errors import APIError, conflict
from trellis.models import ProjectRevision

from . import config_part
from .parts import Change, ProjectInvalid, ProjectPart

VERSION = 1
CONFIG = "config"


def parts() -> list[ProjectPart]:
    """The installed modules' parts, each after the modules it names in ``after`` (then by name)."""
    found: dict[str, ProjectPart] = {}
    for returned in hooks.call().trellis_project_parts():
        for part in returned if isinstance(returned, list) else [returned]:
            found[part.module] = part
    ordered: list[ProjectPart] = []
    placed: set[str] = set()

    def place(part: ProjectPart, seen: tuple[str, ...]) -> None:
        if part.module in placed or part.module in seen:
            return
        for name in part.after:
            if name in found:
                place(found[name], (*seen, part.module))
        placed.add(part.module)
        ordered.append(part)

    for name in sorted(found):
        place(found[name], ())
    return ordered


def export() -> dict[str, Any]:
    """The project: ``{version, modules: {<module>: {config, <key>: {<name>: thing}}}}``."""
    modules: dict[str, dict[str, Any]] = {name: {CONFIG: config_part.export(name)} for name in config_part.modules()}
    for part in parts():
        section = modules.setdefault(part.module, {})
        for key in part.kinds:
            section[key] = part.export(key)
    return {"version": VERSION, "modules": modules}


def dumps(project: dict[str, Any]) -> str:
    """The stable text of a project (or of one thing): sorted keys, two-space indents, a final newline."""
    return json.dumps(project, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def plan(project: Any, prune: bool = False) -> list[Change]:
    """What :func:`apply` would change; nothing is kept."""
    return _run(project, prune, commit=False)


def apply(project: Any, prune: bool = False) -> list[Change]:
    """Make the server what ``project`` says, all or nothing; returns the changes made."""
    return _run(project, prune, commit=True)


def _run(project: Any, prune: bool, commit: bool) -> list[Change]:
    by_module = {part.module: part for part in parts()}
    sections = _check_document(project, set(config_part.modules()), by_module)
    db.commit()  # whatever the caller read so far: the transaction below begins with the revision
    with db.atomic(commit=commit):
        if commit:
            _take()
        changes: list[Change] = []
        for module in sorted(sections):
            wanted = sections[module].get(CONFIG)
            if wanted is not None:
                change = config_part.plan(module, wanted, f"modules.{module}.{CONFIG}")
                if change is not None:
                    _applying(change, f"modules.{module}.{CONFIG}", config_part.apply)
                    changes.append(change)
        for part in by_module.values():
            section = {key: value for key, value in sections.get(part.module, {}).items() if key != CONFIG}
            for change in part.plan(section, f"modules.{part.module}", prune):
                _applying(change, f"modules.{part.module}.{part.key_of(change.kind)}.{change.name}", part.apply)
                changes.append(change)
        if commit and changes:  # an apply that changes nothing leaves no entry
            audit.record("project", "project.apply", None, {"prune": prune, "changes": shown(changes)})
    return changes


def _applying(change: Change, path: str, apply: Callable[[Change], None]) -> None:
    """``apply(change)``; a module's refusal (400, 409) names the thing and the path of what it refused."""
    try:
        apply(change)
    except APIError as exc:
        if exc.status not in (400, 409):
            raise
        errors = {f"{path}.{key}": reasons for key, reasons in (exc.errors or {}).items()} or {path: [exc.message]}
        raise APIError(exc.status, f"{change.module} {change.kind} {change.name}: {exc.message}", errors) from None


def shown(changes: Iterable[Change]) -> list[dict[str, Any]]:
    return [change.shown() for change in changes]


def _check_document(project: Any, configured: set[str], by_module: dict[str, ProjectPart]) -> dict[str, dict[str, Any]]:
    if not isinstance(project, dict):
        raise ProjectInvalid("project", "must be an object")
    unknown = sorted(set(project) - {"version", "modules"})
    if unknown:
        raise ProjectInvalid(unknown[0], "is not a key of a project (version, modules)")
    if project.get("version") != VERSION:
        raise ProjectInvalid("version", f"must be {VERSION}")
    modules = project.get("modules", {})
    if not isinstance(modules, dict):
        raise ProjectInvalid("modules", "must be an object")
    for name, section in sorted(modules.items()):
        path = f"modules.{name}"
        if name not in configured:
            raise ProjectInvalid(path, "no module of that name is loaded")
        if not isinstance(section, dict):
            raise ProjectInvalid(path, "must be an object")
        part = by_module.get(name)
        allowed = {CONFIG, *(part.kinds if part is not None else ())}
        for key in sorted(section):
            if key not in allowed:
                raise ProjectInvalid(
                    f"{path}.{key}", f"is not a key of the module (one of {', '.join(sorted(allowed))})"
                )
    return modules


_TABLE = ProjectRevision.__table__


def _take() -> None:
    """Move the revision on from the one this transaction reads: an apply running at the same time holds
    the row (PostgreSQL) or the write lock (SQLite) until it commits, after which this one finds the row
    moved, or its snapshot stale, and stops (409) instead of applying a plan made before that commit."""
    try:
        seen = db.session.execute(sa.select(_TABLE.c.revision).where(_TABLE.c.id == 1)).scalar()
        if seen is None:  # a restore of an archive made before the row existed
            db.session.execute(sa.insert(_TABLE).values(id=1, revision=0))
            seen = 0
        moved = db.rowcount(
            db.session.execute(
                sa.update(_TABLE)
                .where(_TABLE.c.id == 1, _TABLE.c.revision == seen)
                .values(revision=seen + 1, applied_at=db.utcnow())
            )
        )
    except (IntegrityError, OperationalError) as exc:
        if isinstance(exc, OperationalError) and not _sqlite_busy(exc):
            raise
        moved = 0
    if moved != 1:
        raise conflict("Another project apply ran at the same time; nothing of this one was applied: plan again")


def _sqlite_busy(exc: OperationalError) -> bool:
    code = getattr(exc.orig, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == sqlite3.SQLITE_BUSY  # SQLITE_BUSY and SQLITE_BUSY_SNAPSHOT
