"""Schedules: each ``@schedule`` runs at its cron times (UTC), once per due time across processes.

Every serving process looks each poll for the latest due time of each schedule. Taking it is one
conditional write on the schedule's row (its ``last_due_at`` moved to the due time only if it was earlier),
so one process wins and the others find it taken. Only the latest due time is taken: after downtime a
missed run runs once, not once per missed slot. A schedule seen for the first time starts from its next
due time. A run acts as the administrator.
"""

from __future__ import annotations

import contextlib
import logging
import time
from datetime import datetime

from flask import Flask
from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from trellis import db
from trellis.background import ThrottledWarning, start_loop
from trellis.credentials import Identity
from trellis.errors import APIError

from .api import Schedule
from .models import ScheduleRun
from .running import Ctx, invoke, write_log
from .settings import queue_settings
from .state import registry

log = logging.getLogger(__name__)

_table = ScheduleRun.__table__


def latest_due(cron: str, now: datetime) -> datetime:
    from croniter import croniter

    due: datetime = croniter(cron, now).get_prev(datetime)
    return due


def next_due(cron: str, now: datetime) -> datetime:
    from croniter import croniter

    due: datetime = croniter(cron, now).get_next(datetime)
    return due


def last_runs() -> dict[str, tuple[datetime, datetime | None]]:
    rows = db.session.execute(select(_table.c.name, _table.c.last_due_at, _table.c.last_run_at)).all()
    return {name: (due, ran) for name, due, ran in rows}


def take(schedule: Schedule, now: datetime) -> bool:
    """Whether this process takes the schedule's latest due time (committed either way)."""
    due = latest_due(schedule.cron, now)
    taken = db.session.execute(
        update(_table).where(_table.c.name == schedule.name, _table.c.last_due_at < due).values(last_due_at=due)
    )
    if db.rowcount(taken):
        db.session.commit()
        return True
    known = db.session.execute(select(_table.c.name).where(_table.c.name == schedule.name)).first()
    if known is None:  # first seen: runs from its next due time on
        try:
            db.session.execute(insert(_table).values(name=schedule.name, last_due_at=due, last_run_at=None))
        except IntegrityError:
            pass  # another process saw it first
    db.session.commit()
    return False


def run(schedule: Schedule) -> bool:
    """Run one schedule now (as the administrator); whether it ended well."""
    ctx = Ctx(Identity("admin"))
    db.session.connection()
    try:
        invoke(schedule.function, schedule.name, "schedule", (), ctx)
        db.session.commit()
        ok = True
    except APIError:
        db.session.rollback()
        ok = False
    now = db.utcnow()
    ran = db.session.execute(update(_table).where(_table.c.name == schedule.name).values(last_run_at=now))
    if not db.rowcount(ran):  # run before any process saw it due (run now)
        with contextlib.suppress(IntegrityError):
            db.session.execute(
                insert(_table).values(name=schedule.name, last_due_at=latest_due(schedule.cron, now), last_run_at=now)
            )
    db.session.commit()
    write_log()
    return ok


def check(now: datetime | None = None) -> int:
    """Run every schedule whose latest due time no process has taken yet; how many ran here."""
    ran = 0
    for schedule in list(registry().schedules.values()):
        if take(schedule, now or db.utcnow()):
            run(schedule)
            ran += 1
    return ran


def start(app: Flask) -> None:
    """``Module.background``: look for due schedules once a poll in each serving process."""
    poll = queue_settings(app).poll_seconds

    def step() -> None:
        with app.app_context():
            if registry().schedules:
                check()
        time.sleep(poll)

    start_loop("functions-schedules", "functions: schedules", step, ThrottledWarning(log), retry_seconds=poll)
