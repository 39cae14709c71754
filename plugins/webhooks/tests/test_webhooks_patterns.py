"""Event patterns: `*` is exactly one segment; patterns that can match no event are reported."""

from __future__ import annotations

import pytest

from trellis_webhooks.patterns import matches, problem


@pytest.mark.parametrize(
    "pattern,topic,expected",
    [
        ("database.Item.create", "database.Item.create", True),
        ("database.*.create", "database.Item.create", True),
        ("database.*.*", "database.Item.delete", True),
        ("*.*.*", "chat.message.create", True),
        ("*.*.create", "authentication.user.block", False),
        ("database.Item.*", "database.Items.create", False),
        ("database.*", "database.Item.create", False),
        ("database.item.create", "database.Item.create", False),
    ],
)
def test_matches(pattern, topic, expected):
    assert matches(pattern, topic) is expected


@pytest.mark.parametrize(
    "pattern,ok",
    [
        ("database.Item.update", True),
        ("*.user.*", True),
        ("*.*.unblock", True),
        ("storage.*.delete", True),
        ("chat.message.delete", False),
        ("forms.submission.*", True),
        ("forms.form.create", False),
        ("mail.*.*", False),
        ("database.Item", False),
        ("database.It em.create", False),
        ("database.**.create", False),
    ],
)
def test_problem(app, pattern, ok):
    with app.app_context():  # the events are those the app's modules declare
        assert (problem(pattern) is None) is ok
