"""The pages of mailed links and of the account, in process (README, "Pages: mailed links and the account"):
what each link answers a browser and a JSON client, the page headers, nothing of them in the OpenAPI
document. The pages' scripts are walked in Chromium in ``test_authentication_pages_browser.py``."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import parse_qs, urlsplit

import pytest

from trellis.http import PAGE_CSP

from .conftest import link_in, path_of

BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


class Assets(HTMLParser):
    """The script and style sheet addresses of a page, and any inline code or style."""

    def __init__(self) -> None:
        super().__init__()
        self.assets: list[str] = []
        self.inline: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "script":
            self._in_script = True
            if "src" in attrs:
                self.assets.append(attrs["src"])
        if tag == "link" and attrs.get("rel") == "stylesheet":
            self.assets.append(attrs["href"])
        if "style" in attrs or any(name.startswith("on") for name in attrs):
            self.inline.append(f"{tag} {attrs}")

    def handle_endtag(self, tag):
        self._in_script = False if tag == "script" else self._in_script

    def handle_data(self, data):
        if self._in_script and data.strip():
            self.inline.append(data)


def page(api, path: str, status: int = 200):
    answer = api.client.get(path, headers=BROWSER)
    assert answer.status_code == status, answer.get_data(as_text=True)
    assert answer.mimetype == "text/html"
    assert answer.headers["Content-Security-Policy"] == PAGE_CSP
    assert answer.headers["Referrer-Policy"] == "no-referrer"
    assert answer.headers["Cache-Control"] == "no-store"
    html = answer.get_data(as_text=True)
    parsed = Assets()
    parsed.feed(html)
    assert parsed.inline == []
    for asset in parsed.assets:  # every asset is this server's own, and served
        assert asset.startswith("/authentication/pages/")
        assert api.client.get(asset).status_code == 200
    return html


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_the_reset_link_opens_a_page_with_the_form(api):
    email = api.fresh_email()
    api.register(email)
    api.post("/authentication/forgot-password", {"email": email})
    link = link_in(next(m for m in api.mails(email) if m["templateName"] == "ForgotPassword"))
    assert urlsplit(link).path == "/authentication/reset"
    html = page(api, path_of(link))
    token = parse_qs(urlsplit(link).query)["reset_token"][0]
    assert f'data-token="{token}"' in html
    assert re.search(r'<label class="field"><span class="label">New password</span>\s*<input name="password"', html)


@pytest.mark.parametrize("query", ["", "?reset_token=", "?reset_token=no-such-token"])
def test_a_reset_link_that_does_not_work_says_what_to_do(api, query):
    html = page(api, "/authentication/reset" + query, 400)
    assert "unknown, used or expired" in html and 'href="/authentication/account"' in html
    assert "<form" not in html


def test_verification_link_answers_a_browser_with_a_page_and_json_clients_as_before(api):
    email = api.fresh_email()
    api.register(email)
    link = path_of(link_in(next(m for m in api.mails(email) if m["templateName"] == "EmailVerification")))
    html = page(api, link)
    assert "Email address verified" in text_of(html) and "You can sign in now" in html
    assert api.me(api.login(email, "long-enough-1").get_json()["accessToken"]).get_json()["isVerified"] is True
    # Used: the page says so (404), and a JSON client gets the usual error.
    assert "unknown, used or expired" in page(api, link, 404)
    json_answer = api.client.get(link, headers={"Accept": "*/*"})
    assert json_answer.status_code == 404 and json_answer.get_json()["name"] == "NOT_FOUND"


def test_a_configured_redirect_still_wins_for_a_browser(api):
    api.configure(local={"verification": {"redirectUri": "https://app.example.com/verified"}})
    email = api.fresh_email()
    api.register(email)
    link = path_of(link_in(next(m for m in api.mails(email) if m["templateName"] == "EmailVerification")))
    answer = api.client.get(link, headers=BROWSER)
    assert answer.status_code == 302 and answer.headers["Location"] == "https://app.example.com/verified"


def test_change_email_link_answers_a_page(api):
    api.configure(local={"verification": {"required": True}})
    email, new = api.fresh_email(), api.fresh_email()
    api.register(email)
    verify = path_of(link_in(next(m for m in api.mails(email) if m["templateName"] == "EmailVerification")))
    api.client.get(verify)
    tokens = api.login(email, "long-enough-1").get_json()
    asked = api.post(
        "/authentication/local/change-email", {"newEmail": new, "password": "long-enough-1"}, tokens["accessToken"]
    )
    assert asked.status_code == 200
    link = path_of(link_in(next(m for m in api.mails(new) if m["templateName"] == "ChangeEmailVerification")))
    assert "Email address changed" in page(api, link)
    assert api.me(tokens["accessToken"]).get_json()["email"] == new


def test_magic_link_hands_the_session_to_the_account_page_in_the_fragment(api):
    api.configure(magicLink={"enabled": True})
    email = api.fresh_email()
    api.register(email)
    api.post("/authentication/magic-link", {"email": email})
    link = path_of(link_in(next(m for m in api.mails(email) if m["templateName"] == "MagicLink")))
    answer = api.client.get(link, headers=BROWSER)
    assert answer.status_code == 302
    location = urlsplit(answer.headers["Location"])
    assert (location.path, location.query) == ("/authentication/account", "")
    handed = parse_qs(location.fragment)
    assert api.me(handed["accessToken"][0]).get_json()["email"] == email
    assert "unknown, used or expired" in page(api, link, 404)


def test_the_account_page_and_its_assets(api):
    html = page(api, "/authentication/account")
    for form in ("sign-in-form", "second-factor-form", "register-form", "forgot-form", "delete-form"):
        assert f'id="{form}"' in html
    # Every input has a visible label around it.
    assert not re.search(r"<input(?![^>]*type=\"hidden\")[^>]*>(?![^<]*</label>)", html.replace("\n", " "))


def test_pages_are_not_api_operations(app, client):
    paths = client.get("/openapi.json").get_json()["paths"]
    assert "/authentication/reset" not in paths and "/authentication/account" not in paths
    assert not any(path.startswith("/authentication/pages") for path in paths)
