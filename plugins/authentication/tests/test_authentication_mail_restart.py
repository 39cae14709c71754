"""Forgot-password while PostgreSQL restarts (a throwaway cluster of its own): every 200 answer gets its
mail. The Email module's senders run in this process (threads, as in a server) and send through a real
SMTP server (aiosmtpd); requests go through the app's WSGI interface and are closed as a server does."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from flask import Flask

from trellis import create_app

from .conftest import fresh_ip

USERS = 200


@pytest.fixture()
def cluster_app(pg_cluster, app_config, tmp_path) -> Iterator[Flask]:
    """An app on the throwaway cluster, migrated; its background threads end before the cluster does."""
    from trellis.admins import ensure_first_admin
    from trellis.migrate import upgrade

    app = create_app(
        {**app_config, "DATABASE_URL": pg_cluster.url, "STORAGE_PATH": str(tmp_path), "EMAIL_POLL_SECONDS": 0.2}
    )
    try:
        upgrade(app)
        with app.app_context():
            ensure_first_admin()
        yield app
    finally:
        worker = app.extensions.get("trellis_email_worker")
        if worker is not None:
            worker.stop()
            time.sleep(0.5)  # the senders' last step ends before the engine goes
        app.extensions["trellis_events"].stop()
        app.extensions["trellis"].engine.dispose()


@pytest.mark.long
def test_every_forgot_password_answered_200_during_a_restart_gets_its_mail(
    cluster_app, pg_cluster, app_config, smtp_server
):
    from trellis_email import outbox

    client = cluster_app.test_client()
    admin = {"masterkey": app_config["MASTER_KEY"]}
    sends = {"local": {"verification": {"sendEmail": False}}, "rateLimits": {"sendPerIp": "1000/minute"}}
    for module, changes in (("email", smtp_server.email_config()), ("authentication", sends)):
        assert client.put(f"/config/{module}", json=changes, headers=admin).status_code == 200
    emails = [f"restart-{n}@example.com" for n in range(USERS)]
    for email in emails:
        created = client.post(
            "/authentication/local/new",
            json={"email": email, "password": "long-enough-1"},
            environ_base={"REMOTE_ADDR": fresh_ip()},
        )
        assert created.status_code == 201, created.get_json()
    outbox.start(cluster_app)  # this process's senders, as a server runs them

    answers: list[tuple[str, int]] = []
    pending = iter(emails)
    lock = threading.Lock()

    def ask() -> None:
        caller = cluster_app.test_client()
        while True:
            with lock:
                email = next(pending, None)
            if email is None:
                return
            response = caller.post(
                "/authentication/forgot-password", json={"email": email}, environ_base={"REMOTE_ADDR": fresh_ip()}
            )
            response.get_data()
            response.close()  # what a server does once the answer is sent
            answers.append((email, response.status_code))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    while len(answers) < USERS // 4:
        time.sleep(0.01)
    pg_cluster.pg_ctl("restart")
    for thread in threads:
        thread.join(60)
    answered = [email for email, status in answers if status == 200]

    def received() -> Counter:
        return Counter(d.rcpt_tos[0] for d in smtp_server.messages)

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(received()[email] < 1 for email in answered):
        time.sleep(0.1)

    statuses = Counter(status for _email, status in answers)
    unsent = [email for email in answered if received()[email] < 1]
    print(
        f"\nrestart: {len(answers)} answers {dict(statuses)}, {len(smtp_server.messages)} mails, {len(unsent)} unsent"
    )
    assert len(answers) == USERS and statuses[200] > USERS // 4, statuses
    assert unsent == [], f"{len(unsent)} of {len(answered)} answered 200 got no mail"
