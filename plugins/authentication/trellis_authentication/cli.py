"""``flask --app wsgi trellis authentication …``."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from . import sessions

cli = AppGroup("authentication", help="Users and sessions.")


@cli.command("purge-sessions")
def purge_sessions() -> None:
    """Delete sessions that expired or ended (logout, block, reuse); safe to run from cron."""
    click.echo(f"deleted {sessions.purge_sessions()} sessions")
