"""Built URLs follow the address the client used: trusted ``X-Forwarded-*`` headers, else ``Host``."""

from __future__ import annotations

import pytest

from trellis import create_app

PROXY_HEADERS = {
    "X-Forwarded-Proto": "https",
    "X-Forwarded-Host": "api.example.org",
    "X-Forwarded-Port": "8443",
    "X-Forwarded-For": "203.0.113.9",
}


@pytest.fixture()
def proxied(app_config, app, db):
    """A second process of the same deployment whose settings trust one reverse proxy."""
    return create_app({**app_config, "PROXY_COUNT": 1}).test_client()


def _urls(client, file_id: str, headers: dict[str, str]) -> tuple[str, str]:
    signed = client.get(f"/storage/getUrl/{file_id}", headers=headers)
    assert signed.status_code == 200, signed.get_json()
    record = client.get(f"/storage/file/{file_id}", headers=headers)
    assert record.status_code == 200, record.get_json()
    return signed.get_json()["url"], record.get_json()["url"]


def test_without_a_trusted_proxy_urls_follow_the_host_header_with_its_port(client, user, upload):
    public = upload(user.headers, b"public", "pub.txt", isPublic=True).get_json()["id"]
    private = upload(user.headers, b"private", "priv.txt").get_json()["id"]
    headers = {**user.headers, "Host": "files.example.com:8080", **PROXY_HEADERS}  # forwarded: not trusted
    url, same = _urls(client, public, headers)
    assert url == same == f"http://files.example.com:8080/storage/public/{public}/pub.txt"
    signed, _ = _urls(client, private, headers)
    assert signed.startswith("http://files.example.com:8080/storage/signed/")
    assert client.get(signed.removeprefix("http://files.example.com:8080")).data == b"private"


def test_behind_a_trusted_proxy_urls_follow_x_forwarded_proto_host_and_port(proxied, client, user, upload):
    public = upload(user.headers, b"public", "pub.txt", isPublic=True).get_json()["id"]
    private = upload(user.headers, b"private", "priv.txt").get_json()["id"]
    headers = {**user.headers, "Host": "10.0.0.5:3001", **PROXY_HEADERS}
    url, _ = _urls(proxied, public, headers)
    assert url == f"https://api.example.org:8443/storage/public/{public}/pub.txt"
    signed, download = _urls(proxied, private, headers)
    assert signed.startswith("https://api.example.org:8443/storage/signed/")
    assert download == f"https://api.example.org:8443/storage/download/{private}"
    # The default port of the scheme is left out, as a browser would write it.
    url, _ = _urls(proxied, public, {**headers, "X-Forwarded-Port": "443"})
    assert url == f"https://api.example.org/storage/public/{public}/pub.txt"
