"""HTTP routes of teams (README, "Teams"), on the module's blueprint. Every one needs a user Bearer
token (administrator credentials: 403) and answers 403 while ``teams.enabled`` is false.

``/authentication/teams`` is one of the module's reserved words (``config.RESERVED_NAMES``), so
``POST /authentication/teams`` is never read as a sign-in with a provider named "teams".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trellis.credentials import require_user, user_required
from trellis.errors import ErrorSchema
from trellis.http import DeletedSchema, ListArgs, MessageSchema, deleted

from . import pages, teams
from .routes import blp
from .team_schemas import (
    AcceptArgs,
    AcceptedSchema,
    AddMemberSchema,
    InvitationTokenSchema,
    InviteEmailArgs,
    InviteListSchema,
    InviteSchema,
    MemberListSchema,
    MemberSchema,
    MembersRoleSchema,
    RemovedMembersSchema,
    RemoveMembersArgs,
    TeamCreateSchema,
    TeamListArgs,
    TeamListSchema,
    TeamSchema,
    TeamUpdateSchema,
)

OFF = "Teams are not enabled (teams.enabled); or administrator credentials"
MISSING = "No such team, or one the caller may not view (the same answer)"
NOT_OWNER = "Not an owner of the team or of a team above it; or teams are not enabled"
INVITES_OFF = "Not an owner; or teams or invites are not enabled (teams.enabled, teams.invites.enabled)"


def _caller() -> Mapping[str, Any]:
    """The signed-in user, once teams are known to be on."""
    user = require_user().user
    teams.require_enabled()
    return user


@blp.route("/authentication/teams", methods=["POST"])
@user_required
@blp.arguments(TeamCreateSchema)
@blp.response(201, TeamSchema)
@blp.alt_response(400, schema=ErrorSchema, description=f"Validation, or deeper than {teams.MAX_DEPTH} levels")
@blp.alt_response(403, schema=ErrorSchema, description="Not an owner of parentTeam; or teams are not enabled")
@blp.alt_response(404, schema=ErrorSchema, description="parentTeam: " + MISSING)
@blp.alt_response(409, schema=ErrorSchema, description="A team of this name exists under the same parent")
def create_team(body: dict[str, Any]):
    """Create a team (a sub-team of `parentTeam`, which the caller must own); the caller is its owner."""
    user = _caller()
    return teams.team_dict(teams.create_team(user["_id"], body["name"], body["parentTeam"]))


@blp.route("/authentication/teams", methods=["GET"])
@user_required
@blp.arguments(TeamListArgs, location="query")
@blp.response(200, TeamListSchema)
@blp.alt_response(403, schema=ErrorSchema, description=OFF)
def list_teams(args: dict[str, Any]):
    """The teams the caller is a member of, by name; `search` matches part of the name."""
    user = _caller()
    found, count = teams.teams_of(user["_id"], args["skip"], args["limit"], args.get("search"))
    return {"teams": [teams.team_dict(team) for team in found], "count": count}


@blp.route("/authentication/teams/invites", methods=["GET"])
@user_required
@blp.response(200, InviteListSchema)
@blp.alt_response(403, schema=ErrorSchema, description=INVITES_OFF)
def pending_invites():
    """The caller's pending invites (to their email address), with the tokens to accept them; for an
    address not verified yet `invitationToken` is null (accept through the link in the invitation mail)."""
    user = _caller()
    found = teams.invites_of(user.get("email"), bool(user.get("isVerified")))
    return {"invites": found, "count": len(found)}


@blp.route("/authentication/teams/invite/accept", methods=["GET"])
@pages.invite_page  # the mailed link opened in a browser: a page that signs in and accepts
@user_required
@blp.arguments(AcceptArgs, location="query")
@blp.response(200, AcceptedSchema)
@blp.alt_response(403, schema=ErrorSchema, description="The invite is for another email; or invites are not enabled")
@blp.alt_response(404, schema=ErrorSchema, description="Unknown, used or expired invitation")
def accept_invite(args: dict[str, Any]):
    """Join a team with the invited role: the invite's email must be the caller's."""
    user = _caller()
    team, role = teams.accept(args["invitationToken"], user["_id"], user.get("email"))
    return {**teams.team_dict(team), "role": role}


@blp.route("/authentication/teams/<string:teamId>", methods=["GET"])
@user_required
@blp.response(200, TeamSchema)
@blp.alt_response(403, schema=ErrorSchema, description=OFF)
@blp.alt_response(404, schema=ErrorSchema, description=MISSING)
def get_team(teamId: str):
    """A team the caller is a member of (directly or through a team above it)."""
    user = _caller()
    return teams.team_dict(teams.viewable(teamId, user["_id"])[0])


@blp.route("/authentication/teams/<string:teamId>", methods=["PATCH"])
@user_required
@blp.arguments(TeamUpdateSchema)
@blp.response(200, TeamSchema)
@blp.alt_response(400, schema=ErrorSchema, description="Validation; a move under itself (cycle) or too deep")
@blp.alt_response(403, schema=ErrorSchema, description=NOT_OWNER + " (a move: of both the old and new parent)")
@blp.alt_response(404, schema=ErrorSchema, description=MISSING)
@blp.alt_response(409, schema=ErrorSchema, description="A team of this name exists under the same parent")
def update_team(body: dict[str, Any], teamId: str):
    """Rename a team and/or move it under another parent (`parentTeam: null`: make it a root team)."""
    user = _caller()
    return teams.team_dict(teams.update_team(teamId, user["_id"], body))


@blp.route("/authentication/teams/<string:teamId>", methods=["DELETE"])
@user_required
@blp.response(200, DeletedSchema)
@blp.alt_response(403, schema=ErrorSchema, description=NOT_OWNER)
@blp.alt_response(404, schema=ErrorSchema, description=MISSING)
def delete_team(teamId: str):
    """Delete a team with its sub-teams at any depth, their members and invites."""
    user = _caller()
    teams.delete_team(teamId, user["_id"])
    return deleted(teamId)


@blp.route("/authentication/teams/<string:teamId>/teams", methods=["GET"])
@user_required
@blp.arguments(ListArgs, location="query")
@blp.response(200, TeamListSchema)
@blp.alt_response(403, schema=ErrorSchema, description=OFF)
@blp.alt_response(404, schema=ErrorSchema, description=MISSING)
def list_sub_teams(args: dict[str, Any], teamId: str):
    """The team's direct sub-teams, by name."""
    user = _caller()
    found, count = teams.sub_teams(teamId, user["_id"], args["skip"], args["limit"])
    return {"teams": [teams.team_dict(team) for team in found], "count": count}


@blp.route("/authentication/teams/<string:teamId>/members", methods=["GET"])
@user_required
@blp.arguments(ListArgs, location="query")
@blp.response(200, MemberListSchema)
@blp.alt_response(403, schema=ErrorSchema, description=OFF)
@blp.alt_response(404, schema=ErrorSchema, description=MISSING)
def list_members(args: dict[str, Any], teamId: str):
    """The team's direct members `{_id, email, role}`, owners first."""
    user = _caller()
    found, count = teams.members(teamId, user["_id"], args["skip"], args["limit"])
    return {"members": found, "count": count}


@blp.route("/authentication/teams/<string:teamId>/members", methods=["PATCH"])
@user_required
@blp.arguments(MembersRoleSchema)
@blp.response(200, MemberListSchema)
@blp.alt_response(400, schema=ErrorSchema, description="Validation, or a user who is not a member")
@blp.alt_response(403, schema=ErrorSchema, description=NOT_OWNER)
@blp.alt_response(404, schema=ErrorSchema, description=MISSING)
@blp.alt_response(409, schema=ErrorSchema, description="The last owner cannot step down")
def set_member_roles(body: dict[str, Any], teamId: str):
    """Give members a role (owners only); answers those members as they are now."""
    user = _caller()
    changed = teams.set_roles(teamId, user["_id"], body["members"], body["role"])
    return {"members": changed, "count": len(changed)}


@blp.route("/authentication/teams/<string:teamId>/members", methods=["DELETE"])
@user_required
@blp.arguments(RemoveMembersArgs, location="query")
@blp.response(200, RemovedMembersSchema)
@blp.alt_response(400, schema=ErrorSchema, description="Validation, or a user who is not a member")
@blp.alt_response(403, schema=ErrorSchema, description=NOT_OWNER + " (anyone may remove only themselves)")
@blp.alt_response(404, schema=ErrorSchema, description=MISSING)
@blp.alt_response(409, schema=ErrorSchema, description="The last owner cannot leave")
def remove_members(args: dict[str, Any], teamId: str):
    """Remove members (owners), or leave the team (`members` = the caller's own id)."""
    user = _caller()
    removed = teams.remove_members(teamId, user["_id"], args["members"])
    return {"removed": removed, "count": len(removed)}


@blp.route("/authentication/teams/<string:teamId>/invite", methods=["POST"])
@user_required
@blp.arguments(InviteSchema)
@blp.response(201, InvitationTokenSchema)
@blp.alt_response(400, schema=ErrorSchema, description="Validation; the Email module is not active")
@blp.alt_response(403, schema=ErrorSchema, description=INVITES_OFF)
@blp.alt_response(404, schema=ErrorSchema, description=MISSING)
@blp.alt_response(409, schema=ErrorSchema, description="A user with this email is already a member")
@blp.alt_response(429, schema=ErrorSchema, description="Too many mails from this address or to this one")
def invite(body: dict[str, Any], teamId: str):
    """Invite an email address with a role (owners); mails it the `TeamInvite` template with the link to
    accept. A new invite to the same address replaces the pending one."""
    user = _caller()
    return {"invitationToken": teams.invite(teamId, user["_id"], body["email"], body["role"])}


@blp.route("/authentication/teams/<string:teamId>/invite", methods=["DELETE"])
@user_required
@blp.arguments(InviteEmailArgs, location="query")
@blp.response(200, MessageSchema)
@blp.alt_response(403, schema=ErrorSchema, description=INVITES_OFF)
@blp.alt_response(404, schema=ErrorSchema, description=MISSING + "; or no pending invite for this email")
def revoke_invite(args: dict[str, Any], teamId: str):
    """Withdraw the pending invite of an email address (owners)."""
    user = _caller()
    teams.revoke_invites(teamId, user["_id"], args["email"])
    return {"message": "Invite withdrawn"}


@blp.route("/authentication/teams/<string:teamId>/add", methods=["POST"])
@user_required
@blp.arguments(AddMemberSchema)
@blp.response(201, MemberSchema)
@blp.alt_response(403, schema=ErrorSchema, description=NOT_OWNER + "; or teams.allowAddWithoutInvite is false")
@blp.alt_response(404, schema=ErrorSchema, description=MISSING + "; or no such user")
@blp.alt_response(409, schema=ErrorSchema, description="The user is already a member")
def add_member(body: dict[str, Any], teamId: str):
    """Add a user to the team without an invite (owners; only with `teams.allowAddWithoutInvite`)."""
    user = _caller()
    return teams.add_member(teamId, user["_id"], body["userId"], body["role"])
