"""``flask --app wsgi trellis …``: admins, modules (and new module skeletons), OpenAPI export, client types,
migrations."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import click
from alembic.util import CommandError
from flask import current_app
from flask.cli import AppGroup
from sqlalchemy.exc import OperationalError

from . import admins, database_setup, hooks, migrate, scaffold
from .backups.cli import backup_group
from .errors import APIError
from .openapi import document
from .project.cli import project_group

trellis_cli = AppGroup("trellis", help="Trellis administration.")
trellis_cli.add_command(backup_group)
trellis_cli.add_command(project_group)


@trellis_cli.group("admin")
def admin_group() -> None:
    """Administrator accounts."""


def _password_option(func):
    return click.password_option("--password", prompt=True, confirmation_prompt=True, help="the new password")(func)


@admin_group.command("create")
@click.argument("username")
@_password_option
def admin_create(username: str, password: str) -> None:
    """Create an administrator."""
    _check_password(password)
    try:
        admins.create_admin(username, password)
    except APIError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"created administrator {username}")


@admin_group.command("reset-password")
@click.argument("username")
@_password_option
def admin_reset_password(username: str, password: str) -> None:
    """Set a new password; the admin's existing tokens stop working."""
    _check_password(password)
    try:
        admins.reset_password(username, password)
    except APIError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"password of {username} changed")


def _check_password(password: str) -> None:
    if len(password) < admins.MIN_PASSWORD_LENGTH:
        raise click.ClickException(f"the password needs at least {admins.MIN_PASSWORD_LENGTH} characters")


def _upgrade(revision: str = "heads") -> None:
    """Migrate; a database that cannot be there yet (a PostgreSQL database not created, the SQLite file's
    folder) is one line saying what to do, not a traceback."""
    url = current_app.extensions["trellis"].engine.url
    database_setup.create_sqlite_folder(url)
    try:
        migrate.upgrade(current_app, revision)
    except OperationalError as exc:
        hint = database_setup.missing_database(exc, url)
        if hint is None:
            raise
        raise click.ClickException(hint) from None


@trellis_cli.command("init")
def init() -> None:
    """Migrate to the newest schema and create the first admin if there is none."""
    _upgrade()
    generated = admins.ensure_first_admin()
    if generated:
        username = current_app.config["ADMIN_USERNAME"]
        click.echo(f"created the first administrator {username!r} with password: {generated}")
        click.echo(
            f"(shown once; change it with: flask --app wsgi trellis admin reset-password {shlex.quote(username)})"
        )


@trellis_cli.command("modules")
def list_modules() -> None:
    """List the loaded modules in start-up order."""
    for module in current_app.extensions["trellis"].modules:
        requires = f" (requires {', '.join(module.requires)})" if module.requires else ""
        click.echo(f"{module.name}{requires}")


@trellis_cli.group("module")
def module_group() -> None:
    """Writing a module (docs/modules.md)."""


@module_group.command("new", with_appcontext=False)
@click.argument("name")
@click.option(
    "--path",
    "parent",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="folder in which to create trellis-NAME",
)
def module_new(name: str, parent: Path) -> None:
    """Write an installable skeleton module NAME (package trellis-NAME) with a route, a model, its first
    migration, a config schema and a test."""
    try:
        target = scaffold.write(name, parent)
    except scaffold.ScaffoldError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"wrote {target}")
    click.echo(f"next: pip install -e {shlex.quote(str(target))}, then flask --app wsgi trellis db upgrade")


@trellis_cli.group("openapi")
def openapi_group() -> None:
    """The OpenAPI document."""


@openapi_group.command("export")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
def openapi_export(file: Path) -> None:
    """Write the complete OpenAPI document (with request-time paths) to FILE ('-' for stdout)."""
    with current_app.test_request_context("/openapi.json"):
        text = json.dumps(document(current_app), indent=2)
    if str(file) == "-":
        click.echo(text)
    else:
        file.write_text(text)
        click.echo(f"wrote {file}")


# The languages ``trellis types`` writes; modules answer ``trellis_client_types`` for the ones they can.
TYPE_LANGUAGES = ("ts",)


@trellis_cli.command("types")
@click.option(
    "--lang",
    type=click.Choice(TYPE_LANGUAGES),
    default="ts",
    show_default=True,
    help="the client's language (ts: TypeScript)",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="write to FILE instead of stdout",
)
def types(lang: str, output: Path | None) -> None:
    """Type declarations of the data the loaded modules serve, for typed API clients (the Database module:
    an interface per schema with documents). Run it again after a schema changes."""
    sections = [text.strip("\n") for text in hooks.call().trellis_client_types(lang=lang) if text]
    if not sections:
        raise click.ClickException(f"no loaded module declares types for --lang {lang}")
    header = f"// Generated by `flask --app wsgi trellis types --lang {lang}`: do not edit, run it again instead."
    text = "\n\n".join([header, *sections]) + "\n"
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text)
        click.echo(f"wrote {output}")


@trellis_cli.group("db")
def db_group() -> None:
    """Database migrations."""


@db_group.command("upgrade")
@click.argument("revision", default="heads")
def db_upgrade(revision: str) -> None:
    """Upgrade the database (default: every branch to its head)."""
    _upgrade(revision)
    click.echo(f"database upgraded to {revision}")


@db_group.command("downgrade")
@click.argument("revision")
def db_downgrade(revision: str) -> None:
    """Downgrade the database to REVISION (e.g. 'base')."""
    migrate.downgrade(current_app, revision)
    click.echo(f"database downgraded to {revision}")


@db_group.command("revision")
@click.option("--module", "module_name", required=True, help="the module whose branch gets the revision")
@click.option("-m", "--message", required=True, help="what the revision changes")
def db_revision(module_name: str, message: str) -> None:
    """Autogenerate the next migration of a module from its models, into its own versions directory."""
    try:
        path = migrate.revision(current_app, module_name, message)
    except (migrate.RevisionError, CommandError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"wrote {path}")
