"""The built TypeScript/JavaScript client SDK (``clients/js``, npm package ``trellis-client``), shared by its tests:
``test_js_client.py`` (Node) and ``test_js_client_browser.py`` (Chromium) import the ``sdk`` fixture.

The package is built as its users build it: its locked dependencies installed with ``npm ci`` into the Node
cache folder (``trellis.testing.node``), then ``npm run build`` (tsc, then esbuild's browser bundle
``dist/trellis.browser.js``). A test process builds it once, whichever of the two files asks first."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from trellis.testing import node

CLIENT = Path(__file__).resolve().parents[1] / "clients" / "js"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# CI installs Node (the Makefile's `node` target): there a missing Node fails these tests, never skips them.
needs_node = pytest.mark.skipif(node.node_missing() and not IN_CI, reason="Node is not installed")


@dataclass
class Built:
    folder: Path  # the package's sources, its node_modules and dist/
    output: str  # what the build printed


_built: list[Built] = []  # the process's build: each module importing the fixture has a fixture of its own


@pytest.fixture(scope="session")
def sdk(tmp_path_factory) -> Built:
    """``clients/js`` copied to a folder of its own (the two databases' passes build at once), its dependencies
    from the cache, built."""
    if not _built:
        _built.append(build(tmp_path_factory.mktemp("trellis-client")))
    return _built[0]


def build(folder: Path) -> Built:
    modules = node.node_project(CLIENT / "package.json") / "node_modules"
    for name in ("package.json", "package-lock.json", "tsconfig.json", "README.md"):
        shutil.copy(CLIENT / name, folder / name)
    for name in ("src", "test"):  # test/: the Node tests and the type check
        shutil.copytree(CLIENT / name, folder / name)
    (folder / "node_modules").symlink_to(modules, target_is_directory=True)
    result = subprocess.run(
        ["npm", "run", "build", "--silent"], cwd=folder, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return Built(folder, result.stdout + result.stderr)
