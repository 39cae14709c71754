"""The archive: one zip file holding a manifest, every table as JSON lines, and the stored files.

Layout::

    manifest.json            format, versions, migration heads, tables (rows, sha256), files (size, sha256)
    tables/<name>.jsonl      first line {"columns": [...]}, then one JSON array per row
    files/<module>/<id>      a stored file's bytes, as they were

Everything is streamed: a table's rows go from the database cursor to the compressed entry a row at a time,
and a file's bytes a chunk at a time, so memory stays flat with the data's size. The manifest is written
last (its checksums are known only then); :func:`verify` reads every entry back against it before a restore
changes anything, so a damaged, truncated or foreign file is refused as a whole.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

FORMAT = "trellis-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
CHUNK = 1024 * 1024
_TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_BLOB_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}(/[A-Za-z0-9._-]{1,200}){1,4}$")


class ArchiveError(Exception):
    """The file is not a usable archive; the message says why (answered as 400)."""


class ArchiveWriter:
    """Writes one archive to ``target`` (a path); call :meth:`close` with the manifest to finish it."""

    def __init__(self, target: Path) -> None:
        self._zip = zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1, allowZip64=True)

    def table(self, name: str, columns: list[str], lines: Iterable[str]) -> dict[str, Any]:
        """Stream one table (``lines``: its rows as JSON lines); returns its manifest entry."""
        digest, count = hashlib.sha256(), 0
        with self._zip.open(f"tables/{name}.jsonl", "w", force_zip64=True) as entry:
            header = (json.dumps({"columns": columns}) + "\n").encode()
            digest.update(header)
            entry.write(header)
            for line in lines:
                data = line.encode()
                digest.update(data)
                entry.write(data)
                count += 1
        return {"name": name, "rows": count, "sha256": digest.hexdigest()}

    def blob(self, name: str, chunks: Iterable[bytes]) -> dict[str, Any]:
        """Stream one stored file; returns its manifest entry. Stored, not deflated: files are mostly
        compressed already, and deflating them would cost the backup's CPU for nothing."""
        digest, size = hashlib.sha256(), 0
        info = zipfile.ZipInfo(f"files/{name}")
        info.compress_type = zipfile.ZIP_STORED
        with self._zip.open(info, "w", force_zip64=True) as entry:
            for chunk in chunks:
                digest.update(chunk)
                entry.write(chunk)
                size += len(chunk)
        return {"name": name, "size": size, "sha256": digest.hexdigest()}

    def close(self, manifest: dict[str, Any]) -> None:
        self._zip.writestr(MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))
        self._zip.close()

    def abort(self) -> None:
        try:
            self._zip.close()
        except (OSError, ValueError, zipfile.BadZipFile):
            pass


@dataclass(frozen=True)
class Archive:
    """A verified archive: its manifest and the means to read its tables and files."""

    path: Path
    manifest: dict[str, Any]

    def tables(self) -> dict[str, dict[str, Any]]:
        return {entry["name"]: entry for entry in self.manifest["tables"]}

    def lines(self, name: str) -> tuple[list[str], Iterator[list[Any]]]:
        """The column names of table ``name`` and an iterator over its rows (lists of JSON values)."""
        archive = zipfile.ZipFile(self.path)
        entry = archive.open(f"tables/{name}.jsonl")
        header = json.loads(entry.readline())

        def rows() -> Iterator[list[Any]]:
            try:
                for line in entry:
                    yield json.loads(line)
            finally:
                entry.close()
                archive.close()

        return header["columns"], rows()

    def open_blob(self, name: str) -> IO[bytes]:
        """A stored file's bytes as a binary file (close it when done)."""
        if name not in {f["name"] for f in self.manifest["files"]}:
            raise KeyError(name)
        archive = zipfile.ZipFile(self.path)
        entry = archive.open(f"files/{name}")
        close = entry.close

        def close_both() -> None:
            close()
            archive.close()

        entry.close = close_both  # type: ignore[method-assign]
        return entry


def verify(path: Path, check_heads: Callable[[list[str]], None] | None = None, checksums: bool = True) -> Archive:
    """Read the whole archive against its manifest (every entry's sha256 and the zip's own CRCs).

    ``check_heads(heads)`` raises ArchiveError for migration heads this database cannot restore from
    (``lineage.check``). Without ``checksums`` only the manifest and the list of entries are read (the zip's
    directory: quick)."""
    try:
        with zipfile.ZipFile(path) as archive:
            manifest = _manifest(archive)
            listed = {f"tables/{t['name']}.jsonl": t["sha256"] for t in manifest["tables"]}
            listed.update({f"files/{f['name']}": f["sha256"] for f in manifest["files"]})
            present = set(archive.namelist()) - {MANIFEST}
            if present != set(listed):
                missing, extra = sorted(set(listed) - present), sorted(present - set(listed))
                raise ArchiveError(
                    f"the archive's entries do not match its manifest (missing {missing[:3]}, extra {extra[:3]})"
                )
            if checksums:
                _check_sums(archive, listed)
    except ArchiveError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError, KeyError, ValueError) as exc:
        raise ArchiveError(f"not a readable Trellis backup ({exc.__class__.__name__}: {_short(exc)})") from None
    if check_heads is not None:
        check_heads(manifest["heads"])
    return Archive(path, manifest)


def cooperate() -> None:
    """Let the process's other work run: under eventlet a backup or restore is a green thread, and SQLite's
    calls never yield to the hub by themselves, so without this a restore of 30,000 documents held every
    request of the process (its own 202 included) for its whole 1.3 s. A no-op switch elsewhere."""
    time.sleep(0)


def _check_sums(archive: zipfile.ZipFile, listed: dict[str, str]) -> None:
    for name, expected in listed.items():
        digest = hashlib.sha256()
        with archive.open(name) as entry:
            while chunk := entry.read(CHUNK):
                digest.update(chunk)
                cooperate()
        if digest.hexdigest() != expected:
            raise ArchiveError(f"{name} is damaged (its checksum does not match the manifest)")


def _short(exc: BaseException) -> str:
    return str(exc)[:200]


def _manifest(archive: zipfile.ZipFile) -> dict[str, Any]:
    try:
        manifest = json.loads(archive.read(MANIFEST))
    except KeyError:
        raise ArchiveError("not a Trellis backup: the archive has no manifest.json") from None
    except (ValueError, UnicodeDecodeError):
        raise ArchiveError("not a Trellis backup: manifest.json is not JSON") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArchiveError("not a Trellis backup: the manifest's format is not trellis-backup")
    if manifest.get("formatVersion") != FORMAT_VERSION:
        raise ArchiveError(
            f"backup format version {manifest.get('formatVersion')!r} is not {FORMAT_VERSION}: made by other code"
        )
    tables, files, heads = manifest.get("tables"), manifest.get("files"), manifest.get("heads")
    if not isinstance(heads, list) or not all(isinstance(h, str) for h in heads):
        raise ArchiveError("the manifest lists no migration heads")
    if not isinstance(tables, list) or not all(_table_entry(t) for t in tables):
        raise ArchiveError("the manifest's table list is malformed")
    if not isinstance(files, list) or not all(_file_entry(f) for f in files):
        raise ArchiveError("the manifest's file list is malformed")
    if len({t["name"] for t in tables}) != len(tables):
        raise ArchiveError("the manifest lists a table twice")
    return manifest


def _table_entry(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("name"), str)
        and bool(_TABLE_NAME.match(entry["name"]))
        and isinstance(entry.get("rows"), int)
        and isinstance(entry.get("sha256"), str)
    )


def _file_entry(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("name"), str)
        and bool(_BLOB_NAME.match(entry["name"]))
        and ".." not in entry["name"]
        and isinstance(entry.get("sha256"), str)
    )
