"""One attempt, as ping and manual retry make it in the request: outcomes, the log, the retry schedule, metrics."""

from __future__ import annotations

import threading
import time

import pytest


@pytest.fixture()
def hook(allow_private, receiver, make_webhook):
    return make_webhook(receiver.url)


def ping(client, admin_headers, webhook):
    response = client.post(f"/admin/webhooks/{webhook['_id']}/ping", headers=admin_headers)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def retry(client, admin_headers, webhook, delivery):
    path = f"/admin/webhooks/{webhook['_id']}/deliveries/{delivery['_id']}/retry"
    response = client.post(path, headers=admin_headers)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def test_ping_delivered_is_logged(client, admin_headers, hook):
    delivery = ping(client, admin_headers, hook)
    assert delivery["status"] == "delivered" and delivery["attempts"] == 1
    assert (delivery["responseStatus"], delivery["lastError"], delivery["nextAttemptAt"]) == (200, None, None)
    assert delivery["deliveredAt"] >= delivery["createdAt"] and delivery["event"] == "ping"
    log = client.get(f"/admin/webhooks/{hook['_id']}/deliveries", headers=admin_headers).get_json()
    assert log == {"deliveries": [delivery], "count": 1}


def test_a_500_is_retried_on_the_schedule_and_a_manual_retry_delivers(client, admin_headers, hook, receiver):
    receiver.statuses = [500]
    receiver.answer_body = b'{"error": "database on fire"}'
    before = time.time()
    failed = ping(client, admin_headers, hook)
    assert (failed["status"], failed["attempts"], failed["responseStatus"]) == ("pending", 1, 500)
    assert failed["lastError"] == 'Answered 500: {"error": "database on fire"}'
    # The first retry is due about 10 s later (±10 %).
    due = time.mktime(time.strptime(failed["nextAttemptAt"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
    assert before + 8 <= due <= time.time() + 12
    delivered = retry(client, admin_headers, hook, failed)
    assert (delivered["status"], delivered["attempts"], delivered["responseStatus"]) == ("delivered", 2, 200)
    assert delivered["lastError"] is None and delivered["_id"] == failed["_id"]
    assert len(receiver.wait_for(2)) == 2


def test_failed_after_the_sixth_attempt(client, admin_headers, hook, receiver):
    receiver.default_status = 503
    delivery = ping(client, admin_headers, hook)
    for attempts in range(2, 7):
        assert delivery["status"] == "pending"
        delivery = retry(client, admin_headers, hook, delivery)
        assert delivery["attempts"] == attempts
    assert delivery["status"] == "failed" and delivery["nextAttemptAt"] is None
    assert delivery["lastError"].startswith("Answered 503")
    # A failed delivery can still be retried by hand: one more attempt.
    receiver.default_status = 204
    again = retry(client, admin_headers, hook, delivery)
    assert (again["status"], again["attempts"], again["responseStatus"]) == ("delivered", 7, 204)
    failed = client.get(f"/admin/webhooks/{hook['_id']}/deliveries?status=failed", headers=admin_headers)
    assert failed.get_json()["count"] == 0


def test_redirects_are_not_followed(client, admin_headers, hook, receiver):
    receiver.statuses = [302]
    delivery = ping(client, admin_headers, hook)
    assert delivery["status"] == "pending" and delivery["responseStatus"] == 302
    assert "redirects are not followed" in delivery["lastError"]
    assert len(receiver.wait_for(1)) == 1


def test_an_answer_body_is_read_up_to_the_cap(client, admin_headers, hook, receiver):
    receiver.default_status = 400
    receiver.answer_body = b"x" * (1024 * 1024)
    delivery = ping(client, admin_headers, hook)
    assert delivery["responseStatus"] == 400 and len(delivery["lastError"]) < 400


def test_an_unreachable_target_is_an_error_not_a_500(client, admin_headers, allow_private, make_webhook):
    from trellis.testing.plugin import free_port

    webhook = make_webhook(f"http://127.0.0.1:{free_port()}/nobody-listens")
    delivery = ping(client, admin_headers, webhook)
    assert delivery["status"] == "pending" and delivery["responseStatus"] is None
    assert delivery["lastError"].startswith("Cannot reach the target")


def test_log_filters_and_pages(client, admin_headers, hook, receiver):
    receiver.statuses = [500]
    first = ping(client, admin_headers, hook)
    second = ping(client, admin_headers, hook)
    path = f"/admin/webhooks/{hook['_id']}/deliveries"
    assert client.get(path + "?status=pending", headers=admin_headers).get_json()["deliveries"] == [first]
    newest = client.get(path + "?limit=1", headers=admin_headers).get_json()
    assert newest["count"] == 2 and newest["deliveries"][0]["_id"] == second["_id"]
    assert client.get(path + "?event=ping", headers=admin_headers).get_json()["count"] == 2
    assert client.get(path + "?status=lost", headers=admin_headers).status_code == 400
    other = f"/admin/webhooks/{hook['_id']}/deliveries/{'0' * 32}/retry"
    assert client.post(other, headers=admin_headers).status_code == 404


def test_deleting_a_webhook_deletes_its_log(client, admin_headers, hook):
    ping(client, admin_headers, hook)
    assert client.delete(f"/admin/webhooks/{hook['_id']}", headers=admin_headers).status_code == 200
    assert client.get(f"/admin/webhooks/{hook['_id']}/deliveries", headers=admin_headers).status_code == 404


def test_deliveries_are_counted_in_metrics(client, admin_headers, hook, receiver):
    def count(status: str) -> float:
        text = client.get("/metrics", headers=admin_headers).get_data(as_text=True)
        line = f'trellis_webhook_deliveries_total{{status="{status}"}} '
        return next((float(row[len(line) :]) for row in text.splitlines() if row.startswith(line)), 0.0)

    before = {status: count(status) for status in ("delivered", "retrying")}
    receiver.statuses = [500]
    ping(client, admin_headers, hook)
    ping(client, admin_headers, hook)
    assert count("retrying") == before["retrying"] + 1
    assert count("delivered") == before["delivered"] + 1


def test_a_claim_whose_lease_ran_short_in_the_queue_is_given_back_unsent(app, db, hook, receiver):
    """Claims wait behind the senders; one that would start too late to finish within its lease (another
    worker would then send it too) is released: due again at once, its attempt not counted."""
    from trellis import db as trellis_db
    from trellis_webhooks import deliveries
    from trellis_webhooks.models import PENDING, WebhookDelivery
    from trellis_webhooks.worker import Worker

    add_due_deliveries(hook, [None])
    worker = Worker(app, deliveries.runtime_of(app))

    def claim_and_send(send_by: float) -> WebhookDelivery:
        (claimed,) = deliveries.claim_due(5)
        worker._in_flight += 1
        worker._to_send.put((claimed, True, send_by))
        worker._send_next()
        worker._record_once()
        trellis_db.session.expire_all()
        return trellis_db.session.get(WebhookDelivery, claimed.id)

    released = claim_and_send(time.monotonic() - 1)  # its time to start has passed
    assert receiver.received == []
    assert (released.status, released.attempts, released.claim) == (PENDING, 0, None)
    assert released.next_attempt_at <= trellis_db.utcnow() and worker._in_flight == 0

    sent = claim_and_send(time.monotonic() + 60)
    assert len(receiver.received) == 1
    assert (sent.status, sent.attempts, sent.claim) == ("delivered", 1, None)


def test_a_claim_takes_no_more_than_its_limit(app, db, hook):
    """The claim's pick (``LIMIT`` with ``SKIP LOCKED``) runs once: a plan that rescanned it per updated row
    claimed every due delivery (52 for a limit of 17), more than the senders had room for."""
    from trellis_webhooks import deliveries

    add_due_deliveries(hook, range(1, 53))
    first = deliveries.claim_due(17)
    second = deliveries.claim_due(100)
    assert len(first) == 17 and len(second) == 35
    assert not {c.id for c in first} & {c.id for c in second}
    assert deliveries.claim_due(100) == []


def test_room_given_back_wakes_the_claimer_while_deliveries_wait(app):
    """A dispatcher's pass reserves all free room; when it gives the room back unused while deliveries wait
    (a backlog) and no sender is busy, nobody else would wake the claimer: a burst waited a whole poll."""
    from trellis_webhooks import deliveries
    from trellis_webhooks.worker import Worker

    worker = Worker(app, deliveries.runtime_of(app))
    worker._backlog = True
    room = worker._reserve()
    assert room == worker.settings.claim_ahead and worker._reserve(at_least=1) == 0
    worker.delivery_wanted.clear()
    worker._give_back(room)
    assert worker.delivery_wanted.is_set() and worker._in_flight == 0

    worker._backlog = False  # nothing waiting: freeing room wakes nobody
    worker.delivery_wanted.clear()
    worker._give_back(worker._reserve())
    assert not worker.delivery_wanted.is_set()


def add_due_deliveries(hook, event_ids) -> None:
    """Pending deliveries of ``hook``, due now, one per event id (None: a ping's)."""
    from trellis import db as trellis_db
    from trellis_webhooks.models import PENDING, WebhookDelivery

    now = trellis_db.utcnow()
    for event_id in event_ids:
        trellis_db.session.add(
            WebhookDelivery(
                id=trellis_db.new_id(),
                webhook_id=hook["_id"],
                event_id=event_id,
                event="ping",
                body="{}",
                status=PENDING,
                attempts=0,
                next_attempt_at=now,
                created_at=now,
            )
        )
    trellis_db.session.commit()


def test_a_webhook_deleted_while_its_ping_is_sent_answers_404(
    app, client, admin_headers, allow_private, make_receiver, make_webhook
):
    """The delivery goes with its webhook: the ping's answer, read after the attempt, is a 404, not a 500."""
    receiver = make_receiver()
    receiver.hold = threading.Event()  # the attempt waits in the receiver until released
    webhook = make_webhook(receiver.url)
    answers = []

    def ping_now() -> None:
        answers.append(app.test_client().post(f"/admin/webhooks/{webhook['_id']}/ping", headers=admin_headers))

    pinging = threading.Thread(target=ping_now)
    pinging.start()
    try:
        receiver.wait_for(1)
        deleted = client.delete(f"/admin/webhooks/{webhook['_id']}", headers=admin_headers)
        assert deleted.status_code == 200, deleted.get_json()
    finally:
        receiver.hold.set()
        pinging.join(30)
    assert answers[0].status_code == 404, answers[0].get_json()
    assert "deleted" in answers[0].get_json()["message"]
