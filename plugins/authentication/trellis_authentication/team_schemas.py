"""Request and response bodies of the team routes (validation and OpenAPI come from these)."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from trellis.fields import BoundedList
from trellis.http import ListArgs, list_schema

from .schemas import NormalisedEmail
from .team_models import ROLES

RECORD_ID = validate.Length(min=1, max=32)
MAX_MEMBERS_PER_CALL = 100


def _name(**kwargs: Any) -> fields.String:
    return fields.String(validate=validate.Length(min=1, max=100), **kwargs)


def _role(**kwargs: Any) -> fields.String:
    return fields.String(validate=validate.OneOf(ROLES), **kwargs)


class TeamSchema(Schema):
    _id = fields.String(required=True)
    name = fields.String(required=True)
    parentTeam = fields.String(required=True, allow_none=True)
    createdAt = fields.String(required=True)
    updatedAt = fields.String(required=True)


TeamListSchema = list_schema("TeamList", "teams", TeamSchema)


class TeamCreateSchema(Schema):
    name = _name(required=True)
    parentTeam = fields.String(allow_none=True, load_default=None, validate=RECORD_ID)


class TeamUpdateSchema(Schema):
    name = _name()
    parentTeam = fields.String(allow_none=True, validate=RECORD_ID, metadata={"description": "null: a root team"})

    @validates_schema
    def _something(self, data: dict[str, Any], **_kwargs: Any) -> None:
        if not data:
            raise ValidationError("Send name, parentTeam or both.", "_schema")


class TeamListArgs(ListArgs):
    search = fields.String(validate=validate.Length(max=100), metadata={"description": "part of the name"})


class MemberSchema(Schema):
    _id = fields.String(required=True)
    email = fields.String(required=True, allow_none=True)
    role = fields.String(required=True)


MemberListSchema = list_schema("TeamMemberList", "members", MemberSchema)


class MembersRoleSchema(Schema):
    members = BoundedList(fields.String(validate=RECORD_ID), required=True, min_items=1, max_items=MAX_MEMBERS_PER_CALL)
    role = _role(required=True)


class _MemberIds(fields.String):
    """``?members=id,id``: comma-separated user ids."""

    # A string in the query (documented as one), a list once loaded.
    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> list[str]:  # type: ignore[override]
        ids = [part.strip() for part in super()._deserialize(value, attr, data, **kwargs).split(",") if part.strip()]
        if not ids or len(ids) > MAX_MEMBERS_PER_CALL or any(len(part) > 32 for part in ids):
            raise ValidationError(f"1 to {MAX_MEMBERS_PER_CALL} user ids, comma-separated.")
        return ids


class RemoveMembersArgs(Schema):
    members = _MemberIds(required=True, metadata={"description": "user ids, comma-separated"})


class RemovedMembersSchema(Schema):
    removed = fields.List(fields.String(), required=True)
    count = fields.Integer(required=True)


class AddMemberSchema(Schema):
    userId = fields.String(required=True, validate=RECORD_ID)
    role = _role(load_default="member")


class InviteSchema(Schema):
    email = NormalisedEmail(required=True, validate=validate.Length(max=254))
    role = _role(load_default="member")


class InvitationTokenSchema(Schema):
    invitationToken = fields.String(required=True)


class InviteEmailArgs(Schema):
    email = NormalisedEmail(required=True, validate=validate.Length(max=254))


class AcceptArgs(Schema):
    invitationToken = fields.String(required=True, validate=validate.Length(min=1, max=128))


class PendingInviteSchema(Schema):
    teamId = fields.String(required=True)
    teamName = fields.String(required=True)
    invitationToken = fields.String(
        required=True, allow_none=True, metadata={"description": "null while the caller's address is unverified"}
    )
    role = fields.String(required=True)
    expiresAt = fields.String(required=True)


InviteListSchema = list_schema("TeamInviteList", "invites", PendingInviteSchema)


class AcceptedSchema(TeamSchema):
    role = fields.String(required=True, metadata={"description": "the caller's role in the team now"})


class AdminTeamSchema(TeamSchema):
    memberCount = fields.Integer(required=True, metadata={"description": "direct members"})


AdminTeamListSchema = list_schema("AdminTeamList", "teams", AdminTeamSchema)


class AdminTeamMemberSchema(MemberSchema):
    joinedAt = fields.String(required=True)


class AdminTeamDetailSchema(TeamSchema):
    members = fields.List(fields.Nested(AdminTeamMemberSchema), required=True, metadata={"description": "owners first"})
    teams = fields.List(fields.Nested(AdminTeamSchema), required=True, metadata={"description": "direct sub-teams"})
