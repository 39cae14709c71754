"""The module's own tables: schema records and custom endpoints.

Documents do not live here: each schema's documents have a table of their own, created at run time
(see ``tables.py``); ``SchemaRecord.storage`` describes what exists physically for it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from trellis.db import Base, JSONType, UTCDateTime, new_id, utcnow


class SchemaRecord(Base):
    """An admin-defined schema, or the stored state (extensions) of a module-owned one."""

    __tablename__ = "database_schemas"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    owner_module: Mapped[str] = mapped_column(String(100), default="database")
    fields: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    model_options: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    extensions: Mapped[list[Any]] = mapped_column(JSONType, default=list)
    # Physical state: {"table": name, "columns": {field: {column, type, index, unique}}}.
    storage: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    version: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class CustomEndpointRecord(Base):
    __tablename__ = "database_custom_endpoints"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    operation: Mapped[str] = mapped_column(String(10))
    schema_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("database_schemas.id", ondelete="CASCADE"), index=True
    )
    inputs: Mapped[list[Any]] = mapped_column(JSONType, default=list)
    query: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    assignments: Mapped[list[Any]] = mapped_column(JSONType, default=list)
    authentication: Mapped[bool] = mapped_column(Boolean, default=False)
    paginated: Mapped[bool] = mapped_column(Boolean, default=False)
    sorted: Mapped[bool] = mapped_column(Boolean, default=False)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    version: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class CountEpoch(Base):
    """Unused since list counts are keyed by the event log's change number (``counts.py``). Kept for a
    rolling upgrade: the processes of the previous release read it in every document write, and would
    fail once it is gone. A later release's migration drops it."""

    __tablename__ = "database_count_epochs"

    table_name: Mapped[str] = mapped_column(String(63), primary_key=True)
    epoch: Mapped[int] = mapped_column(Integer, default=0)
    counted_until: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
