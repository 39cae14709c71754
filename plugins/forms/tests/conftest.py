"""Forms test helpers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

CONTACT_FIELDS = [
    {"name": "name", "type": "text", "required": True},
    {"name": "email", "type": "email", "required": True},
    {"name": "message", "type": "textarea", "required": True},
    {"name": "age", "type": "number"},
    {"name": "newsletter", "type": "checkbox"},
]


@pytest.fixture()
def make_form(client, admin_headers) -> Callable[..., dict[str, Any]]:
    def make(**overrides: Any) -> dict[str, Any]:
        body = {"name": "Contact", "fields": CONTACT_FIELDS, **overrides}
        response = client.post("/admin/forms", json=body, headers=admin_headers)
        assert response.status_code == 201, response.get_json()
        return response.get_json()

    return make


@pytest.fixture()
def contact(make_form) -> dict[str, Any]:
    return make_form()


@pytest.fixture()
def valid_submission() -> dict[str, Any]:
    return {"name": "Ada Lovelace", "email": "Ada@Example.com", "message": "Hello\nthere", "age": "36"}


@pytest.fixture()
def configure_forms(client, admin_headers) -> Callable[..., dict[str, Any]]:
    def put(**changes: Any) -> dict[str, Any]:
        response = client.put("/config/forms", json=changes, headers=admin_headers)
        assert response.status_code == 200, response.get_json()
        return response.get_json()

    return put
