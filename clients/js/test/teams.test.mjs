// Teams: create, list, members, invite, the invitee's pending invites, accept.
import assert from "node:assert/strict";
import { before, test } from "node:test";
import { configure, unique, verifiedUser } from "./helpers.mjs";

before(() => configure("authentication", { teams: { enabled: true, invites: { enabled: true } } }));

test("an owner creates a team, invites a user, who accepts and becomes a member", async () => {
  const owner = await verifiedUser();
  const invitee = await verifiedUser();
  const name = unique("Design ");
  const team = await owner.t.teams.create(name);
  assert.equal(team.name, name);
  assert.equal(team.parentTeam, null);
  const sub = await owner.t.teams.create(unique("Sub "), { parentTeam: team._id });
  assert.equal(sub.parentTeam, team._id);

  const listed = await owner.t.teams.list({ search: name });
  assert.deepEqual(listed.teams.map((found) => found._id), [team._id]);
  assert.equal(listed.count, 1);
  assert.deepEqual((await owner.t.teams.members(team._id)).members, [{ _id: owner.id, email: owner.email, role: "owner" }]);

  const { invitationToken } = await owner.t.teams.invite(team._id, invitee.email);
  assert.equal(typeof invitationToken, "string");
  const pending = await invitee.t.teams.invites();
  assert.deepEqual(
    pending.invites.map(({ teamId, role, invitationToken: token }) => ({ teamId, role, token })),
    [{ teamId: team._id, role: "member", token: invitationToken }],
  );
  const joined = await invitee.t.teams.accept(invitationToken);
  assert.equal(joined._id, team._id);
  assert.equal(joined.role, "member");
  const members = await owner.t.teams.members(team._id, { limit: 10 });
  assert.deepEqual(
    members.members.map((member) => [member.email, member.role]).sort(),
    [[invitee.email, "member"], [owner.email, "owner"]].sort(),
  );
  assert.equal(members.count, 2);
  assert.deepEqual((await invitee.t.teams.list()).teams.map((found) => found._id), [team._id]);
  await assert.rejects(invitee.t.teams.accept(invitationToken), { name: "NOT_FOUND", status: 404 });
});
