"""authentication_0002 on a database with users and sessions: nothing is lost (SQLite rebuilds auth_users,
and dropping the old table would otherwise cascade to the sessions)."""

from sqlalchemy import text

from trellis import create_app
from trellis.migrate import downgrade, upgrade

ROWS = (
    "INSERT INTO auth_users (id, email, password_hash, is_active, is_verified, extra, created_at, updated_at) "
    "VALUES ('u1', 'a@example.com', 'h', true, false, '{}', '2026-01-01 00:00:00', '2026-01-01 00:00:00')",
    "INSERT INTO auth_sessions (id, user_id, refresh_hash, revoked, created_at, expires_at) "
    "VALUES ('s1', 'u1', 'r1', false, '2026-01-01 00:00:00', '2030-01-01 00:00:00')",
    "INSERT INTO auth_rotated_tokens (token_hash, session_id, rotated_at) VALUES ('t1', 's1', '2026-01-01 00:00:00')",
)


def test_lifecycle_migration_keeps_users_and_sessions(app_config, empty_database_url):
    app = create_app({**app_config, "DATABASE_URL": empty_database_url})
    engine = app.extensions["trellis"].engine
    try:
        upgrade(app)
        downgrade(app, "authentication_0001")
        with engine.begin() as conn:
            for statement in ROWS:
                conn.execute(text(statement))
        upgrade(app)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM auth_sessions")).scalar() == 1
            assert conn.execute(text("SELECT count(*) FROM auth_rotated_tokens")).scalar() == 1
            user = conn.execute(text("SELECT email, phone_number, two_fa_enabled FROM auth_users")).one()
            assert (user.email, user.phone_number, bool(user.two_fa_enabled)) == ("a@example.com", None, False)
        downgrade(app, "authentication_0001")  # and back, with the sessions still there
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM auth_sessions")).scalar() == 1
    finally:
        engine.dispose()


TEAM_ROWS = (
    "INSERT INTO auth_users (id, email, password_hash, is_active, is_verified, extra, created_at, updated_at) "
    "VALUES ('u2', 'b@example.com', 'h', true, false, '{}', '2026-01-01 00:00:00', '2026-01-01 00:00:00')",
    "INSERT INTO auth_teams (id, name, parent_id, created_at, updated_at) "
    "VALUES ('t1', 'Sales', NULL, '2026-01-01 00:00:00', '2026-01-01 00:00:00')",
    "INSERT INTO auth_teams (id, name, parent_id, created_at, updated_at) "
    "VALUES ('t2', 'EMEA', 't1', '2026-01-01 00:00:00', '2026-01-01 00:00:00')",
    "INSERT INTO auth_team_members (team_id, user_id, role, created_at) "
    "VALUES ('t1', 'u2', 'owner', '2026-01-02 00:00:00'), ('t1', 'u1', 'owner', '2026-01-01 00:00:00'), "
    "('t2', 'u2', 'member', '2026-01-01 00:00:00')",
)


def test_team_creator_migration_keeps_teams_and_scopes_root_names_per_creator(app_config, empty_database_url):
    app = create_app({**app_config, "DATABASE_URL": empty_database_url})
    engine = app.extensions["trellis"].engine
    try:
        upgrade(app, "authentication_0005")
        with engine.begin() as conn:
            for statement in (*ROWS[:1], *TEAM_ROWS):
                conn.execute(text(statement))
        upgrade(app)
        with engine.begin() as conn:
            creators = dict(conn.execute(text("SELECT id, created_by FROM auth_teams")).all())
            assert creators == {"t1": "u1", "t2": None}  # the longest-standing owner; t2 had none
            assert conn.execute(text("SELECT count(*) FROM auth_team_members")).scalar() == 3
            conn.execute(  # another creator's root team of the same name
                text(
                    "INSERT INTO auth_teams (id, name, parent_id, created_by, created_at, updated_at) "
                    "VALUES ('t3', 'Sales', NULL, 'u2', '2026-01-03 00:00:00', '2026-01-03 00:00:00')"
                )
            )
            conn.execute(text("DELETE FROM auth_teams WHERE id = 't3'"))
        downgrade(app, "authentication_0005")  # and back, nothing lost
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM auth_teams")).scalar() == 2
            assert conn.execute(text("SELECT count(*) FROM auth_team_members")).scalar() == 3
    finally:
        engine.dispose()
