"""The browser-style provider sign-in across two real server processes on one database: init on one,
the provider's redirect lands on the other (what a load balancer does)."""

from __future__ import annotations

import threading
from urllib.parse import urlsplit

import pytest
import requests

from trellis.testing.plugin import TEST_MASTER_KEY

from .fake_providers import CLIENT_ID, CLIENT_SECRET, Account, FakeOidc

pytestmark = pytest.mark.live

ADMIN = {"masterkey": TEST_MASTER_KEY}


@pytest.fixture()
def oidc():
    fake = FakeOidc()
    yield fake
    fake.stop()


def provider_redirect(base: str, provider: str) -> str:
    """``init`` on ``base``, then the provider's page: the path and query the provider sends the browser to."""
    start = requests.get(f"{base}/authentication/init/{provider}", allow_redirects=False, timeout=30)
    assert start.status_code == 302, start.text
    back = requests.get(start.headers["Location"], allow_redirects=False, timeout=30)
    assert back.status_code == 302, back.text
    location = urlsplit(back.headers["Location"])
    assert f"{location.scheme}://{location.netloc}" == base  # the redirect URI registered at the provider
    return f"{location.path}?{location.query}"


def test_init_on_one_worker_hook_on_another(live_server_factory, oidc):
    first, second = live_server_factory(), live_server_factory()
    configured = requests.put(
        f"{first.url}/config/authentication",
        headers=ADMIN,
        timeout=30,
        json={
            "oauth": {
                "oidc": [{"name": "acme", "issuer": oidc.issuer, "clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET}],
            }
        },
    )
    assert configured.status_code == 200, configured.text
    oidc.account = Account(subject="live-1", email="live-oidc@example.com", email_verified=True)

    back = provider_redirect(first.url, "acme")
    answer = requests.get(f"{second.url}{back}", allow_redirects=False, timeout=30)
    assert answer.status_code == 200, answer.text
    tokens = answer.json()
    me = requests.get(
        f"{first.url}/authentication/user", headers={"Authorization": f"Bearer {tokens['accessToken']}"}, timeout=30
    ).json()
    assert (me["email"], me["isVerified"], me["providers"]) == ("live-oidc@example.com", True, ["acme"])
    # The state was used on the second worker: the first refuses it too.
    replay = requests.get(f"{first.url}{back}", allow_redirects=False, timeout=30)
    assert replay.status_code == 400 and replay.json()["errors"] == {"state": ["Invalid."]}

    # The same redirect delivered to both workers at once: exactly one signs in.
    for _ in range(3):
        back = provider_redirect(second.url, "acme")
        start = threading.Barrier(2)
        statuses: list[int] = []

        def finish(base: str, path: str = back) -> None:
            start.wait(timeout=30)
            statuses.append(requests.get(f"{base}{path}", allow_redirects=False, timeout=60).status_code)

        threads = [threading.Thread(target=finish, args=(server.url,)) for server in (first, second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=90)
        assert sorted(statuses) == [200, 400], statuses

    users = requests.get(
        f"{first.url}/authentication/users", params={"search": "live-oidc@"}, headers=ADMIN, timeout=30
    ).json()
    assert users["count"] == 1 and users["users"][0]["providers"] == ["acme"]
