"""``flask --app wsgi trellis backup …``: create, restore and list archives from a shell."""

from __future__ import annotations

from pathlib import Path

import click

from .. import current
from ..errors import APIError
from . import jobs


@click.group("backup")
def backup_group() -> None:
    """Backups of every table and stored file (docs/operations.md)."""


@backup_group.command("create")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), help="write the archive here")
def backup_create(output: Path | None) -> None:
    """Write a backup (into the backups folder, or OUTPUT)."""
    app = current.app()
    try:
        name, manifest = jobs.backup_now(app, output.resolve() if output else None)
    except APIError as exc:
        raise click.ClickException(exc.message) from None
    rows = sum(t["rows"] for t in manifest["tables"])
    where = output or jobs.folder() / name
    click.echo(f"wrote {where}: {len(manifest['tables'])} tables, {rows} rows, {len(manifest['files'])} files")


@backup_group.command("restore")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--yes", is_flag=True, help="replace the whole current state (required)")
def backup_restore(file: Path, yes: bool) -> None:
    """Replace every table and stored file by those of FILE."""
    if not yes:
        raise click.ClickException("a restore replaces everything: confirm with --yes")
    app = current.app()
    try:
        result = jobs.restore_from(app, file)
    except APIError as exc:
        raise click.ClickException(exc.message) from None
    migrated = ", then migrated to this release's heads" if result["migrated"] else ""
    click.echo(f"restored {file}: {len(result['tables'])} tables, {result['files']} files{migrated}")
    click.echo("administrators and their passwords are now the archive's (the master key stays this server's)")


@backup_group.command("list")
def backup_list() -> None:
    """The archives, newest first, then the latest restore."""
    for shown in jobs.listing():
        click.echo(f"{shown['name']}\t{shown['status']}\t{shown['size'] or ''}\t{shown['createdAt']}")
    restored = jobs.restore_state()
    if restored is not None:
        click.echo(f"latest restore: {restored['name']}\t{restored['status']}\t{restored['startedAt']}")
        if "error" in restored:
            click.echo(f"  {restored['error']}")
