"""The core's own tables: administrators, module configuration, shared cache generations, the audit log,
the event log and its durable consumers' cursors."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, FetchedValue, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from .db import Base, JSONType, UTCDateTime, new_id, utcnow


class Admin(Base):
    __tablename__ = "trellis_admins"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    username: Mapped[str] = mapped_column(String(150), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    # Bumped on password reset: admin tokens carry it, so older tokens stop working.
    token_version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)


class ModuleConfig(Base):
    __tablename__ = "trellis_module_configs"

    module: Mapped[str] = mapped_column(String(100), primary_key=True)
    data: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)


class CacheGeneration(Base):
    """A counter per shared cache (module configs, database schemas …).

    A process caches what it derived from the database together with the generation it saw;
    a writer bumps the generation in the same transaction, so every process notices the change.
    """

    __tablename__ = "trellis_cache_generations"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    generation: Mapped[int] = mapped_column(Integer, default=0)


class AuditEntry(Base):
    """One administrative change (see ``trellis.audit``), written in the transaction of the change."""

    __tablename__ = "trellis_audit_log"
    __table_args__ = (Index("ix_trellis_audit_log_created_at_id", "created_at", "id"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    actor_type: Mapped[str] = mapped_column(String(20))  # masterkey | admin | cli | user
    actor_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    actor_username: Mapped[str | None] = mapped_column(String(150), nullable=True)
    module: Mapped[str] = mapped_column(String(100), index=True)
    action: Mapped[str] = mapped_column(String(100), index=True)
    target: Mapped[str | None] = mapped_column(String(255), nullable=True, index=True)
    changes: Mapped[Any] = mapped_column(JSONType, nullable=True)
    ip: Mapped[str | None] = mapped_column(String(64), nullable=True)
    request_id: Mapped[str | None] = mapped_column(String(64), nullable=True)


class EventRecord(Base):
    """One numbered domain event (see ``trellis.events``).

    ``id`` is the insert order; ``event_id`` the public, contiguous number in commit order. SQLite numbers
    an event as its transaction inserts it; PostgreSQL records it in :class:`PendingEvent` and the
    sequencer moves it here, numbered, after its commit.
    """

    __tablename__ = "core_events"
    __table_args__ = (Index("ix_core_events_family_event_id", "family", "event_id"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    event_id: Mapped[int] = mapped_column(BigInteger, unique=True)
    topic: Mapped[str] = mapped_column(String(200))
    family: Mapped[str] = mapped_column(String(200))
    payload: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class PendingEvent(Base):
    """An event recorded on PostgreSQL and not numbered yet: the sequencer moves the committed ones into
    ``core_events`` (a handful at any time). A separate table, because numbering rows in place (an UPDATE
    of each event row after its commit) cost a third of PostgreSQL's write throughput
    (``bench/event_log_layout``). ``id`` is drawn from ``core_events``' own sequence (the migration sets
    the default), so both tables share one insert order. SQLite never writes here."""

    __tablename__ = "core_events_pending"

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, server_default=FetchedValue()
    )
    topic: Mapped[str] = mapped_column(String(200))
    family: Mapped[str] = mapped_column(String(200))
    payload: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class EventCounter(Base):
    """How many commits recorded events of a family, striped over a few rows (``trellis.events.change_number``
    sums them): a write bumps one slot, so concurrent writers of one family rarely wait on the same row."""

    __tablename__ = "core_event_counters"

    family: Mapped[str] = mapped_column(String(200), primary_key=True)
    slot: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    changes: Mapped[int] = mapped_column(BigInteger)


class EventConsumer(Base):
    """How far a named consumer of the event log has got (``trellis.events.consumer``): one row, advanced
    in the transaction of the consumer's work, so an event is handled once whatever process does it."""

    __tablename__ = "core_event_consumers"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    last_event_id: Mapped[int] = mapped_column(BigInteger)


class BackupRecord(Base):
    """One archive of ``trellis.backups``: its state while it is written and once it is kept.

    A row ``running`` whose writer died (kill -9) is shown as failed: ``holder`` names the writing process
    (host and pid, checked at once on the same host), and elsewhere a ``heartbeat_at`` older than
    ``trellis.backups.jobs.STALE_SECONDS`` tells. Its part file is never listed as an archive.
    """

    __tablename__ = "core_backups"

    name: Mapped[str] = mapped_column(String(160), primary_key=True)
    status: Mapped[str] = mapped_column(String(10))  # running | done | failed
    size: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    scheduled: Mapped[bool] = mapped_column(Boolean, default=False)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    holder: Mapped[str | None] = mapped_column(String(64), nullable=True)  # host:pid:token of the writer
    store: Mapped[str | None] = mapped_column(String(10), nullable=True)  # s3: kept in the Storage module's bucket


class BackupLock(Base):
    """The latest restore (``name`` = ``restore``), which is also the lock of the next: one restore at a time
    across processes, and no backup meanwhile. While ``status`` is ``running`` the holder renews
    ``heartbeat_at``; a running restore whose holder died (kill -9) is shown as failed and its lock is
    taken over (``trellis.backups.jobs``)."""

    __tablename__ = "core_backup_locks"

    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    holder: Mapped[str] = mapped_column(String(64))
    heartbeat_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    backup: Mapped[str | None] = mapped_column(String(160), nullable=True)  # the archive restored
    status: Mapped[str] = mapped_column(String(10))  # running | done | failed
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class ProjectRevision(Base):
    """The one row counting project applies (``trellis.project``): an apply moves it from the revision it
    read to the next, so of two applies at once one wins and the other finds it moved (409)."""

    __tablename__ = "core_project_revision"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    revision: Mapped[int] = mapped_column(Integer, default=0)
    applied_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
