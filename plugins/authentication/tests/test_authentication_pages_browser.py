"""The first hour of a user, in headless Chromium against a real server and a real SMTP server: the mailed
links open pages that work, and the account page lists and ends sessions and deletes the account with
what the modules kept for it (README, "Pages: mailed links and the account").

Every test fails on an uncaught script error or a Content-Security-Policy violation in the page.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from playwright.sync_api import expect

from trellis.testing.browser import browser_page, watch_problems
from trellis.testing.plugin import TEST_MASTER_KEY
from trellis.testing.waiting import wait_until
from trellis_authentication.testing import create_user_over_http

from .conftest import fresh_email

pytestmark = [pytest.mark.browser, pytest.mark.live]

TIMEOUT = 15_000
expect.set_options(timeout=TIMEOUT)
ADMIN = {"masterkey": TEST_MASTER_KEY}
PASSWORD = "long-enough-1"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with browser_page() as page:
        page.set_default_timeout(TIMEOUT)
        yield page


class Site:
    """The page, the server and its mailbox, and the problems seen in the page so far."""

    def __init__(self, page: Any, url: str, smtp: Any) -> None:
        self.page, self.url, self.smtp = page, url, smtp
        self.problems: list[str] = []

    def api(self, method: str, path: str, token: str | None = None, **kwargs: Any) -> requests.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else ADMIN
        return requests.request(method, self.url + path, headers=headers, timeout=30, **kwargs)

    def link(self, to: str, subject: str) -> str:
        """The link of the newest mail to ``to`` whose subject has ``subject``, once the senders sent it."""

        def found() -> str | None:
            mine = [d.message for d in self.smtp.messages if d.rcpt_tos == [to] and subject in d.message["Subject"]]
            if not mine:
                return None
            html = mine[-1].get_body(("html",)).get_content()
            return re.search(r'href="([^"]+)"', html).group(1).replace("&amp;", "&")

        return wait_until(found, f"the mail {subject!r} to {to}", timeout=30)

    def sign_in(self, email: str, password: str) -> None:
        page = self.page
        form = page.locator("#sign-in-form")
        form.get_by_label("Email").fill(email)
        form.get_by_label("Password").fill(password)
        form.get_by_role("button", name="Sign in").click()
        expect(page.locator("#who")).to_have_text(email)


@pytest.fixture()
def site(browser: Any, live_server: Any, smtp_server: Any) -> Iterator[Site]:
    made = Site(browser, live_server.url, smtp_server)
    made.api("PUT", "/config/email", json=smtp_server.email_config()).raise_for_status()
    with watch_problems(browser) as made.problems:
        yield made
    assert made.problems == []


def test_register_then_the_mailed_verification_link_then_sign_in(site: Site) -> None:
    page, email = site.page, fresh_email()
    taken = create_user_over_http(site.url)

    # Register on the account page: the server's rules refuse inline, then the sign-up signs in.
    page.goto(site.url + "/authentication/account")
    page.locator("#register summary").click()
    form = page.locator("#register-form")
    form.get_by_label("Email").fill(taken.email)
    form.get_by_label("Choose a password").fill("short")
    form.get_by_role("button", name="Create my account").click()
    expect(page.locator("#password-error")).to_contain_text("at least 8 characters")
    form.get_by_label("Choose a password").fill(PASSWORD)
    form.get_by_role("button", name="Create my account").click()
    expect(page.locator("#email-error")).to_have_text("Already registered.")
    form.get_by_label("Email").fill(email)
    form.get_by_role("button", name="Create my account").click()
    expect(page.locator("#who")).to_have_text(email)
    expect(page.locator("#flash")).to_contain_text("Confirm your address with the link we mailed you")
    page.get_by_role("button", name="Sign out").click()
    expect(page.locator("#sign-in-form")).to_be_visible()

    page.goto(site.link(email, "Confirm your email"))
    expect(page.locator("h1")).to_have_text("Email address verified")
    expect(page.locator("#message")).to_contain_text("You can sign in now")
    page.get_by_role("link", name="Sign in to your account").click()
    page.wait_for_url(re.compile(r"/authentication/account$"))

    # A wrong password is refused in the page; the right one shows the account and this session.
    form = page.locator("#sign-in-form")
    form.get_by_label("Email").fill(email)
    form.get_by_label("Password").fill("not the password")
    form.get_by_role("button", name="Sign in").click()
    expect(form.locator(".form-error")).to_have_text("Wrong email or password")
    site.sign_in(email, PASSWORD)
    expect(page.locator("#sessions .badge")).to_have_text("This device")
    me = site.api("GET", f"/authentication/users?search={email}").json()["users"][0]
    assert me["isVerified"] is True

    # The link again: the page says it no longer works and what to do.
    page.goto(site.link(email, "Confirm your email"))
    expect(page.locator("#message")).to_contain_text("unknown, used or expired")


def test_forgot_password_mailed_link_new_password_ends_the_old_sessions(site: Site) -> None:
    page = site.page
    account = create_user_over_http(site.url)
    old_session = account.access_token

    page.goto(site.url + "/authentication/account")
    page.evaluate("sessionStorage.clear()")
    page.reload()
    page.locator("#forgot summary").click()
    forgot = page.locator("#forgot-form")
    forgot.get_by_label("Email of your account").fill(account.email)
    forgot.get_by_role("button", name="Mail me a reset link").click()
    expect(page.locator("#flash")).to_contain_text("a password reset link is on its way")

    page.goto(site.link(account.email, "Reset your password"))
    expect(page.locator("h1")).to_have_text("Choose a new password")
    form = page.locator("#reset-form")
    # The server's password rules decide, and say why next to the field; then a mismatch is caught.
    form.get_by_label("New password", exact=True).fill("short")
    form.get_by_label("New password again").fill("short")
    form.get_by_role("button", name="Set the new password").click()
    expect(page.locator("#password-error")).to_contain_text("at least 8 characters")
    expect(form.get_by_label("New password", exact=True)).to_have_attribute("aria-invalid", "true")
    form.get_by_label("New password", exact=True).fill("a-brand-new-password")
    form.get_by_label("New password again").fill("a-brand-new-passwort")
    form.get_by_role("button", name="Set the new password").click()
    expect(page.locator("#confirm-error")).to_have_text("The two passwords differ.")
    form.get_by_label("New password again").fill("a-brand-new-password")
    form.get_by_role("button", name="Set the new password").click()
    expect(page.locator("#done")).to_be_visible()
    expect(page.locator("#done")).to_contain_text("Every session of your account has ended")

    assert site.api("GET", "/authentication/user", token=old_session).status_code == 401
    old = requests.post(
        site.url + "/authentication/local", json={"email": account.email, "password": account.password}, timeout=30
    )
    assert old.status_code == 401
    page.get_by_role("link", name="Sign in to your account").click()
    site.sign_in(account.email, "a-brand-new-password")


def test_sessions_listed_and_one_ended(site: Site) -> None:
    page = site.page
    account = create_user_over_http(site.url)  # the first session: an app somewhere else
    phone = requests.post(
        site.url + "/authentication/local",
        json={"email": account.email, "password": account.password},
        headers={"User-Agent": "PhoneApp/2.1"},
        timeout=30,
    ).json()
    page.goto(site.url + "/authentication/account")
    page.evaluate("sessionStorage.clear()")
    page.reload()
    site.sign_in(account.email, account.password)

    rows = page.locator("#sessions tbody tr")
    expect(rows).to_have_count(3)
    phone_row = rows.filter(has_text="PhoneApp/2.1")
    expect(phone_row.locator("td").nth(1)).to_have_text("127.0.0.1")
    phone_row.get_by_role("button", name="End the session of PhoneApp/2.1 from 127.0.0.1").click()
    expect(page.locator("#flash")).to_have_text("The session has ended.")
    expect(rows).to_have_count(2)
    assert site.api("GET", "/authentication/user", token=phone["accessToken"]).status_code == 401
    assert site.api("GET", "/authentication/user", token=account.access_token).status_code == 200

    # Signing out ends this session too.
    page.get_by_role("button", name="Sign out").click()
    expect(page.locator("#sign-in-form")).to_be_visible()
    sessions = site.api("GET", "/authentication/sessions", token=account.access_token).json()
    assert sessions["count"] == 1 and sessions["sessions"][0]["current"] is True


def test_magic_link_signs_in_on_the_account_page(site: Site) -> None:
    page = site.page
    site.api("PUT", "/config/authentication", json={"magicLink": {"enabled": True}}).raise_for_status()
    account = create_user_over_http(site.url)
    page.goto(site.url + "/authentication/account")
    page.evaluate("sessionStorage.clear()")
    requests.post(site.url + "/authentication/magic-link", json={"email": account.email}, timeout=30)
    page.goto(site.link(account.email, "sign-in link"))
    page.wait_for_url(re.compile(r"/authentication/account$"))  # the tokens left the address bar
    expect(page.locator("#who")).to_have_text(account.email)
    expect(page.locator("#flash")).to_have_text("You are signed in with your link.")


def test_account_deleted_with_its_files_and_rooms(site: Site) -> None:
    page = site.page
    account = create_user_over_http(site.url)
    friend = create_user_over_http(site.url)
    loaded = {m["name"] for m in site.api("GET", "/config").json()["modules"]}
    if "storage" in loaded:
        uploaded = site.api(
            "POST", "/storage/upload", token=account.access_token, files={"file": ("notes.txt", b"my notes\n")}
        )
        assert uploaded.status_code == 201, uploaded.text
    if "chat" in loaded:
        room = site.api(
            "POST", "/chat/rooms", token=account.access_token, json={"roomName": "Plans", "users": [friend.id]}
        )
        assert room.status_code == 201, room.text

    page.goto(site.url + "/authentication/account")
    page.evaluate("sessionStorage.clear()")
    page.reload()
    site.sign_in(account.email, account.password)
    delete = page.locator("#delete-form")
    delete.get_by_label("Password", exact=True).fill("not the password")
    delete.get_by_role("button", name="Delete my account").click()
    expect(delete.locator(".form-error")).to_have_text("The password is wrong")
    delete.get_by_label("Password", exact=True).fill(account.password)
    delete.get_by_role("button", name="Delete my account").click()
    expect(page.locator("#deleted")).to_be_visible()  # (hidden, it holds its text already)
    expect(page.locator("#deleted")).to_have_text("Your account is deleted.")
    assert page.evaluate("Object.keys(sessionStorage)") == []

    assert site.api("GET", f"/authentication/users?search={account.email}").json()["count"] == 0
    assert site.api("GET", "/authentication/user", token=account.access_token).status_code == 401
    if "storage" in loaded:
        assert site.api("GET", "/admin/storage/files", params={"owner": account.id}).json()["count"] == 0
    if "chat" in loaded:
        rooms = site.api("GET", "/chat/rooms", token=friend.access_token).json()
        assert all(account.id not in room["participants"] for room in rooms["rooms"])


def test_the_team_invite_link_signs_up_or_in_and_accepts(site: Site) -> None:
    page = site.page
    site.api("PUT", "/config/authentication", json={"teams": {"enabled": True}}).raise_for_status()
    owner, stranger = create_user_over_http(site.url), create_user_over_http(site.url)
    team = site.api("POST", "/authentication/teams", owner.access_token, json={"name": "Night <shift>"}).json()
    newcomer, member = fresh_email(), create_user_over_http(site.url)
    for email, role in ((newcomer, "owner"), (member.email, "member")):
        body = {"email": email, "role": role}
        site.api(
            "POST", f"/authentication/teams/{team['_id']}/invite", owner.access_token, json=body
        ).raise_for_status()

    # Someone with no account yet: the link's page creates one with the invited address and joins.
    page.goto(site.url + "/authentication/account")
    page.evaluate("sessionStorage.clear()")
    page.goto(site.link(newcomer, "You are invited to join"))
    expect(page.locator("h1")).to_have_text("Join a team")
    page.locator("#register summary").click()
    form = page.locator("#register-form")
    form.get_by_label("Email").fill(newcomer)
    form.get_by_label("Choose a password").fill(PASSWORD)
    form.get_by_role("button", name="Create my account and join").click()
    expect(page.locator("#joined")).to_contain_text("You are now an owner of the team Night <shift>.")

    # A signed-in user of another address is refused and signs in with the invited one instead.
    page.evaluate("sessionStorage.clear()")
    invite_link = site.link(member.email, "You are invited to join")
    page.goto(invite_link)
    form = page.locator("#sign-in-form")
    form.get_by_label("Email").fill(stranger.email)
    form.get_by_label("Password").fill(stranger.password)
    form.get_by_role("button", name="Sign in and join").click()
    expect(page.locator("#refused-text")).to_contain_text("This invitation is for another email address.")
    page.get_by_role("button", name="Sign in with another account").click()
    form.get_by_label("Email").fill(member.email)
    form.get_by_label("Password").fill(member.password)
    form.get_by_role("button", name="Sign in and join").click()
    expect(page.locator("#joined")).to_contain_text("You are now a member of the team Night <shift>.")

    members = site.api("GET", f"/authentication/teams/{team['_id']}/members", owner.access_token).json()
    roles = {m["email"]: m["role"] for m in members["members"]}
    assert roles == {owner.email: "owner", newcomer: "owner", member.email: "member"}

    # The link again, signed in: used, so the page says what to do instead.
    page.goto(invite_link)
    expect(page.locator("#refused-text")).to_contain_text("unknown, used or expired")
