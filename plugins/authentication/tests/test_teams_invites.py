"""Team invites: the TeamInvite mail really delivered (aiosmtpd), listing, accepting, withdrawing."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlalchemy import select, update

from trellis import db as trellis_db
from trellis.http import PAGE_CSP
from trellis_authentication.team_models import TeamInvite

from .conftest import link_in, path_of
from .team_calls import Teams


@pytest.fixture()
def teams(api, client, admin_headers) -> Teams:
    """Teams on, invites on (their default), mail to the test SMTP server (``api``)."""
    made = Teams(client, admin_headers)
    made.configure(enabled=True)
    return made


def invite(teams: Teams, who, team_id: str, email: str, role: str = "member", status: int = 201) -> str | None:
    answer = teams.call("POST", f"/{team_id}/invite", who, json={"email": email, "role": role})
    assert answer.status_code == status, answer.get_json()
    return answer.get_json().get("invitationToken")


def test_an_invite_is_mailed_listed_and_accepted_once(api, teams):
    owner, guest = teams.user(), teams.user()
    team = teams.create(owner, "Night <shift>")
    token = invite(teams, owner, team["_id"], guest.email.upper(), "owner")
    assert len(token) >= 43  # 32 random bytes, urlsafe

    mail = api.mails(guest.email)[0]
    assert mail["templateName"] == "TeamInvite" and mail["status"] == "sent"
    assert "Night &lt;shift&gt;" in mail["body"] and "owner" in mail["body"]  # escaped in HTML
    link = link_in(mail)
    assert link.startswith("http://localhost/authentication/teams/invite/accept?")
    assert parse_qs(urlsplit(link).query) == {"invitationToken": [token]}

    pending = teams.call("GET", "/invites", guest).get_json()
    assert pending["count"] == 1
    assert {k: pending["invites"][0][k] for k in ("teamId", "invitationToken", "role", "teamName")} == {
        "teamId": team["_id"],
        "invitationToken": token,
        "role": "owner",
        "teamName": "Night <shift>",
    }
    assert teams.call("GET", "/invites", owner).get_json() == {"invites": [], "count": 0}

    accepted = teams.client.get(path_of(link), headers=guest.headers)
    assert accepted.status_code == 200, accepted.get_json()
    assert accepted.get_json()["_id"] == team["_id"] and accepted.get_json()["role"] == "owner"
    assert teams.members(guest, team["_id"]) == {owner.id: "owner", guest.id: "owner"}
    assert teams.call("GET", "/invites", guest).get_json()["count"] == 0
    again = teams.call("GET", f"/invite/accept?invitationToken={token}", guest)
    assert again.status_code == 404


def test_accepting_needs_the_invited_address_and_a_live_token(teams, api):
    owner, guest, intruder = teams.user(), teams.user(), teams.user()
    team_id = teams.create(owner, "Crew")["_id"]
    token = invite(teams, owner, team_id, guest.email)
    stolen = teams.call("GET", f"/invite/accept?invitationToken={token}", intruder)
    assert stolen.status_code == 403  # a token alone is not a credential
    assert teams.call("GET", f"/{team_id}", intruder).status_code == 404
    assert teams.call("GET", "/invite/accept?invitationToken=unknown", guest).status_code == 404
    assert teams.call("GET", "/invite/accept", guest).status_code == 400
    trellis_db.session.execute(
        update(TeamInvite)
        .where(TeamInvite.token == token)
        .values(expires_at=trellis_db.utcnow() - timedelta(seconds=1))
    )
    assert teams.call("GET", f"/invite/accept?invitationToken={token}", guest).status_code == 404
    assert teams.call("GET", "/invites", guest).get_json()["count"] == 0  # expired: not pending


def test_who_may_invite_and_what_they_may_grant(teams, api):
    owner, member, stranger = teams.user(), teams.user(), teams.user()
    team_id = teams.create(owner, "Crew")["_id"]
    token = invite(teams, owner, team_id, member.email)
    assert teams.call("GET", f"/invite/accept?invitationToken={token}", member).status_code == 200
    # Members grant nothing: not even the member role.
    for role in ("member", "owner"):
        invite(teams, member, team_id, api.fresh_email(), role, status=403)
    invite(teams, stranger, team_id, api.fresh_email(), status=404)
    invite(teams, owner, team_id, member.email, status=409)  # already a member
    invite(teams, owner, team_id, "not-an-email", status=400)
    invite(teams, owner, team_id, api.fresh_email(), "admin", status=400)
    assert teams.call("POST", f"/{team_id}/invite", owner, json={"email": "a@b.co", "x": 1}).status_code == 400


def test_a_new_invite_replaces_the_pending_one_and_withdrawing(teams, api):
    owner, guest = teams.user(), teams.user()
    team_id = teams.create(owner, "Crew")["_id"]
    first = invite(teams, owner, team_id, guest.email)
    second = invite(teams, owner, team_id, guest.email, "owner")
    assert teams.call("GET", f"/invite/accept?invitationToken={first}", guest).status_code == 404
    assert [i["invitationToken"] for i in teams.call("GET", "/invites", guest).get_json()["invites"]] == [second]
    assert teams.call("DELETE", f"/{team_id}/invite?email={guest.email}", guest).status_code == 404  # not visible
    assert teams.call("DELETE", f"/{team_id}/invite?email={guest.email.upper()}", owner).status_code == 200
    assert teams.call("DELETE", f"/{team_id}/invite?email={guest.email}", owner).status_code == 404
    assert teams.call("GET", f"/invite/accept?invitationToken={second}", guest).status_code == 404


def test_invites_switched_off(teams, api):
    owner, guest = teams.user(), teams.user()
    team_id = teams.create(owner, "Crew")["_id"]
    token = invite(teams, owner, team_id, guest.email)
    teams.configure(enabled=True, invites={"enabled": False})
    for method, path in (
        ("POST", f"/{team_id}/invite"),
        ("DELETE", f"/{team_id}/invite?email={guest.email}"),
        ("GET", "/invites"),
        ("GET", f"/invite/accept?invitationToken={token}"),
    ):
        body = {"email": guest.email} if method == "POST" else None
        answer = teams.call(method, path, owner if "invite?" in path or method == "POST" else guest, json=body)
        assert answer.status_code == 403 and "teams.invites.enabled" in answer.get_json()["message"], path
    assert teams.call("GET", f"/{team_id}/members", owner).status_code == 200  # the rest still works


def test_deleting_the_team_or_the_invited_user_removes_invites(teams, api, admin_headers):
    owner, guest = teams.user(), teams.user()
    top = teams.create(owner, "Top")["_id"]
    sub = teams.create(owner, "Sub", top)["_id"]
    invite(teams, owner, sub, api.fresh_email())
    invite(teams, owner, top, guest.email)
    assert teams.call("DELETE", f"/{top}", owner).status_code == 200
    assert trellis_db.session.execute(select(TeamInvite.id).where(TeamInvite.team_id.in_([top, sub]))).all() == []

    again = teams.create(owner, "Again")["_id"]
    invite(teams, owner, again, guest.email)
    assert teams.client.delete(f"/authentication/users/{guest.id}", headers=admin_headers).status_code == 200
    assert trellis_db.session.execute(select(TeamInvite.id).where(TeamInvite.email == guest.email)).all() == []


# --- the token is shown only to a verified address -------------------------------------------------------


def _signed_up(api, email: str) -> dict:
    """A self-registered account (unverified until its mailed link is opened) and its token pair."""
    assert api.register(email, "long-enough-1").status_code == 201
    return api.login(email, "long-enough-1").get_json()


def _pending(api, tokens: dict) -> list[dict]:
    answer = api.get("/authentication/teams/invites", tokens["accessToken"])
    assert answer.status_code == 200, answer.get_json()
    return answer.get_json()["invites"]


def test_a_squatter_who_signs_up_with_the_invited_address_sees_no_token(api, teams):
    owner = teams.user()
    team_id = teams.create(owner, "Vault")["_id"]
    invited = api.fresh_email()
    token = invite(teams, owner, team_id, invited, "owner")
    squatter = _signed_up(api, invited)  # nobody proved the address

    listed = _pending(api, squatter)
    assert [(i["teamId"], i["role"], i["invitationToken"]) for i in listed] == [(team_id, "owner", None)]
    assert teams.members(owner, team_id) == {owner.id: "owner"}

    # The address's owner opens the verification link: from then on the token is shown.
    verify = next(m for m in api.mails(invited) if m["templateName"] == "EmailVerification")
    assert api.get(path_of(link_in(verify))).status_code == 200
    assert [i["invitationToken"] for i in _pending(api, squatter)] == [token]


def test_changing_ones_address_to_the_invited_one_shows_no_token_until_confirmed(api, teams):
    owner = teams.user()
    team_id = teams.create(owner, "Vault")["_id"]
    invited = api.fresh_email()
    token = invite(teams, owner, team_id, invited, "owner")
    stranger = teams.user()  # created by an administrator: verified
    assert [i["invitationToken"] for i in _pending(api, {"accessToken": stranger.access_token})] == []
    changed = api.post(
        "/authentication/local/change-email",
        {"newEmail": invited, "password": stranger.password},
        stranger.access_token,
    )
    assert changed.status_code == 200 and changed.get_json()["verificationRequired"] is False
    listed = _pending(api, {"accessToken": stranger.access_token})
    assert [(i["teamId"], i["invitationToken"]) for i in listed] == [(team_id, None)]
    # Confirmed from the new mailbox (a verification link asked for there), the token is shown.
    assert api.post("/authentication/local/resend-verification", {"email": invited}).status_code == 200
    verify = next(m for m in api.mails(invited) if m["templateName"] == "EmailVerification")
    assert api.get(path_of(link_in(verify))).status_code == 200
    listed = _pending(api, {"accessToken": stranger.access_token})
    assert [i["invitationToken"] for i in listed] == [token]


def test_the_mailed_token_accepts_for_an_unverified_holder_of_the_address(api, teams):
    owner = teams.user()
    team_id = teams.create(owner, "Crew")["_id"]
    invited = api.fresh_email()
    invite(teams, owner, team_id, invited)
    guest = _signed_up(api, invited)
    link = link_in(next(m for m in api.mails(invited) if m["templateName"] == "TeamInvite"))
    accepted = api.get(path_of(link), guest["accessToken"])
    assert accepted.status_code == 200, accepted.get_json()
    assert teams.members(owner, team_id) == {owner.id: "owner", guest["userId"]: "member"}


def test_an_account_an_administrator_created_counts_as_verified(teams, client, admin_headers):
    made = teams.user()
    assert client.get("/authentication/user", headers=made.headers).get_json()["isVerified"] is True


def test_the_invite_link_is_a_page_for_a_browser_and_json_for_everyone_else(api, teams):
    owner, guest = teams.user(), teams.user()
    team_id = teams.create(owner, "Crew")["_id"]
    token = invite(teams, owner, team_id, guest.email)
    path = path_of(link_in(api.mails(guest.email)[0]))
    browser = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}

    page = teams.client.get(path, headers=browser)
    assert page.status_code == 200 and page.mimetype == "text/html"
    assert page.headers["Content-Security-Policy"] == PAGE_CSP and page.headers["Referrer-Policy"] == "no-referrer"
    assert page.headers["Cache-Control"] == "no-store"
    assert f'data-token="{token}"' in page.get_data(as_text=True)
    assert teams.members(owner, team_id) == {owner.id: "owner"}  # the page alone accepts nothing

    assert teams.client.get(path).status_code == 401  # a JSON client without credentials, as before
    accepted = teams.client.get(path, headers={**browser, **guest.headers})  # credentials: the JSON route
    assert accepted.status_code == 200 and accepted.get_json()["role"] == "member"


def test_a_link_mailed_to_the_old_address_does_not_verify_the_new_one(api, teams):
    owner = teams.user()
    team_id = teams.create(owner, "Vault")["_id"]
    invited, own = api.fresh_email(), api.fresh_email()
    invite(teams, owner, team_id, invited, "owner")
    squatter = _signed_up(api, own)  # its verification link goes to its own mailbox, kept unopened
    old_link = path_of(link_in(next(m for m in api.mails(own) if m["templateName"] == "EmailVerification")))
    changed = api.post(
        "/authentication/local/change-email",
        {"newEmail": invited, "password": "long-enough-1"},
        squatter["accessToken"],
    )
    assert changed.status_code == 200, changed.get_json()
    assert api.get(old_link).status_code == 404  # used up by the change
    assert api.me(squatter["accessToken"]).get_json()["isVerified"] is False
    assert [i["invitationToken"] for i in _pending(api, squatter)] == [None]
