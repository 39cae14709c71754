"""Sharing with a team: a user names only a team it is a member of (directly or through a sub-team). Any other team id, a stranger's
or one that does not exist, is the same 400, so a grant neither confirms that a team exists nor makes a
stranger's team an owner; administrators grant to any team; revoking names any subject."""

from __future__ import annotations

import re

from trellis_authentication.testing import UserAccount

from .conftest import AccessApi


def _note(access: AccessApi, who: UserAccount) -> str:
    answer = access.client.post("/database/Note", json={"text": "x"}, headers=who.headers)
    assert answer.status_code == 201, answer.get_json()
    return answer.get_json()["_id"]


def _answer(access: AccessApi, who: UserAccount, doc_id: str, subject: str, relation: str = "owner") -> tuple:
    response = access.client.post(
        f"/database/Note/{doc_id}/grants", json={"subject": subject, "relation": relation}, headers=who.headers
    )
    body = response.get_json()
    return response.status_code, body.get("name"), re.sub(r"'[^']*'", "'…'", body.get("message", ""))


def test_a_stranger_team_and_a_missing_one_answer_the_same_400(access, make_user):
    access.enable_teams()
    access.opted_in("Note", {"text": "String"})
    alice, bob = make_user(), make_user()
    bobs_team = access.team(bob, "Bob's")
    doc_id = _note(access, alice)

    stranger = _answer(access, alice, doc_id, f"Team:{bobs_team}")
    missing = _answer(access, alice, doc_id, "Team:no-such-team-id")
    assert stranger == missing and stranger[0] == 400
    grants = access.call("GET", f"/database/Note/{doc_id}/grants", alice)
    assert grants["grants"] == [{"subject": f"User:{alice.id}", "relation": "owner"}]
    # Bob's team did not become an owner: bob still cannot read alice's note.
    assert access.client.get(f"/database/Note/{doc_id}", headers=bob.headers).status_code == 404


def test_a_member_grants_to_its_teams_and_the_teams_above_them_only(access, make_user):
    access.enable_teams()
    access.opted_in("Note", {"text": "String"})
    owner, alice = make_user(), make_user()
    company = access.team(owner, "Company")
    design = access.team(owner, "Design", company)
    web = access.team(owner, "Web", design)
    access.join(owner, design, alice)
    doc_id = _note(access, alice)
    for team_id in (design, company):  # its own and the one above (whose members it counts among)
        access.share(alice, f"Note:{doc_id}", f"Team:{team_id}", "reader")
    access.share(alice, f"Note:{doc_id}", f"Team:{web}", "reader", expect=400)  # a sub-team it is not in
    assert access.client.get(f"/database/Note/{doc_id}", headers=owner.headers).status_code == 200


def test_administrators_grant_to_any_team_and_revoking_names_any_subject(access, make_user):
    access.enable_teams()
    access.opted_in("Note", {"text": "String"})
    alice, bob = make_user(), make_user()
    team = access.team(alice, "Shared")
    doc_id = _note(access, alice)
    access.share(alice, f"Note:{doc_id}", f"Team:{team}", "reader")
    access.call("DELETE", f"/authentication/teams/{team}/members?members={alice.id}", alice, 409)  # last owner
    access.join(alice, team, bob)
    access.call("PATCH", f"/authentication/teams/{team}/members", alice, json={"members": [bob.id], "role": "owner"})
    access.call("DELETE", f"/authentication/teams/{team}/members?members={alice.id}", alice)  # alice left
    # Alice still owns her note and may revoke the grant to the team she left.
    access.call("DELETE", f"/database/Note/{doc_id}/grants?subject=Team:{team}&relation=reader", alice)
    # A subject holding nothing is a 404 whether it exists or not.
    for subject in (f"Team:{team}", "Team:no-such-team-id"):
        query = f"subject={subject}&relation=reader"
        access.call("DELETE", f"/database/Note/{doc_id}/grants?{query}", alice, 404)
    # An administrator grants to any team.
    access.call(
        "POST", f"/database/Note/{doc_id}/grants", None, 201, json={"subject": f"Team:{team}", "relation": "reader"}
    )
    access.grant(f"Team:{team}", "editor", f"Note:{doc_id}")
    assert access.client.get(f"/database/Note/{doc_id}", headers=bob.headers).status_code == 200
