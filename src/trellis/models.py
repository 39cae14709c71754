"""The core's own tables: administrators, module configuration, shared cache generations."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Integer, String
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
