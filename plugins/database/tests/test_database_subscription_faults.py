"""A live subscription when PostgreSQL has no free connection: ``subscribe`` answers 503 in the error shape
(never a 500), and works again once connections are free. A throwaway cluster of our own (never the shared
server) whose ``max_connections`` this test fills itself."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import psycopg2
import pytest
import requests

from trellis.testing.plugin import TEST_MASTER_KEY, LiveServer, database_kind, free_port, live_server_env

from .test_database_subscriptions import Watcher

ADMIN = {"masterkey": TEST_MASTER_KEY}
WAIT = 15.0
MAX_CONNECTIONS = 12
pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(database_kind() != "postgresql", reason="PostgreSQL's max_connections is a PostgreSQL fault"),
]


def _dsn(cluster: Any) -> str:
    return f"host=127.0.0.1 port={cluster.port} user=postgres dbname=postgres"


@pytest.fixture()
def small_cluster(pg_cluster: Any) -> Iterator[Any]:
    """The throwaway cluster with room for MAX_CONNECTIONS clients, one of them this test's own (taken
    before the server starts: a server that opens every other slot must not lock the test out)."""
    admin = psycopg2.connect(_dsn(pg_cluster))
    admin.autocommit = True
    admin.cursor().execute(f"ALTER SYSTEM SET max_connections = {MAX_CONNECTIONS}")
    admin.close()
    pg_cluster.pg_ctl("restart")
    pg_cluster.admin = psycopg2.connect(_dsn(pg_cluster))
    pg_cluster.admin.autocommit = True
    try:
        yield pg_cluster
    finally:
        pg_cluster.admin.close()


class Fill:
    """Every connection slot of the cluster held by this test; the server's own connections ended."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.held: list[Any] = [cluster.admin]

    def __enter__(self) -> Fill:
        # The server's background threads reconnect every second: end its backends and take their slots
        # until none of them is left (each round frees what the last one missed).
        deadline = time.monotonic() + WAIT
        quiet = 0  # checks in a row that found no connection but ours
        while time.monotonic() < deadline:
            self._take_free_slots()
            ours = [connection.info.backend_pid for connection in self.held]
            cursor = self.held[0].cursor()
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE backend_type = 'client backend' AND NOT pid = ANY(%s)",
                (ours,),
            )
            quiet = 0 if cursor.fetchall() else quiet + 1
            if quiet == 3:
                return self
            time.sleep(0.1)  # the terminated backends give their slots back; a connection under way shows
        raise AssertionError("the server's connections could not be ended")

    def _take_free_slots(self) -> None:
        while True:
            try:
                connection = psycopg2.connect(_dsn(self.cluster), connect_timeout=5)
            except psycopg2.OperationalError as exc:
                assert "too many clients" in str(exc), exc
                return
            connection.autocommit = True
            self.held.append(connection)

    def __exit__(self, *exc: object) -> None:
        for connection in self.held[1:]:
            connection.close()


@contextlib.contextmanager
def serving(app_config: dict[str, Any], cluster: Any, tmp_path: Any) -> Iterator[LiveServer]:
    """A real server on a throwaway cluster, migrated: the only process that uses the cluster."""
    from trellis import create_app
    from trellis.migrate import upgrade

    config = {**app_config, "DATABASE_URL": cluster.url}
    application = create_app(config)
    upgrade(application)
    application.extensions["trellis_events"].stop()
    application.extensions["trellis"].engine.dispose()
    port = free_port()
    served = LiveServer(live_server_env(config, tmp_path, port), port, tmp_path / "server.log")
    try:
        served.wait_ready()
        yield served
    finally:
        served.stop()


@pytest.fixture()
def server(app_config, small_cluster, tmp_path) -> Iterator[LiveServer]:
    with serving(app_config, small_cluster, tmp_path) as served:
        yield served


def _post_as_a_client_would(url: str, body: dict[str, Any]) -> requests.Response:
    """POST, and again after each 503 while WAIT lasts: a server that has just started runs its background
    loops' first passes at once, and with eleven slots the first request can meet them all (a 503 with
    ``Retry-After``, as a client should see; seen once in five runs)."""
    deadline = time.monotonic() + WAIT
    while True:
        answer = requests.post(url, headers=ADMIN, timeout=WAIT, json=body)
        if answer.status_code != 503 or time.monotonic() > deadline:
            return answer
        time.sleep(float(answer.headers["Retry-After"]))


def test_subscribe_answers_503_when_postgresql_has_no_free_connection(server, small_cluster):
    created = _post_as_a_client_would(
        f"{server.url}/admin/database/schemas", {"name": "Crowded", "fields": {"n": "Number"}}
    )
    assert created.status_code == 201, created.text
    assert _post_as_a_client_would(f"{server.url}/database/Crowded", {"n": 1}).status_code == 201
    client = Watcher(server.url, {"masterkey": TEST_MASTER_KEY})
    try:
        # ``since`` reads the event log: a subscription that needs the database
        request = {"schema": "Crowded", "since": 0}
        with Fill(small_cluster):
            answers = [client.call("subscribe", request) for _ in range(3)]
        for answer in answers:
            assert answer == {
                "error": {
                    "name": "SERVICE_UNAVAILABLE",
                    "status": 503,
                    "message": "The database is unavailable; retry shortly",
                }
            }, answers
        # the slots are free again: the same request subscribes on the same socket, at once or after a 503
        # or two (a pool hands out a connection the test ended, finds it dead and drops it)
        for _ in range(3):
            again = client.call("subscribe", request)
            if "subscriptionId" in again:
                break
            assert again == answers[0], again
        assert "subscriptionId" in again, again
    finally:
        client.close()
    assert "on_subscribe failed" not in server.log_path.read_text()  # no 500 (its log line)
