"""Temp files of uploads a killed process left behind are removed at start and before later uploads."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from trellis import create_app
from trellis_storage.backends import STALE_PART_SECONDS


def _plant(root: Path, name: str, age_seconds: float) -> Path:
    """A part file as a killed upload leaves it: next to its target, last written ``age_seconds`` ago."""
    folder = root / "ab" / "cd"
    folder.mkdir(parents=True, exist_ok=True)
    part = folder / name
    part.write_bytes(b"x" * 1024)
    moment = time.time() - age_seconds
    os.utime(part, (moment, moment))
    return part


def test_stale_parts_are_removed_at_start_and_fresh_ones_kept(app_config, tmp_path):
    root = tmp_path / "storage"
    stale = _plant(root, ".upload-killed.part", STALE_PART_SECONDS + 60)
    fresh = _plant(root, ".upload-running.part", 5)
    stored = _plant(root, "abcd" + "0" * 28, STALE_PART_SECONDS * 10)  # a stored file is never touched
    create_app({**app_config, "STORAGE_PATH": str(root)})
    assert not stale.exists()
    assert fresh.exists() and stored.exists()


def test_an_upload_sweeps_the_configured_local_root(client, storage, user, upload, png):
    if storage.kind != "local":
        pytest.skip("S3 aborts its multipart uploads itself (see test_storage_backends)")
    root = Path(storage.settings["local"]["path"])
    stale = _plant(root, ".upload-killed.part", STALE_PART_SECONDS + 60)
    response = upload(user.headers, png, "pic.png")
    assert response.status_code == 201, response.get_json()
    assert not stale.exists()
