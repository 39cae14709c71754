"""The Functions module's tables: the function log, the queue of after-trigger runs, the schedules' last runs."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from trellis.db import Base, UTCDateTime, new_id, utcnow

OK, ERROR, REJECTED = "ok", "error", "rejected"
QUEUED, FAILED = "queued", "failed"


class FunctionLogEntry(Base):
    """One run: every after-trigger, schedule and callable run, and every before-trigger that refused or failed."""

    __tablename__ = "functions_log"
    __table_args__ = (Index("ix_functions_log_created", "created_at"), Index("ix_functions_log_function", "function"))

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    function: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(20))  # before_create … after_sign_up, function, schedule
    status: Mapped[str] = mapped_column(String(10))
    duration_ms: Mapped[int] = mapped_column(Integer)
    message: Mapped[str | None] = mapped_column(Text, nullable=True)
    attempt: Mapped[int | None] = mapped_column(Integer, nullable=True)
    request_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class FunctionJob(Base):
    """An after-trigger to run, queued in the transaction of the write it follows; claimed under a lease
    (``trellis.work_queue``): a process that dies mid-run leaves it due again once the lease ends."""

    __tablename__ = "functions_jobs"
    __table_args__ = (Index("ix_functions_jobs_due", "status", "next_attempt_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    trigger: Mapped[str] = mapped_column(String(500))  # api.Trigger.key
    payload: Mapped[str] = mapped_column(Text)  # {"user": …, "document": …, "previous": …} as JSON text
    actor: Mapped[str] = mapped_column(String(10))  # admin | user | anonymous
    user_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    status: Mapped[str] = mapped_column(String(10), default=QUEUED)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True, default=utcnow)
    claim: Mapped[str | None] = mapped_column(String(32), nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ScheduleRun(Base):
    """A schedule's last due time taken by some process (once per due time across processes)."""

    __tablename__ = "functions_schedules"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    last_due_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_run_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
