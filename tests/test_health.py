"""GET /health: 200 with the database up, 503 naming the failing dependency otherwise."""

from trellis import create_app


def test_health_ok(client):
    response = client.get("/health")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ok", "database": "ok"}


def test_health_reports_redis_when_configured(app_config, db):
    app = create_app({**app_config, "REDIS_URL": "redis://127.0.0.1:6379/15"}, modules=[])
    assert app.test_client().get("/health").get_json() == {"status": "ok", "database": "ok", "redis": "ok"}


def test_health_503_when_the_database_is_down(app_config, tmp_path):
    app = create_app({**app_config, "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/nothing"}, modules=[])
    response = app.test_client().get("/health")
    assert response.status_code == 503
    assert response.get_json() == {"status": "unavailable", "database": "unavailable"}


def test_health_503_when_redis_is_down(app_config, db):
    app = create_app({**app_config, "REDIS_URL": "redis://127.0.0.1:1/0"}, modules=[])
    response = app.test_client().get("/health")
    assert response.status_code == 503
    assert response.get_json()["redis"] == "unavailable"
