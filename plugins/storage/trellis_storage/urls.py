"""The URLs a file record is reached at (its schema shows one; the getUrl route answers the public one)."""

from __future__ import annotations

from typing import Any

from flask import url_for

from .models import File


def public_url(record: File, query: dict[str, Any] | None = None) -> str:
    """The stable public URL (with ``query``: of an image transform of it)."""
    return url_for("storage.public_file", fileId=record.id, name=record.name, _external=True, **(query or {}))


def download_url(record: File) -> str:
    return url_for("storage.download", fileId=record.id, _external=True)


def record_url(record: File) -> str:
    """The ``url`` of a record: stable and credential-free if public, else the (Bearer) download route."""
    return public_url(record) if record.is_public else download_url(record)
