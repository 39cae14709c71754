"""Where an archive's migrations stand against this installation's, and moving a restore's transaction to
them and back.

An archive from an older release holds rows shaped as at its migration heads. A restore empties the tables,
runs the downgrades of every later revision (over empty tables: no production row ever meets a downgrade),
puts the archive's rows into the tables as they were, then runs every later upgrade over them, data
migrations included: exactly what upgrading that release's database would have done. All of it happens in
the restore's one transaction (PostgreSQL and SQLite both have transactional DDL; SQLAlchemy emits SQLite's
BEGIN itself, ``trellis.db``), so a failing migration rolls everything back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.environment import EnvironmentContext
from alembic.runtime.migration import MigrationStep
from alembic.script import ScriptDirectory
from flask import Flask
from sqlalchemy.engine import Connection

from ..migrate import alembic_config
from .archive import ArchiveError

# The revision that made the backups' own tables: any archive written by Trellis is at or above it, and a
# restore keeps those tables (the restore lock among them) as they are, so it never migrates below it.
BACKUPS_SINCE = "core_0005"


def scripts(app: Flask) -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config(app))


def below(script: ScriptDirectory, heads: Iterable[str]) -> set[str]:
    """Every revision at or below ``heads`` (their ancestors and dependencies, the heads included)."""
    heads = tuple(heads)
    return {r.revision for r in script.iterate_revisions(heads, "base")} if heads else set()


def check(script: ScriptDirectory, archived: list[str], ours: list[str]) -> None:
    """Refuse (ArchiveError) an archive whose heads this database cannot migrate from: unknown revisions
    (newer code, or a module not loaded here), or revisions above this database's heads."""
    known = {r.revision for r in script.walk_revisions()}
    unknown = sorted(set(archived) - known)
    if unknown:
        raise ArchiveError(
            f"the backup's migrations {', '.join(unknown)} are unknown here: it comes from newer code, or from "
            "a module this installation does not load"
        )
    ahead = sorted(set(archived) - below(script, ours))
    if ahead:
        raise ArchiveError(
            f"the backup's migrations {', '.join(ahead)} are not among this database's ({', '.join(sorted(ours))}): "
            "upgrade the database first (flask --app wsgi trellis db upgrade)"
        )
    if BACKUPS_SINCE not in below(script, archived):
        raise ArchiveError(
            f"the backup's migrations are below {BACKUPS_SINCE}, older than backups: not a Trellis backup"
        )
    for head in archived:
        if head in below(script, set(archived) - {head}):
            raise ArchiveError(f"the backup's migration heads are inconsistent ({head} is below another head)")


def downgrade_to(app: Flask, connection: Connection, heads: list[str]) -> None:
    """Run, on ``connection``, the downgrade of every revision above ``heads`` (newest first)."""

    def steps(script: ScriptDirectory, current: Any) -> list[MigrationStep]:
        above = below(script, _heads(current)) - below(script, heads)
        later = [r for r in script.iterate_revisions(_heads(current), "base") if r.revision in above]
        return [MigrationStep.downgrade_from_script(script.revision_map, r) for r in later]

    _run(app, connection, steps)


def upgrade(app: Flask, connection: Connection) -> None:
    """Run, on ``connection``, every migration up to this code's heads."""
    command.upgrade(_on(app, connection), "heads")


def _heads(current: Any) -> tuple[str, ...]:
    if current is None:
        return ()
    return (current,) if isinstance(current, str) else tuple(current)


def _on(app: Flask, connection: Connection) -> Config:
    config = alembic_config(app)
    config.attributes["connection"] = connection  # env.py runs on it and leaves the transaction open
    return config


def _run(app: Flask, connection: Connection, steps: Callable[[ScriptDirectory, Any], list[Any]]) -> None:
    config = _on(app, connection)
    script = ScriptDirectory.from_config(config)
    with EnvironmentContext(config, script, fn=lambda current, _context: steps(script, current)):
        script.run_env()
