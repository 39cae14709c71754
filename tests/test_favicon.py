"""``/favicon.ico`` is a small local icon, kept by browsers for a week: without it every page (Swagger UI,
the pages mailed to users) logged a 404 in the browser's console."""

from __future__ import annotations

import re

ICO_MAGIC = b"\x00\x00\x01\x00"


def test_the_icon_is_served_without_credentials_and_cached(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 200
    assert response.mimetype == "image/x-icon"
    assert response.data.startswith(ICO_MAGIC) and len(response.data) < 4096
    max_age = re.search(r"max-age=(\d+)", response.headers.get("Cache-Control", ""))
    assert max_age and int(max_age.group(1)) >= 24 * 3600, response.headers.get("Cache-Control")
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    head = client.head("/favicon.ico")
    assert head.status_code == 200 and head.data == b""


def test_the_icon_is_not_an_api_operation(client):
    assert "/favicon.ico" not in client.get("/openapi.json").get_json()["paths"]
