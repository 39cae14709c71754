"""Trellis Storage module: users' files and folders on local disk or S3, public and signed URLs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask import Flask

from trellis import ConsolePage, EventTopic, Module, OwnedSchema
from trellis.hooks import hookimpl

from .admin import blp as admin_blp
from .backends import S3Clients
from .blob_backups import backup_blobs, backup_store, restore_blobs
from .config import StorageConfig
from .journal import start_sweeper
from .placement import StorageState
from .routes import blp
from .schemas import FileSchema
from .service import delete_user_data
from .tus_routes import blp as tus_blp
from .upload_backups import UploadBackupHooks
from .upload_expiry import start_expiry
from .upload_hashes import RunningHashes


class _UserHooks:
    @hookimpl
    def trellis_user_deleted(self, user_id: str) -> None:
        """A deleted user's files and folders go with them (blobs once the deletion commits)."""
        delete_user_data(user_id)

    @hookimpl
    def trellis_backup_blobs(self, rows: Any) -> Any:
        """A backup holds the blob of every file record in its snapshot."""
        return backup_blobs(rows)

    @hookimpl
    def trellis_backup_store(self) -> Any:
        """Backup archives in S3 go to the bucket of this module's S3 settings."""
        return backup_store()

    @hookimpl
    def trellis_restore_blobs(self, rows: Any, blob: Any) -> Any:
        """A restore puts back the blobs of the restored file records."""
        return restore_blobs(rows, blob)


# Published in the Database module's schema list (read-only: the records are managed here).
OWNED_SCHEMAS = (
    OwnedSchema(
        name="File",
        owner_module="storage",
        fields={
            "name": {"type": "String", "required": True},
            "displayName": "String",
            "folder": {"type": "Relation", "model": "Folder"},
            "owner": {"type": "Relation", "model": "User", "required": True},
            "size": "Number",
            "contentType": "String",
            "sha256": "String",
            "isPublic": "Boolean",
            "provider": "String",
            "url": "String",
        },
    ),
    OwnedSchema(
        name="Folder",
        owner_module="storage",
        fields={
            "name": {"type": "String", "required": True},
            "isPublic": "Boolean",
            "parent": {"type": "Relation", "model": "Folder"},
            "owner": {"type": "Relation", "model": "User", "required": True},
        },
    ),
)


def _init_app(app: Flask) -> None:
    app.extensions["trellis_storage"] = StorageState(s3_clients=S3Clients(), running_hashes=RunningHashes())


# The files of the module's page in the admin console (see ConsolePage).
CONSOLE = Path(__file__).parent / "console"

module = Module(
    name="storage",
    requires=("authentication",),
    blueprints=(blp, tus_blp, admin_blp),
    config_schema=StorageConfig,
    migrations=str(Path(__file__).parent / "migrations" / "versions"),
    console_pages=(ConsolePage("storage", "Storage", str(CONSOLE / "storage.html"), str(CONSOLE / "storage.js")),),
    hooks=(_UserHooks(), UploadBackupHooks()),
    owned_schemas=OWNED_SCHEMAS,
    events=(
        EventTopic("storage.file.create", "A file was uploaded", FileSchema),
        EventTopic("storage.file.delete", "A file was deleted (alone or with its folder)", FileSchema),
    ),
    init_app=_init_app,
    # What killed processes left (part files, blobs without a record) is swept at start and every 10 minutes.
    # Expired resumable uploads are removed at start and every 10 minutes, each by one process.
    background=(start_sweeper, start_expiry),
    description="Files and folders with public and signed URLs; local disk or S3",
)

__all__: list[Any] = ["module"]
