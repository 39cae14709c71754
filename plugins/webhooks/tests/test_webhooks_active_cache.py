"""The dispatcher keeps the active webhooks between wakes, until a webhook is written (``dispatcher.ACTIVE``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import event

from trellis_webhooks import dispatcher


@pytest.fixture()
def webhook_queries(committing_app) -> Iterator[list[str]]:
    """The statements that read the webhooks table, as the app's engine runs them."""
    seen: list[str] = []
    engine = committing_app.extensions["trellis"].engine

    def record(_conn, _cursor, statement, *_args) -> None:
        if "FROM webhooks" in statement:
            seen.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    yield seen
    event.remove(engine, "before_cursor_execute", record)


def active_ids(app) -> list[str]:
    with app.app_context():
        return [hook.id for hook in dispatcher._active_hooks()]


def test_no_webhook_is_read_once_and_a_webhook_written_is_seen_at_once(committing_app, webhook_queries, admin_headers):
    client = committing_app.test_client()
    assert active_ids(committing_app) == []
    assert len(webhook_queries) == 1
    for _ in range(3):  # the dispatcher's wakes: each event would have queried and rolled back
        with committing_app.app_context():
            assert dispatcher.one_pass(room=0).queued == 0
    assert len(webhook_queries) == 1

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
    queried = len(webhook_queries)

    paused = client.put(f"/admin/webhooks/{hook}", json={"active": False}, headers=admin_headers)
    assert paused.status_code == 200, paused.get_json()
    assert active_ids(committing_app) == []
    assert len(webhook_queries) > queried  # read again after the write, not answered from the old list
    assert client.put(f"/admin/webhooks/{hook}", json={"active": True}, headers=admin_headers).status_code == 200
    assert active_ids(committing_app) == [hook]
    assert client.delete(f"/admin/webhooks/{hook}", headers=admin_headers).status_code in (200, 204)
    assert active_ids(committing_app) == []
