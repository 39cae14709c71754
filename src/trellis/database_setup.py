"""What a first migration needs from the machine, said in one line: the SQLite file's folder is created
(with the secrets in the environment nothing else creates the instance folder), and a PostgreSQL database
named in TRELLIS_DATABASE_URL that does not exist yet is named with the command that creates it."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from sqlalchemy.engine import URL
from sqlalchemy.exc import OperationalError

# PostgreSQL's SQLSTATE for an unknown database (invalid_catalog_name); psycopg2 leaves it unset on a failed
# connection, so the server's (English) message is matched as well.
UNKNOWN_DATABASE = "3D000"
_UNKNOWN_DATABASE_TEXT = re.compile(r'database "(?P<name>[^"]+)" does not exist')


def create_sqlite_folder(url: URL) -> None:
    """SQLite creates its file, not the folders above it."""
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)


def missing_database(error: OperationalError, url: URL) -> str | None:
    """The line to show when ``error`` says the PostgreSQL database of ``url`` does not exist, else None."""
    if url.get_backend_name() != "postgresql" or not url.database:
        return None
    cause = error.orig
    code = getattr(cause, "pgcode", None) or getattr(cause, "sqlstate", None)
    named = _UNKNOWN_DATABASE_TEXT.search(str(cause))
    if code != UNKNOWN_DATABASE and not (named and named["name"] == url.database):
        return None
    options = [
        *(["-h", url.host] if url.host else []),
        *(["-p", str(url.port)] if url.port else []),
        *(["-U", url.username] if url.username else []),
    ]
    where = f" on {url.host}{f':{url.port}' if url.port else ''}" if url.host else ""
    command = shlex.join(["createdb", *options, url.database])
    return f'the database "{url.database}" (TRELLIS_DATABASE_URL) does not exist{where}; create it with: {command}'
