"""Two real server processes on one database: a grant, a revoke and a definition change made through one
are in force on the other for its very next request (lists, exact counts, get, check), with and without
Redis sharing the count cache and the generation stamps."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from trellis.testing.plugin import TEST_MASTER_KEY, reachable_redis
from trellis_authentication.testing import create_user_over_http

pytestmark = pytest.mark.live

REDIS = "redis://127.0.0.1:6379/11"
ADMIN = {"masterkey": TEST_MASTER_KEY}
OWNERS_ONLY = {"read": ["owner"], "edit": ["editor", "owner"], "delete": ["owner"], "share": ["owner"]}
DEFAULT_READ = {**OWNERS_ONLY, "read": ["reader", "editor", "owner"]}


def call(server: Any, method: str, path: str, headers: dict[str, str], expect: int = 200, **kwargs: Any) -> Any:
    response = requests.request(method, server.url + path, headers=headers, timeout=30, **kwargs)
    assert response.status_code == expect, (method, path, response.status_code, response.text)
    return response.json()


@pytest.mark.parametrize("redis", [False, True], ids=["database", "redis"])
def test_changes_on_one_process_are_in_force_on_the_other(live_server_factory, redis):
    env = {"TRELLIS_REDIS_URL": reachable_redis(REDIS)} if redis else {}
    writer, reader = live_server_factory(**env), live_server_factory(**env)
    options = {"conduit": {"authorization": {"enabled": True}}}
    body = {"name": "Memo", "fields": {"text": "String"}, "modelOptions": options}
    call(writer, "POST", "/admin/database/schemas", ADMIN, 201, json=body)
    alice, bob = create_user_over_http(writer.url), create_user_over_http(writer.url)
    memo = call(writer, "POST", "/database/Memo", alice.headers, 201, json={"text": "m"})["_id"]

    def bob_sees() -> tuple[int, int, bool]:
        """What bob's next requests to the other process answer: list count, get status, check."""
        count = call(reader, "GET", "/database/Memo?limit=1", bob.headers)["count"]
        got = requests.get(f"{reader.url}/database/Memo/{memo}", headers=bob.headers, timeout=30).status_code
        query = {"action": "read", "resource": f"Memo:{memo}"}
        return count, got, call(reader, "GET", "/authorization/check", bob.headers, params=query)["allowed"]

    assert bob_sees() == (0, 404, False)  # also fills the reader's caches
    grant = {"subject": f"User:{bob.id}", "relation": "reader", "resource": f"Memo:{memo}"}
    relation = call(writer, "POST", "/admin/authorization/relations", ADMIN, 201, json=grant)
    assert bob_sees() == (1, 200, True)
    call(writer, "PATCH", "/admin/authorization/resources/Memo", ADMIN, json={"permissions": OWNERS_ONLY})
    assert bob_sees() == (0, 404, False)
    call(writer, "PATCH", "/admin/authorization/resources/Memo", ADMIN, json={"permissions": DEFAULT_READ})
    assert bob_sees() == (1, 200, True)
    call(writer, "DELETE", f"/admin/authorization/relations/{relation['_id']}", ADMIN)
    assert bob_sees() == (0, 404, False)
    entries = call(reader, "GET", "/admin/audit?module=authorization", ADMIN)["entries"]
    assert [e["action"] for e in entries] == [
        "relation.revoke",
        "resource.update",
        "resource.update",
        "relation.grant",
    ]
