"""``flask trellis module new NAME``: an installable skeleton module, rendered from ``template/``.

Every file under ``template/`` ends in ``.tmpl`` (so neither ruff nor setuptools reads it as code) and
carries two placeholders, in paths and contents alike: ``{{name}}`` (the module's name) and
``{{Name}}`` (its CamelCase form, for class names). ``docs/modules.md`` shows the skeleton rendered
for ``bookmarks``; ``tests/test_module_guide.py`` keeps the two identical.
"""

from __future__ import annotations

import keyword
import re
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

SUFFIX = ".tmpl"
# The name is a Python identifier (package ``trellis_<name>``), a URL segment and a table prefix.
NAME_PATTERN = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")
MAX_NAME_LENGTH = 40


class ScaffoldError(ValueError):
    """A name or target the skeleton cannot be written for; the message says why."""


def check_name(name: str) -> None:
    if not NAME_PATTERN.fullmatch(name) or len(name) > MAX_NAME_LENGTH:
        raise ScaffoldError(
            f"{name!r} is not a module name: use lower-case letters, digits and single underscores, "
            f"starting with a letter, at most {MAX_NAME_LENGTH} characters (e.g. 'bookmarks' or 'bird_watch')"
        )
    if keyword.iskeyword(name):
        raise ScaffoldError(f"{name!r} is a Python keyword; choose another module name")


def camel_case(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def substitute(text: str, name: str) -> str:
    return text.replace("{{name}}", name).replace("{{Name}}", camel_case(name))


def _templates(folder: Traversable, prefix: str = "") -> list[tuple[str, str]]:
    """(relative path with placeholders, text) of every template file, sorted by path."""
    found: list[tuple[str, str]] = []
    for entry in folder.iterdir():
        path = f"{prefix}{entry.name}"
        if entry.is_dir():
            found += _templates(entry, f"{path}/")
        elif entry.name.endswith(SUFFIX):
            found.append((path.removesuffix(SUFFIX), entry.read_text(encoding="utf-8")))
    return sorted(found)


def render(name: str) -> dict[str, str]:
    """The skeleton of module ``name``: {relative path: text}."""
    check_name(name)
    return {substitute(path, name): substitute(text, name) for path, text in _templates(files(__name__) / "template")}


def write(name: str, parent: Path) -> Path:
    """Write the skeleton into ``parent/trellis-<name>`` (which must not exist) and return that folder."""
    rendered = render(name)
    target = parent / f"trellis-{name}"
    if target.exists():
        raise ScaffoldError(f"{target} already exists; choose another --path or remove it")
    for relative, text in rendered.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return target
