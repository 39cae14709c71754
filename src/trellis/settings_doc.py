"""The README tables of settings, written from their declarations: ``python -m trellis.settings_doc``.

``README.md`` holds the core's table (:data:`trellis.settings.CORE`); the README of each installed module
that declares settings (``Module.settings``) holds that module's. Each table sits between the two marker
lines below. ``--check`` writes nothing and lists the READMEs that differ (exit status 1).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path

from .modules import ENTRY_POINT_GROUP, Module
from .settings import CORE, Setting

COMMAND = "python -m trellis.settings_doc"
BEGIN = f"<!-- settings table: written by `{COMMAND}` from the declarations; edit those, not this -->"
END = "<!-- end of settings table -->"
# The checkout holding the core (installed editable, as the Makefile does).
ROOT = Path(__file__).resolve().parents[2]


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def shown_default(setting: Setting) -> str:
    """The default as the README shows it."""
    value = setting.default
    if setting.shown is not None:
        return setting.shown
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int | float):
        return f"`{_number(value)}`"
    if isinstance(value, tuple | list):
        return "`" + ",".join(_number(item) if isinstance(item, int | float) else str(item) for item in value) + "`"
    return f"`{value}`"


def markdown(table: Sequence[Setting]) -> str:
    rows = [
        "| variable | type | default | meaning |",
        "|---|---|---|---|",
        *(
            f"| `{setting.variable}` | {setting.kind.label} | {shown_default(setting)} | {setting.description} |"
            for setting in table
        ),
    ]
    return "\n".join(rows)


def documents() -> dict[Path, tuple[Setting, ...]]:
    """Each README with the settings its table lists."""
    found: dict[Path, tuple[Setting, ...]] = {ROOT / "README.md": CORE}
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        module = entry.load()
        if callable(module) and not isinstance(module, Module):
            module = module()
        if module.settings:
            package = import_module(entry.module.split(".")[0])
            found[Path(str(package.__file__)).resolve().parents[1] / "README.md"] = tuple(module.settings)
    return found


def rewritten(text: str, table: Sequence[Setting], path: Path) -> str:
    """``text`` with the table between the markers written anew."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{path} has no settings table: add the lines {BEGIN!r} and {END!r}")
    return text[: start + len(BEGIN)] + "\n" + markdown(table) + "\n" + text[end:]


def stale(found: dict[Path, tuple[Setting, ...]]) -> list[Path]:
    """The READMEs whose tables differ from the declarations."""
    return [path for path, table in found.items() if rewritten(path.read_text(), table, path) != path.read_text()]


def write(found: dict[Path, tuple[Setting, ...]]) -> list[Path]:
    """Write the tables that differ; the READMEs written."""
    written = stale(found)
    for path in written:
        path.write_text(rewritten(path.read_text(), found[path], path))
    return written


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--check"]:
        differing = stale(documents())
        for path in differing:
            print(f"{path}: its settings table differs from the declarations; run: {COMMAND}")
        return 1 if differing else 0
    if args:
        print(f"usage: {COMMAND} [--check]", file=sys.stderr)
        return 2
    for path in write(documents()):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
