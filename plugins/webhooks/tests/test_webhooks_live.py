"""Deliveries of real events by real server processes (eventlet, the background workers of ``trellis.server.serve``).

The servers share the test database; events come from the Authentication module (users created over HTTP).
Retry delays are shortened through ``TRELLIS_WEBHOOKS_RETRY_SECONDS``, as the README documents.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests

from trellis.testing.plugin import TEST_MASTER_KEY
from trellis.testing.waiting import wait_until

ADMIN = {"masterkey": TEST_MASTER_KEY}
FAST = {
    "TRELLIS_WEBHOOKS_RETRY_SECONDS": "0.3,0.3,0.3,0.3,0.3",
    "TRELLIS_WEBHOOKS_POLL_SECONDS": "0.2",
}


def call(method: str, url: str, **kwargs: Any) -> Any:
    response = requests.request(method, url, headers=ADMIN, timeout=30, **kwargs)
    assert response.status_code in (200, 201), (method, url, response.status_code, response.text)
    return response.json()


def set_up(server: Any, url: str, events: list[str] | None = None) -> dict[str, Any]:
    call("PUT", f"{server.url}/admin/webhooks/config", json={"allowPrivateTargets": True})
    return call(
        "POST", f"{server.url}/admin/webhooks", json={"url": url, "events": events or ["authentication.user.*"]}
    )


def new_user(server: Any, n: int | str) -> dict[str, Any]:
    body = {"email": f"hook-{n}@example.com", "password": "password1"}
    return call("POST", f"{server.url}/authentication/users", json=body)


def deliveries(server: Any, webhook: dict[str, Any], **params: Any) -> dict[str, Any]:
    return call("GET", f"{server.url}/admin/webhooks/{webhook['_id']}/deliveries", params={"limit": 1000, **params})


def delivered_count(server: Any) -> float:
    text = requests.get(f"{server.url}/metrics", headers=ADMIN, timeout=30).text
    line = 'trellis_webhook_deliveries_total{status="delivered"} '
    return next((float(row[len(line) :]) for row in text.splitlines() if row.startswith(line)), 0.0)


def test_an_event_is_delivered_signed_and_retried_after_a_500(live_server_factory, make_receiver, readme_receiver):
    server = live_server_factory(**FAST)
    flaky, down = make_receiver(), make_receiver()
    flaky.statuses = [500]
    down.default_status = 500
    webhook = set_up(server, flaky.url)
    doomed = set_up(server, down.url, ["authentication.user.create"])
    other = set_up(server, flaky.url.replace("/hooks", "/other"), ["chat.message.create"])
    user = new_user(server, "one")

    first, second = flaky.wait_for(2)
    assert first.body == second.body and first.headers["Trellis-Delivery"] == second.headers["Trellis-Delivery"]
    sent = second.json
    assert (sent["event"], sent["data"]) == ("authentication.user.create", {"user": user})
    assert isinstance(sent["id"], int) and sent["createdAt"].endswith("Z")
    assert second.headers["Trellis-Event"] == "authentication.user.create"
    assert readme_receiver["verify"](webhook["secret"], second.headers["Trellis-Signature"], second.body)
    # The outcome is recorded after the receiver answered (in a batch): wait for it.
    (logged,) = wait_until(
        lambda: deliveries(server, webhook, status="delivered")["deliveries"], "a delivered delivery", 30
    )
    assert (logged["status"], logged["attempts"], logged["eventId"]) == ("delivered", 2, sent["id"])
    assert logged["_id"] == second.headers["Trellis-Delivery"]

    # Six attempts (the first and five retries), then failed, and nothing more.
    assert len(down.wait_for(6)) == 6
    failed = wait_until(lambda: deliveries(server, doomed, status="failed")["deliveries"], "a failed delivery", 30)
    assert failed[0]["attempts"] == 6 and failed[0]["lastError"] == "Answered 500: ok"
    assert len(down.received) == 6
    assert deliveries(server, other)["count"] == 0, "a pattern that does not match queues nothing"


def test_two_processes_deliver_a_burst_of_200_events_once_each(live_server_factory, receiver):
    slow_poll = {**FAST, "TRELLIS_WEBHOOKS_SENDERS": "2"}
    servers = [live_server_factory(**slow_poll), live_server_factory(**slow_poll)]
    receiver.delay = 0.01  # a real receiver takes some time: both processes' workers get a share
    webhook = set_up(servers[0], receiver.url, ["authentication.user.create"])
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: new_user(servers[n % 2], f"burst-{n}"), range(200)))

    got = receiver.wait_for(200, timeout=120)
    time.sleep(2.0)  # time for a duplicate to show up, if there were one
    got = receiver.received
    ids = sorted(r.json["id"] for r in got)
    assert len(got) == 200 and len({r.headers["Trellis-Delivery"] for r in got}) == 200
    assert ids == list(range(ids[0], ids[0] + 200)), "every event once, none lost"
    logged = deliveries(servers[1], webhook, status="delivered")
    assert logged["count"] == 200 and {d["attempts"] for d in logged["deliveries"]} == {1}
    shares = [delivered_count(server) for server in servers]
    assert sum(shares) == 200 and all(shares), shares


def test_a_delivery_in_flight_when_its_worker_dies_is_sent_after_a_restart(live_server_factory, receiver):
    lease = {**FAST, "TRELLIS_WEBHOOKS_LEASE_SECONDS": "2"}
    first = live_server_factory(**lease)
    receiver.hold = threading.Event()
    webhook = set_up(first, receiver.url, ["authentication.user.create"])
    new_user(first, "killed")
    (in_flight,) = receiver.wait_for(1)
    first.process.kill()  # SIGKILL while the receiver has the request and no answer went back
    first.process.wait(10)
    receiver.hold.set()

    second = live_server_factory(**lease)
    _, again = receiver.wait_for(2, timeout=60)
    assert again.body == in_flight.body and again.headers["Trellis-Delivery"] == in_flight.headers["Trellis-Delivery"]
    (logged,) = wait_until(
        lambda: deliveries(second, webhook, status="delivered")["deliveries"], "a delivered delivery", 30
    )
    assert logged["attempts"] == 2


def test_a_reactivated_webhook_gets_no_events_of_its_inactive_time(live_server_factory, receiver):
    server = live_server_factory(**FAST)
    webhook = set_up(server, receiver.url, ["authentication.user.create"])
    new_user(server, "before")
    assert receiver.wait_for(1)[0].json["data"]["user"]["email"] == "hook-before@example.com"
    call("PUT", f"{server.url}/admin/webhooks/{webhook['_id']}", json={"active": False})
    new_user(server, "while-inactive")
    time.sleep(0.5)  # the dispatcher's passes
    call("PUT", f"{server.url}/admin/webhooks/{webhook['_id']}", json={"active": True})
    new_user(server, "after")
    receiver.wait_for(2)
    time.sleep(1.0)  # time for the inactive time's event to show up, if it were queued
    emails = [r.json["data"]["user"]["email"] for r in receiver.received]
    assert emails == ["hook-before@example.com", "hook-after@example.com"]
    assert deliveries(server, webhook)["count"] == 2
