// Teams page: "Open" on a team (or on one of its sub-teams) shows that team's members and sub-teams, both
// read from the one route GET /admin/authentication/teams/{teamId}.
import { actions, lists } from "/console/static/console.js";

actions.openTeam = async (row) => {
  const context = { teamId: row._id };
  await Promise.all(["team-members", "team-teams"].map((id) => lists.get(id).setContext(context, row.name)));
  lists.get("team-members").root.scrollIntoView({ block: "nearest" });
};
