"""Where mailed links point: ``hostUrl``, else ``TRELLIS_PUBLIC_URL``, else the request's own base URL only
when its host is trusted. A forged ``Host`` never puts a token into a link to another host."""

from __future__ import annotations

import re

import pytest
import requests

from trellis.testing.plugin import TEST_MASTER_KEY
from trellis.testing.waiting import wait_until

from .conftest import link_in

PASSWORD = "long-enough-1"
ATTACKER = {"Host": "attacker.example"}


def user(api, **config) -> str:
    """A registered user; no verification mail, so the only mails are the ones a test asks for."""
    api.configure(magicLink={"enabled": True}, local={"verification": {"sendEmail": False}}, **config)
    email = api.fresh_email()
    assert api.register(email, PASSWORD).status_code == 201
    return email


def send(api, path: str, email: str, headers: dict[str, str]):
    return api.call("POST", path, {"email": email}, headers)


ANONYMOUS_SENDS = [
    "/authentication/forgot-password",
    "/authentication/magic-link",
    "/authentication/local/resend-verification",
]


@pytest.mark.parametrize("path", ANONYMOUS_SENDS)
def test_a_forged_host_is_refused_alike_for_known_and_unknown_addresses_and_mails_nothing(api, path):
    email = user(api)
    known = send(api, path, email, ATTACKER)
    unknown = send(api, path, api.fresh_email(), ATTACKER)
    assert known.status_code == unknown.status_code == 400
    assert known.get_json()["name"] == "INVALID_ARGUMENTS" and "Host" in known.get_json()["errors"]
    assert known.get_json()["message"] == unknown.get_json()["message"]
    assert api.mails(email) == []


def test_registration_with_a_forged_host_creates_no_account_and_sends_nothing(api):
    email = api.fresh_email()
    answer = api.client.post("/authentication/local/new", json={"email": email, "password": PASSWORD}, headers=ATTACKER)
    assert answer.status_code == 400 and "Host" in answer.get_json()["errors"]
    assert api.mails(email) == []
    assert api.register(email, PASSWORD).status_code == 201  # nothing was created


def test_change_email_with_a_forged_host_is_refused(api):
    email = user(api)
    access = api.login(email, PASSWORD).get_json()["accessToken"]
    api.configure(local={"verification": {"required": True}})
    new_email = api.fresh_email()
    answer = api.call(
        "POST",
        "/authentication/local/change-email",
        {"newEmail": new_email, "password": PASSWORD},
        {**ATTACKER, **api.bearer(access)},
    )
    assert answer.status_code == 400 and "Host" in answer.get_json()["errors"]
    assert api.mails(new_email) == []


@pytest.mark.parametrize("host", ["localhost", "localhost:3000", "127.0.0.1:8080", "[::1]:3000"])
def test_loopback_hosts_are_trusted_by_default(api, host):
    email = user(api)
    assert send(api, "/authentication/forgot-password", email, {"Host": host}).status_code == 200
    assert link_in(api.mails(email)[0]).startswith(f"http://{host}/authentication/reset?reset_token=")


def test_the_host_the_server_listens_on_is_trusted(api, monkeypatch):
    monkeypatch.setenv("HOST", "10.1.2.3")
    email = user(api)
    assert send(api, "/authentication/magic-link", email, {"Host": "10.1.2.3:3000"}).status_code == 200
    assert link_in(api.mails(email)[0]).startswith("http://10.1.2.3:3000/hook/authentication/magic-link/")


def test_trusted_hosts_replace_the_defaults(api, app, monkeypatch):
    monkeypatch.setitem(app.config, "TRUSTED_HOSTS", ["localhost", ".example.org"])  # Flask checks every request
    email = user(api)
    assert send(api, "/authentication/magic-link", email, {"Host": "api.example.org"}).status_code == 200
    assert link_in(api.mails(email)[0]).startswith("http://api.example.org/hook/authentication/magic-link/")
    assert send(api, "/authentication/magic-link", email, {"Host": "127.0.0.1"}).status_code == 400


def test_the_public_url_wins_over_any_host(api, app, monkeypatch):
    monkeypatch.setitem(app.config, "PUBLIC_URL", "https://api.example.com")
    email = user(api)
    assert send(api, "/authentication/forgot-password", email, ATTACKER).status_code == 200
    assert send(api, "/authentication/magic-link", email, ATTACKER).status_code == 200
    links = sorted(link_in(mail) for mail in api.mails(email))
    assert links[0].startswith("https://api.example.com/authentication/reset?reset_token=")
    assert links[1].startswith("https://api.example.com/hook/authentication/magic-link/")


def test_the_module_host_url_wins_over_the_public_url(api, app, monkeypatch):
    monkeypatch.setitem(app.config, "PUBLIC_URL", "https://api.example.com")
    email = user(api, hostUrl="https://accounts.example.net/")
    assert send(api, "/authentication/forgot-password", email, ATTACKER).status_code == 200
    assert link_in(api.mails(email)[0]).startswith("https://accounts.example.net/authentication/reset?reset_token=")


def test_malformed_hosts_are_refused(api):
    email = user(api)
    for host in ("attacker.example@localhost", "localhost/evil", "local host"):
        assert send(api, "/authentication/forgot-password", email, {"Host": host}).status_code == 400
    assert api.mails(email) == []


def outbox_links(base: str, email: str) -> list[str]:
    """The links of ``email``'s delivered mail: the outbox provider shows a queued mail's link once sent."""

    def delivered() -> list[dict]:
        messages = requests.get(f"{base}/admin/email/outbox", headers={"masterkey": TEST_MASTER_KEY}, timeout=30)
        return [m for m in messages.json()["messages"] if m["to"] == email and m["status"] == "sent"]

    return [re.search(r'href="([^"]+)"', m["body"]).group(1) for m in wait_until(delivered, "the mail", 30)]


@pytest.mark.live
def test_a_real_server_takes_its_trusted_hosts_from_the_environment(live_server_factory):
    from trellis_authentication.testing import create_user_over_http

    server = live_server_factory(TRELLIS_TRUSTED_HOSTS="127.0.0.1, app.example.org, .example.net")
    base = server.url
    account = create_user_over_http(base)
    forged = requests.post(
        f"{base}/authentication/forgot-password", json={"email": account.email}, headers=ATTACKER, timeout=30
    )
    assert forged.status_code == 400 and forged.json()["name"] == "INVALID_ARGUMENTS"
    trusted = requests.post(
        f"{base}/authentication/forgot-password",
        json={"email": account.email},
        headers={"Host": "app.example.org"},
        timeout=30,
    )
    assert trusted.status_code == 200
    links = outbox_links(base, account.email)
    assert len(links) == 1 and links[0].startswith("http://app.example.org/authentication/reset?reset_token=")
