"""The administrators' read-only routes of teams, on the module's blueprint (masterkey or admin Bearer).
They answer whether or not ``teams.enabled`` is on: teams made while it was on stay visible."""

from __future__ import annotations

from typing import Any

from trellis.credentials import admin_required
from trellis.errors import ErrorSchema

from . import team_admin
from .routes import blp
from .team_schemas import AdminTeamDetailSchema, AdminTeamListSchema, TeamListArgs


@blp.route("/admin/authentication/teams", methods=["GET"])
@admin_required
@blp.arguments(TeamListArgs, location="query")
@blp.response(200, AdminTeamListSchema)
def admin_list_teams(args: dict[str, Any]):
    """Every team (root teams and sub-teams), by name, with its number of direct members; `search`
    matches part of the name."""
    found, count = team_admin.all_teams(args["skip"], args["limit"], args.get("search"))
    return {"teams": found, "count": count}


@blp.route("/admin/authentication/teams/<string:teamId>", methods=["GET"])
@admin_required
@blp.response(200, AdminTeamDetailSchema)
@blp.alt_response(404, schema=ErrorSchema, description="No team with this id")
def admin_get_team(teamId: str):
    """A team with its direct members and their roles (owners first) and its direct sub-teams."""
    return team_admin.one_team(teamId)
