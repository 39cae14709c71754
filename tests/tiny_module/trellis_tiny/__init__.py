"""A tiny Trellis module: one table, one route, one migration."""

from pathlib import Path

from marshmallow import Schema, fields
from sqlalchemy import String, select
from sqlalchemy.orm import Mapped, mapped_column

from trellis import Module, db
from trellis.http import Blueprint

blp = Blueprint("tiny", __name__, description="Tiny test module")


class Note(db.Base):
    __tablename__ = "tiny_notes"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=db.new_id)
    text: Mapped[str] = mapped_column(String(200))


class NoteSchema(Schema):
    text = fields.String(required=True)


@blp.route("/tiny/notes", methods=["POST"])
@blp.arguments(NoteSchema)
@blp.response(201, NoteSchema)
def add_note(body):
    note = Note(text=body["text"])
    db.session.add(note)
    db.session.commit()
    return {"text": note.text}


@blp.route("/tiny/notes", methods=["GET"])
@blp.response(200, NoteSchema(many=True))
def list_notes():
    return [{"text": n.text} for n in db.session.execute(select(Note)).scalars()]


module = Module(name="tiny", blueprints=(blp,), migrations=str(Path(__file__).parent / "migrations" / "versions"))
