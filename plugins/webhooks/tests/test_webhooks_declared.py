"""A third-party module's declared events (``Module.events``) are subscribable by name."""

from __future__ import annotations

import time

import pytest

import trellis_webhooks
from trellis import EventTopic, Module, create_app, db, events
from trellis.http import Blueprint
from trellis.testing.plugin import wipe_data
from trellis_webhooks import dispatcher

bookmarks_blp = Blueprint("bookmarks", __name__, url_prefix="/bookmarks", description="a third-party module")


@bookmarks_blp.route("", methods=["POST"])
@bookmarks_blp.response(201)
def save_bookmark():
    events.record("bookmarks.bookmark.create", {"url": "https://example.org"})
    db.session.commit()
    return {"saved": True}


BOOKMARKS = Module(
    name="bookmarks",
    blueprints=(bookmarks_blp,),
    events=(EventTopic("bookmarks.bookmark.create", "A bookmark was saved"),),
)


@pytest.fixture()
def bookmarks_app(app, app_config):
    """Webhooks and the bookmarks module, committing to the test database (emptied before and after)."""
    wipe_data(app)
    made = create_app(app_config, modules=[trellis_webhooks.module, BOOKMARKS])
    try:
        yield made
    finally:
        made.extensions["trellis_events"].stop()
        wipe_data(app)


def test_a_modules_declared_event_is_subscribable_by_name_and_queued(bookmarks_app, admin_headers):
    client = bookmarks_app.test_client()
    config = client.put("/admin/webhooks/config", json={"allowPrivateTargets": True}, headers=admin_headers)
    assert config.status_code == 200, config.get_json()
    body = {"url": "http://127.0.0.1:9/hooks", "events": ["bookmarks.bookmark.create"]}
    made = client.post("/admin/webhooks", json=body, headers=admin_headers)
    assert made.status_code == 201, made.get_json()
    # An action the module does not declare is still a typo.
    typo = client.post("/admin/webhooks", json={**body, "events": ["bookmarks.bookmark.delete"]}, headers=admin_headers)
    assert typo.status_code == 400 and "matches no event" in typo.get_data(as_text=True)

    with bookmarks_app.app_context():
        before = events.latest()
    assert client.post("/bookmarks").status_code == 201
    with bookmarks_app.app_context():
        deadline = time.monotonic() + 10
        while events.latest() == before and time.monotonic() < deadline:  # numbered after the commit
            time.sleep(0.02)
        queued = dispatcher.one_pass(room=0).queued
        db.session.remove()
    assert queued == 1
    listed = client.get(f"/admin/webhooks/{made.get_json()['_id']}/deliveries", headers=admin_headers).get_json()
    assert [delivery["event"] for delivery in listed["deliveries"]] == ["bookmarks.bookmark.create"]
