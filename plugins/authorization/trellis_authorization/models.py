"""The module's tables: relation tuples and the resource definitions an administrator changed."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.types import TypeEngine

from trellis.db import Base, JSONType, UTCDateTime, new_id, utcnow


def _key(length: int) -> TypeEngine[str]:
    """A tuple's text column: byte-order ("C") collation on PostgreSQL.

    Every list under access probes the tuple index once per row it walks (~50 rows per row shown when a
    caller reads 2% of a schema), and each probe compares ids on its way down the index. With the
    database's default collation (``C.UTF-8`` here, not PostgreSQL's own "C") each comparison goes
    through ``strcoll``; in "C" it is a ``memcmp``, and the page statement is faster
    (``bench/results/access.md``). Ids, relation names and subjects are ASCII identifiers compared for
    equality, so nothing but the speed changes. SQLite compares bytes already (BINARY).
    """
    return String(length).with_variant(String(length, collation="C"), "postgresql")


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
    subject: Mapped[str] = mapped_column(_key(100))
    relation: Mapped[str] = mapped_column(_key(32))
    resource_type: Mapped[str] = mapped_column(_key(63))
    resource_id: Mapped[str] = mapped_column(_key(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ResourceDefinition(Base):
    """A resource's relations and permissions, stored once an administrator changes the defaults."""

    __tablename__ = "authz_resources"

    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    relations: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    permissions: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    version: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
