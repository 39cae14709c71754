"""GET /metrics: Prometheus text (parsed with prometheus_client.parser), per app, one target per process."""

from __future__ import annotations

import time
import uuid

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from trellis import create_app

METRICS_TOKEN = "scrape-token-for-tests"


def scrape(text: str) -> dict[str, list]:
    """Family name → samples."""
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def metrics_of(client, headers) -> dict[str, list]:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return scrape(response.get_data(as_text=True))


def value(samples: list, name: str, **labels: str) -> float:
    found = [s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    return sum(found)


@pytest.fixture()
def fresh_app(app_config, app):
    """An app of its own (its own registry), on the session's migrated database."""
    return create_app({**app_config, "METRICS_TOKEN": METRICS_TOKEN})


@pytest.fixture()
def fresh_client(fresh_app, db):
    return fresh_app.test_client()


def test_requests_are_counted_by_url_rule_never_by_raw_path(fresh_client, admin_headers):
    file_id = uuid.uuid4().hex
    for _ in range(3):
        assert fresh_client.get("/health").status_code == 200
    assert fresh_client.get(f"/storage/file/{file_id}", headers=admin_headers).status_code == 404
    assert fresh_client.get(f"/no/such/{file_id}").status_code == 404
    assert fresh_client.delete("/health").status_code == 405
    found = metrics_of(fresh_client, admin_headers)

    total = found["trellis_http_requests"]
    assert value(total, "trellis_http_requests_total", method="GET", route="/health", status="200") == 3
    rule = "/storage/file/<string:fileId>"
    assert value(total, "trellis_http_requests_total", method="GET", route=rule, status="404") == 1
    assert value(total, "trellis_http_requests_total", method="GET", route="unmatched", status="404") == 1
    assert value(total, "trellis_http_requests_total", method="DELETE", route="unmatched", status="405") == 1
    histogram = found["trellis_http_request_duration_seconds"]
    assert value(histogram, "trellis_http_request_duration_seconds_count", method="GET", route="/health") == 3
    assert (
        value(histogram, "trellis_http_request_duration_seconds_bucket", method="GET", route="/health", le="+Inf") == 3
    )
    assert 0 < value(histogram, "trellis_http_request_duration_seconds_sum", method="GET", route="/health") < 30
    every_label = {v for samples in found.values() for s in samples for v in s.labels.values()}
    assert not any(file_id in label for label in every_label), "a raw id became a label"
    assert set(s.labels["method"] for s in total) <= {
        "GET",
        "HEAD",
        "POST",
        "PUT",
        "PATCH",
        "DELETE",
        "OPTIONS",
        "other",
    }
    assert "trellis_db_pool_checked_out" in found
    assert "trellis_socketio_connections" in found
    assert value(found["trellis_socketio_connections"], "trellis_socketio_connections", namespace="/chat/") == 0


def test_each_app_has_its_own_registry(fresh_client, client, admin_headers):
    before = value(
        metrics_of(client, admin_headers)["trellis_http_requests"], "trellis_http_requests_total", route="/health"
    )
    for _ in range(5):
        fresh_client.get("/health")
    after = value(
        metrics_of(client, admin_headers)["trellis_http_requests"], "trellis_http_requests_total", route="/health"
    )
    assert after == before, "requests to another app were counted here"
    assert (
        value(
            metrics_of(fresh_client, admin_headers)["trellis_http_requests"],
            "trellis_http_requests_total",
            route="/health",
        )
        == 5
    )


def test_metrics_needs_admin_credentials_or_the_metrics_token(fresh_client, admin_headers, admin_token, make_user):
    assert fresh_client.get("/metrics").status_code == 401
    assert fresh_client.get("/metrics", headers={"Authorization": "Bearer wrong-token"}).status_code == 401
    assert fresh_client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}).status_code == 200
    assert fresh_client.get("/metrics", headers={"Authorization": f"Bearer {admin_token}"}).status_code == 200
    user = make_user()
    assert fresh_client.get("/metrics", headers=user.headers).status_code == 403
    assert fresh_client.get("/metrics", headers={"masterkey": "wrong"}).status_code == 401


def test_the_token_is_not_accepted_when_none_is_configured(client):
    assert client.get("/metrics", headers={"Authorization": "Bearer "}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer None"}).status_code == 401


def test_module_counters_count_sends_by_provider_and_status(fresh_client, admin_headers):
    body = {"to": "ada@example.com", "subject": "Hi", "body": "<p>Hello</p>"}
    for _ in range(2):
        assert fresh_client.post("/email/send", json=body, headers=admin_headers).status_code == 200
    sms = {"to": "+15005550006", "message": "hello"}
    assert fresh_client.post("/sms/send", json=sms, headers=admin_headers).status_code == 200
    found = metrics_of(fresh_client, admin_headers)
    assert value(found["trellis_email_sent"], "trellis_email_sent_total", provider="outbox", status="sent") == 2
    assert value(found["trellis_sms_sent"], "trellis_sms_sent_total", provider="outbox") == 1


def test_module_counter_labels_are_fixed_once_declared(app, db):
    from trellis.metrics import counter

    with app.app_context():
        counter("trellis_test_things_total", "things", ("kind",)).labels("a").inc()
        with pytest.raises(ValueError):
            counter("trellis_test_things_total", "things", ("kind", "colour"))


def test_metrics_can_be_switched_off(app_config, app, db, admin_headers):
    quiet = create_app({**app_config, "METRICS": False})
    client = quiet.test_client()
    client.get("/health")
    assert client.get("/metrics", headers=admin_headers).status_code == 404
    body, _type = quiet.extensions["trellis"].metrics.exposition()
    assert value(scrape(body.decode())["trellis_http_requests"], "trellis_http_requests_total") == 0


@pytest.mark.live
def test_each_process_is_scraped_on_its_own_port(live_server_factory, make_user):
    """Several processes: one target each. Counts and sockets are per process, never mixed."""
    import socketio

    one = live_server_factory(TRELLIS_METRICS_TOKEN=METRICS_TOKEN)
    two = live_server_factory(TRELLIS_METRICS_TOKEN=METRICS_TOKEN)
    bearer = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    health = {"method": "GET", "route": "/health", "status": "200"}

    def scrape_live(server) -> dict[str, list]:
        response = requests.get(server.url + "/metrics", headers=bearer, timeout=5)
        assert response.status_code == 200
        return scrape(response.text)

    # wait_ready polled /health too, more than once if an answer came after its 1 s timeout (a loaded
    # machine): count from here.
    ones_before, twos_before = (
        value(scrape_live(server)["trellis_http_requests"], "trellis_http_requests_total", **health)
        for server in (one, two)
    )
    for _ in range(4):
        assert requests.get(one.url + "/health", timeout=5).status_code == 200
    assert requests.get(two.url + "/health", timeout=5).status_code == 200

    from trellis_authentication.testing import create_user_over_http

    user = create_user_over_http(one.url)
    sock = socketio.Client(reconnection=False)
    sock.connect(
        one.url,
        socketio_path="realtime",
        namespaces=["/chat/"],
        transports=["websocket"],
        auth={"token": user.access_token},
        wait_timeout=10,
    )
    try:
        deadline = time.monotonic() + 10
        while True:  # the server counts the socket once its connect handler has run
            first = scrape_live(one)
            if value(first["trellis_socketio_connections"], "trellis_socketio_connections", namespace="/chat/") == 1:
                break
            assert time.monotonic() < deadline, "the connected socket never showed in the gauge"
            time.sleep(0.1)
        second = scrape_live(two)
        ones = value(first["trellis_http_requests"], "trellis_http_requests_total", **health)
        twos = value(second["trellis_http_requests"], "trellis_http_requests_total", **health)
        assert (ones - ones_before, twos - twos_before) == (4, 1)
        assert value(second["trellis_socketio_connections"], "trellis_socketio_connections", namespace="/chat/") == 0
        assert value(first["trellis_http_requests"], "trellis_http_requests_total", route="/realtime/") == 0
        assert first["trellis_db_pool_checked_out"][0].value >= 0
    finally:
        sock.disconnect()
