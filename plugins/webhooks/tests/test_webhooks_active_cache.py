"""The dispatcher keeps the active webhooks between wakes, until a webhook is written (``dispatcher.ACTIVE``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from trellis.testing.plugin import statements_run
from trellis_webhooks import dispatcher


@pytest.fixture()
def statements(committing_app) -> Iterator[list[str]]:
    with statements_run(committing_app.extensions["trellis"].engine) as seen:
        yield seen


def webhook_reads(statements: list[str]) -> int:
    """How many of ``statements`` read the webhooks table."""
    return sum(1 for statement in statements if "FROM webhooks" in statement)


def active_ids(app) -> list[str]:
    with app.app_context():
        return [hook.id for hook in dispatcher._active_hooks()]


def test_no_webhook_is_read_once_and_a_webhook_written_is_seen_at_once(committing_app, statements, admin_headers):
    client = committing_app.test_client()
    assert active_ids(committing_app) == []
    assert webhook_reads(statements) == 1
    for _ in range(3):  # the dispatcher's wakes: each event would have queried and rolled back
        with committing_app.app_context():
            assert dispatcher.one_pass(room=0).queued == 0
    assert webhook_reads(statements) == 1

    config = client.put("/admin/webhooks/config", json={"allowPrivateTargets": True}, headers=admin_headers)
    assert config.status_code == 200, config.get_json()
    made = client.post(
        "/admin/webhooks",
        json={"url": "http://127.0.0.1:9/hooks", "events": ["chat.message.create"]},
        headers=admin_headers,
    )
    assert made.status_code == 201, made.get_json()
    hook = made.get_json()["_id"]
    assert active_ids(committing_app) == [hook]
    assert active_ids(committing_app) == [hook]
    queried = webhook_reads(statements)

    paused = client.put(f"/admin/webhooks/{hook}", json={"active": False}, headers=admin_headers)
    assert paused.status_code == 200, paused.get_json()
    assert active_ids(committing_app) == []
    assert webhook_reads(statements) > queried  # read again after the write, not answered from the old list
    assert client.put(f"/admin/webhooks/{hook}", json={"active": True}, headers=admin_headers).status_code == 200
    assert active_ids(committing_app) == [hook]
    assert client.delete(f"/admin/webhooks/{hook}", headers=admin_headers).status_code in (200, 204)
    assert active_ids(committing_app) == []
