"""Scheduled backups: the config's cron expression (``backups.schedule``), one run per due time across
every process.

Each serving process looks every ``CHECK_SECONDS`` for the latest due time of the schedule (croniter). The
due time names the backup (``trellis-<due time>-scheduled.zip``): every process that finds it due tries to
insert that name's row, the database's primary key lets one succeed, and the others get 409 and leave it.
A due time older than ``CATCH_UP_SECONDS`` is not run late (a process that starts after a night off does not
start yesterday's backup).
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

from flask import Flask

from .. import db
from ..background import ThrottledWarning, start_loop
from ..errors import APIError
from ..module_config import get as get_config
from . import jobs

log = logging.getLogger(__name__)

CHECK_SECONDS = 20.0
CATCH_UP_SECONDS = 300.0


def valid(expression: str) -> bool:
    from croniter import croniter  # here, not at import: ~0.3 s of every process's start (py-spy), for a rare use

    return croniter.is_valid(expression)


def due(expression: str, now: datetime) -> datetime | None:
    """The latest time the schedule was due at or before ``now``, when that is recent enough to run."""
    from croniter import croniter

    previous: datetime = croniter(expression, now + timedelta(seconds=1)).get_prev(datetime)
    return previous if now - previous <= timedelta(seconds=CATCH_UP_SECONDS) else None


def scheduled_name(at: datetime) -> str:
    return f"trellis-{at.strftime('%Y%m%d-%H%M%S')}-scheduled.zip"


def check(app: Flask, now: datetime | None = None) -> str | None:
    """Start the backup of the schedule's current due time unless a process has; the name when this one did."""
    expression = get_config("backups").get("schedule")
    if not expression:
        return None
    at = due(expression, now or db.utcnow())
    if at is None:
        return None
    name = scheduled_name(at)
    try:
        jobs.start_backup(app, scheduled=True, name=name)
    except APIError:  # another process runs it (or ran it), or a restore is running
        return None
    log.info("scheduled backup %s started", name)
    return name


def start(app: Flask) -> None:
    """``Module.background``: check the schedule every ``CHECK_SECONDS`` in each serving process."""

    def step() -> None:
        with app.app_context():
            check(app)
        time.sleep(CHECK_SECONDS)

    start_loop("trellis-backup-schedule", "backup schedule", step, ThrottledWarning(log), retry_seconds=CHECK_SECONDS)
