"""The README's module count (the line `make run` prints) and its Modules table match the installed modules:
each module shipped under `plugins/` has one row naming it and its folder, and none is missing."""

from __future__ import annotations

import re
import sys
from importlib.metadata import entry_points
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def plugin_modules() -> dict[str, str]:
    """Installed module name → its folder under plugins/ (the core's own modules, such as backups, are not
    plugins and have no row)."""
    found: dict[str, str] = {}
    for entry in entry_points(group="trellis.modules"):
        module = entry.load()
        source = Path(sys.modules[entry.module].__file__).resolve()
        if ROOT / "plugins" in source.parents:
            found[module.name] = source.relative_to(ROOT).parts[1]
    return found


def table_rows() -> dict[str, str]:
    section = README.split("\n## Modules\n", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| (\w+) \| `plugins/(\w+)` \|", section, re.MULTILINE)
    assert len(rows) == len(dict(rows)), "a module has two rows"
    return dict(rows)


def test_the_module_table_lists_every_installed_plugin_module():
    installed = plugin_modules()
    folders = {path.parent.name for path in ROOT.glob("plugins/*/pyproject.toml")}
    assert set(installed.values()) == folders  # every plugin folder is installed in this virtualenv
    assert table_rows() == installed


def test_the_printed_module_count_is_the_number_of_plugins():
    counts = re.findall(r"installing Trellis and its (\d+) modules", README)
    assert counts and {int(count) for count in counts} == {len(list(ROOT.glob("plugins/*/pyproject.toml")))}
