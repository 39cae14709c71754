"""Apps for the backup tests: each on a new database of its own (SQLite or PostgreSQL), since a backup reads
committed data through its own snapshot (the savepoint fixture's rows are invisible to it)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from trellis.testing.plugin import TEST_MASTER_KEY

ADMIN = {"masterkey": TEST_MASTER_KEY}


def postgres_url() -> str | None:
    import psycopg2

    base = os.environ.get("TRELLIS_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    try:
        psycopg2.connect(base, connect_timeout=3).close()
    except psycopg2.OperationalError:
        return None
    return base


@pytest.fixture()
def make_app(app_config: dict[str, Any], tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """``make_app(kind, **settings)``: a migrated app on a new database of ``kind`` (sqlite or postgresql)."""
    import psycopg2

    from trellis import create_app
    from trellis.admins import ensure_first_admin
    from trellis.migrate import upgrade

    made: list[tuple[Any, str | None]] = []

    def make(kind: str, **settings: Any) -> Any:
        folder = tmp_path / uuid.uuid4().hex[:8]
        folder.mkdir()
        dropped = None
        if kind == "sqlite":
            url = f"sqlite:///{folder / 'trellis.db'}"
        else:
            base = postgres_url()
            if base is None:
                pytest.skip("PostgreSQL is unreachable")
            dropped = f"trellis_backup_{uuid.uuid4().hex[:10]}"
            connection = psycopg2.connect(base)
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(f'CREATE DATABASE "{dropped}"')
            connection.close()
            url = base.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg2://") + f"/{dropped}"
        config = {
            **app_config,
            "DATABASE_URL": url,
            "STORAGE_PATH": str(folder / "storage"),
            "BACKUP_PATH": str(folder / "backups"),
            **settings,
        }
        application = create_app(config)
        upgrade(application)
        with application.app_context():
            ensure_first_admin()
        made.append((application, dropped))
        return application

    yield make
    for application, dropped in made:
        application.extensions["trellis_events"].stop()
        application.extensions["trellis"].engine.dispose()
        if dropped:
            connection = psycopg2.connect(postgres_url())
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(f'DROP DATABASE IF EXISTS "{dropped}" WITH (FORCE)')
            connection.close()


def backup(app: Any, path: Path) -> dict[str, Any]:
    """Write a backup of ``app`` to ``path`` as the CLI does; returns its manifest."""
    from trellis.backups import jobs

    with app.app_context():
        return jobs.backup_now(app, path)[1]


def restore(app: Any, path: Path) -> dict[str, Any]:
    """Restore the archive at ``path`` into ``app`` as the CLI does (APIError 400 when it cannot)."""
    from trellis.backups import jobs

    with app.app_context():
        return jobs.restore_from(app, path)
