"""The S3 store of archives (config ``backups.storage: s3``): the Storage module's bucket, an archive's key
in it, and copying an archive there and back."""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
from pathlib import Path
from typing import Any

from flask import current_app

from ..errors import conflict
from . import archive

log = logging.getLogger(__name__)

REMOTE_PREFIX = "trellis-backup:"  # hashed with an archive's name into its key in the S3 store


def store() -> Any:
    """The Storage module's S3 backend (409 when it has no bucket configured)."""
    found = current_app.extensions["trellis"].hooks.hook.trellis_backup_store()
    if found is None:
        raise conflict("backups.storage is s3, but the Storage module has no S3 bucket configured")
    return found


def key(name: str) -> str:
    """The archive's key in the bucket: shaped as the Storage module's blob keys (two shard levels and 32 hex
    digits, the only keys its backends accept), from a hash of the name."""
    digest = hashlib.sha256(f"{REMOTE_PREFIX}{name}".encode()).hexdigest()[:32]
    return f"{digest[:2]}/{digest[2:4]}/{digest}"


def push(path: Path, name: str) -> None:
    """Copy a finished archive to the S3 store (the local file is removed by the caller once it is there)."""
    writer = store().writer(key(name), "application/zip")
    try:
        with path.open("rb") as source:
            while chunk := source.read(archive.CHUNK):
                writer.write(chunk)
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    finally:
        writer.close()


def pull(name: str, path: Path) -> None:
    """Fetch an archive from the S3 store to ``path`` (409 when the store cannot give it)."""
    part = path.with_name(f"{name}.{secrets.token_hex(4)}.fetch")
    chunks = store().read(key(name))
    try:
        with part.open("wb") as out:
            for chunk in chunks:
                out.write(chunk)
        os.replace(part, path)
    except Exception as exc:
        part.unlink(missing_ok=True)
        log.error("could not fetch backup %s from S3: %s", name, exc.__class__.__name__)
        raise conflict(f"Backup {name} could not be fetched from S3 ({exc.__class__.__name__})") from None
    finally:
        chunks.close()
