"""A project on disk: one JSON file, or a folder of one file per thing (reviewable diffs in git).

The folder::

    project.json                     {"version": 1}
    <module>/config.json             the module's configuration
    <module>/<kind key>/<name>.json  one thing (a name that is not a plain file name is %-encoded)
    <module>/<kind key>/.keep        in a kind with no things: the folder says "none", which git keeps
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from .parts import ProjectInvalid
from .runner import CONFIG, dumps

INDEX = "project.json"
KEEP = ".keep"


def read(path: Path) -> Any:
    """The project in ``path``, a file or a folder."""
    if path.is_dir():
        return _read_folder(path)
    return _load(path)


def write(project: dict[str, Any], path: Path) -> list[Path]:
    """Write ``project`` to ``path``: a ``.json`` file, else a folder (files it no longer holds go). Returns
    the files written."""
    if path.suffix == ".json":
        path.write_text(dumps(project), encoding="utf-8")
        return [path]
    if path.exists() and any(path.iterdir()) and not (path / INDEX).exists():
        raise ProjectInvalid(str(path), f"is a folder that holds no {INDEX}: not overwritten")
    files: dict[Path, Any] = {path / INDEX: {"version": project["version"]}}
    for module, section in project["modules"].items():
        for key, value in section.items():
            if key == CONFIG:
                files[path / module / f"{CONFIG}.json"] = value
                continue
            for name, thing in value.items():
                files[path / module / key / f"{quote(name, safe='')}.json"] = thing
            if not value:
                files[path / module / key / KEEP] = None
    for old in sorted(path.glob("*/**/*")) if path.exists() else []:
        if old.is_file() and (old.suffix == ".json" or old.name == KEEP) and old not in files:
            old.unlink()
    for file, content in files.items():
        file.parent.mkdir(parents=True, exist_ok=True)
        text = "" if content is None else dumps(content)
        if not file.exists() or file.read_text(encoding="utf-8") != text:
            file.write_text(text, encoding="utf-8")
    for folder in sorted((p for p in path.glob("**/*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()
    return sorted(file for file, content in files.items() if content is not None)


def _read_folder(path: Path) -> dict[str, Any]:
    index = _load(path / INDEX) if (path / INDEX).exists() else None
    if not isinstance(index, dict):
        raise ProjectInvalid(str(path / INDEX), "a project folder needs this file, an object with its version")
    modules: dict[str, Any] = {}
    for module in sorted(p for p in path.iterdir() if p.is_dir()):
        section: dict[str, Any] = {}
        for entry in sorted(module.iterdir()):
            if entry.is_file() and entry.name == f"{CONFIG}.json":
                section[CONFIG] = _load(entry)
            elif entry.is_dir():
                section[entry.name] = {unquote(f.stem): _load(f) for f in sorted(entry.glob("*.json"))}
        modules[module.name] = section
    return {**index, "modules": modules}


def _load(file: Path) -> Any:
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ProjectInvalid(str(file), f"cannot be read ({exc.__class__.__name__})") from None
    except json.JSONDecodeError as exc:
        raise ProjectInvalid(str(file), f"is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
