"""The module's tables: relation tuples and the resource definitions an administrator changed."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from trellis.db import Base, JSONType, UTCDateTime, new_id, utcnow


class Relation(Base):
    """A tuple ``<subject> <relation> <resource type>:<resource id>`` (``User:1 owner Task:9``).

    Two indexes, one per direction a decision reads: (resource, relation, subject) answers "may this caller
    read this document" by one probe per document of a page; (subject, resource type, relation, resource)
    enumerates what a caller's subjects hold, which is what an exact count under access reads.
    """

    __tablename__ = "authz_relations"
    __table_args__ = (
        UniqueConstraint("resource_type", "resource_id", "relation", "subject", name="uq_authz_relations_tuple"),
        Index("ix_authz_relations_subject", "subject", "resource_type", "relation", "resource_id"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    subject: Mapped[str] = mapped_column(String(100))
    relation: Mapped[str] = mapped_column(String(32))
    resource_type: Mapped[str] = mapped_column(String(63))
    resource_id: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ResourceDefinition(Base):
    """A resource's relations and permissions, stored once an administrator changes the defaults."""

    __tablename__ = "authz_resources"

    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    relations: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    permissions: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    version: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
