"""npm packages for tests: a ``package.json`` installed once into a cache folder, shared by test runs.

``node_project(path_of_package_json)`` gives the folder: its ``node_modules`` hold the declared versions and
the ``*.mjs`` scripts beside the ``package.json`` are copied in, since ES modules resolve packages beside the
script (run them there: ``node script.mjs`` with ``cwd=folder``). The cache is ``$TRELLIS_NODE_CACHE``
(default ``~/.cache/trellis-node``), one folder per ``package.json`` content. A ``package-lock.json`` beside it
is part of the key, and then ``npm ci`` installs exactly what it pins. Tests that use it skip where
``node_missing()`` (no Node or npm on the PATH).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path


def node_missing() -> bool:
    """Whether Node or npm is not installed (a ``pytest.mark.skipif`` condition)."""
    return shutil.which("node") is None or shutil.which("npm") is None


def node_project(package_json: Path) -> Path:
    """The folder where ``package_json``'s dependencies are installed (npm runs once per content of the file;
    later calls only copy the scripts beside it again)."""
    source = Path(package_json)
    manifest = source.read_bytes()
    lock_file = source.parent / "package-lock.json"
    pinned = lock_file.read_bytes() if lock_file.exists() else b""
    root = Path(os.environ.get("TRELLIS_NODE_CACHE", Path.home() / ".cache" / "trellis-node"))
    # The key names the install's layout too: folders of the older layout may hold a half-written install
    # (two passes installing at once, before the lock below), marked installed all the same.
    folder = root / hashlib.sha256(manifest + b"\0locked-install" + pinned).hexdigest()[:16]
    stamp = folder / ".installed"
    folder.mkdir(parents=True, exist_ok=True)
    # `make test` runs the SQLite and PostgreSQL passes at once: one installs while the other waits (two npm
    # installs into one folder let one pass run its script on a half-written node_modules).
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.exists():
            (folder / "package.json").write_bytes(manifest)
            if pinned:
                (folder / "package-lock.json").write_bytes(pinned)
            result = subprocess.run(
                ["npm", "ci" if pinned else "install", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            assert result.returncode == 0, result.stdout + result.stderr
            stamp.write_text("ok")
        for script in source.parent.glob("*.mjs"):  # ESM resolves packages beside the script
            shutil.copy(script, folder / script.name)
    return folder
