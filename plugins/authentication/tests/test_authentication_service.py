"""The service API other modules call (``trellis_authentication.service``): they never query its tables."""

from __future__ import annotations

from trellis_authentication.service import existing_user_ids


def test_existing_user_ids_keeps_the_ids_of_users_only(make_user, db):
    first, second = make_user(), make_user()
    assert existing_user_ids([first.id, "0" * 32, second.id, first.id]) == {first.id, second.id}
    assert existing_user_ids(["no-such-user"]) == set()
    assert existing_user_ids([]) == set()
