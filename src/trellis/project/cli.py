"""``flask --app wsgi trellis project export|plan|apply``: a project kept in git, promoted from a shell or CI."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from trellis.errors import APIError

from . import files, runner, text


@click.group("project")
def project_group() -> None:
    """Project as code: export, plan and apply what administrators built (docs/operations.md)."""


def _failed(exc: APIError) -> click.ClickException:
    return click.ClickException(f"{exc.status}: {exc.message}")


@project_group.command("export")
@click.argument("target", type=click.Path(path_type=Path))
def project_export(target: Path) -> None:
    """Write the project to TARGET: a .json file, or a folder of one file per thing ('-' for stdout)."""
    project = runner.export()
    if str(target) == "-":
        click.echo(runner.dumps(project), nl=False)
        return
    try:
        written = files.write(project, target)
    except APIError as exc:
        raise _failed(exc) from None
    click.echo(f"wrote {target} ({len(written)} file{'s' if len(written) != 1 else ''})")


@project_group.command("plan")
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@click.option("--prune", is_flag=True, help="also delete the things of a named kind that the project lacks")
def project_plan(source: Path, prune: bool) -> None:
    """Print what applying SOURCE (a file or folder) would change; nothing changes."""
    try:
        changes = runner.plan(files.read(source), prune)
    except APIError as exc:
        raise _failed(exc) from None
    click.echo(text.describe(runner.shown(changes)), nl=False)


@project_group.command("apply")
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@click.option("--prune", is_flag=True, help="also delete the things of a named kind that the project lacks")
@click.option("--yes", is_flag=True, help="apply without asking (needed without a terminal, as in CI)")
def project_apply(source: Path, prune: bool, yes: bool) -> None:
    """Show the plan of SOURCE, then apply it in one transaction (all or nothing)."""
    try:
        project = files.read(source)
        planned = runner.plan(project, prune)
    except APIError as exc:
        raise _failed(exc) from None
    click.echo(text.describe(runner.shown(planned)), nl=False)
    if not planned:
        return
    if not yes:
        if not sys.stdin.isatty():
            raise click.ClickException("not applied: confirm with --yes when there is no terminal to ask")
        click.confirm("Apply these changes?", abort=True)
    try:
        applied = runner.apply(project, prune)
    except APIError as exc:
        raise _failed(exc) from None
    click.echo(f"Applied {len(applied)} change{'s' if len(applied) != 1 else ''}.")
