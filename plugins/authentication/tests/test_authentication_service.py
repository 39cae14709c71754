"""The service API other modules call (``trellis_authentication.service``): they never query its tables."""

from __future__ import annotations

from trellis_authentication.service import existing_user_ids


def test_existing_user_ids_keeps_the_ids_of_users_only(make_user, db):
    first, second = make_user(), make_user()
    assert existing_user_ids([first.id, "0" * 32, second.id, first.id]) == {first.id, second.id}
    assert existing_user_ids(["no-such-user"]) == set()
    assert existing_user_ids([]) == set()


def test_team_ids_of_gives_the_teams_and_their_ancestors_in_and_out_of_a_transaction(make_user, db):
    from trellis import db as database
    from trellis_authentication.service import team_ids_of
    from trellis_authentication.team_models import Team, TeamMember

    member, outsider = make_user(), make_user()
    root, middle, leaf, other = (Team(id=f"{name:0>32}", name=name) for name in ("root", "middle", "leaf", "other"))
    middle.parent_id, leaf.parent_id = root.id, middle.id
    database.session.add_all([root, middle, leaf, other])
    database.session.flush()
    database.session.add_all(
        [
            TeamMember(team_id=leaf.id, user_id=member.id, role="member"),
            TeamMember(team_id=other.id, user_id=member.id, role="owner"),
        ]
    )
    database.session.flush()
    assert database.session().in_transaction()
    assert team_ids_of(member.id) == sorted([root.id, middle.id, leaf.id, other.id])  # the session's own writes
    database.session.commit()
    assert not database.session().in_transaction()
    assert team_ids_of(member.id) == sorted([root.id, middle.id, leaf.id, other.id])  # the read connection
    assert team_ids_of(outsider.id) == []


def test_team_ids_of_makes_no_session_for_a_request_that_has_none(app, make_user, db):
    """Every access-controlled request asks; one that wrote nothing must not pay for making (and then
    removing) a SQLAlchemy session only to learn that it changed no team (~7% of a user's get, py-spy)."""
    from trellis import db as database
    from trellis_authentication.service import team_ids_of

    user = make_user()
    with app.app_context(), app.test_request_context("/"):  # a scope of its own
        assert team_ids_of(user.id) == []  # read (in tests, through the test's session) and remembered
        database.session.remove()
        assert team_ids_of(user.id) == []  # from memory
        assert not database.session.registry.has()
