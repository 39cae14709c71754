"""Forms tables: form definitions and their submissions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from trellis.db import Base, JSONType, UTCDateTime, new_id, utcnow


class Form(Base):
    __tablename__ = "forms"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    # [{name, type, required}], validated by FormFieldSchema.
    fields: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, default=list)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    forward_to: Mapped[str | None] = mapped_column(String(320), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)


class FormSubmission(Base):
    __tablename__ = "forms_submissions"
    __table_args__ = (Index("ix_forms_submissions_form_created", "form_id", "created_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    form_id: Mapped[str] = mapped_column(String(32), ForeignKey("forms.id", ondelete="CASCADE"))
    data: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    # None: nothing to forward; "sent" | "failed" | "skipped" (Email module absent or inactive).
    forward_status: Mapped[str | None] = mapped_column(String(20), nullable=True)
    forward_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    forward_message_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
