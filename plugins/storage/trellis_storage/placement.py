"""Where files live: the module's settings, the backend new uploads go to, and the backend that holds a
stored file (its own, whatever the provider is now)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import current_app

from trellis.module_config import get as get_config

from .backends import Backend, LocalBackend, S3Backend, S3Clients
from .models import File

MODULE = "storage"
READ_CHUNK = 1024 * 1024


@dataclass
class StorageState:
    """Per-app state, at ``app.extensions["trellis_storage"]``."""

    s3_clients: S3Clients
    running_hashes: Any  # upload_hashes.RunningHashes: SHA-256 of resumable uploads in progress


def config() -> dict[str, Any]:
    return get_config(MODULE)


def active_backend() -> Backend:
    """The backend new uploads go to (the configured provider)."""
    cfg = config()
    if cfg["provider"] == "s3":
        return s3_backend(cfg, cfg["s3"]["bucket"])
    return _local(cfg)


def backend_of(record: File) -> Backend:
    """The backend a stored file lives in, whatever the provider is now."""
    return backend_at(config(), record.backend, record.location)


def backend_at(cfg: dict[str, Any], name: str, location: str | None) -> Backend:
    """The backend of a stored blob's ``backend`` and ``location`` columns."""
    if name == "s3":
        return s3_backend(cfg, location or cfg["s3"]["bucket"])
    return _local(cfg)


def _local(cfg: dict[str, Any]) -> LocalBackend:
    return LocalBackend(cfg["local"].get("path") or current_app.config["STORAGE_PATH"])


def s3_backend(cfg: dict[str, Any], bucket: str) -> S3Backend:
    state: StorageState = current_app.extensions["trellis_storage"]
    return S3Backend(state.s3_clients.get(cfg["s3"]), bucket)
