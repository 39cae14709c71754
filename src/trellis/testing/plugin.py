"""pytest plugin shipped with the core (entry point ``pytest11: trellis``), reused by every module.

Database: ``TRELLIS_TEST_DB=sqlite`` (default) or ``postgresql``. PostgreSQL runs get a throwaway
database on ``TRELLIS_TEST_PG_URL`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``),
created for the session and dropped after. With ``CI=true`` an unreachable PostgreSQL fails the run.

Fixtures:
    app             session-wide app, migrated to heads, with the first admin
    db              per-test transaction, rolled back afterwards (the app's session joins it)
    client          Flask test client inside ``db``
    admin_headers   ``{"masterkey": …}``
    admin_token     an admin Bearer token from ``POST /login``
    live_server     starts the real server (eventlet) in a subprocess; data it writes is committed
                    and wiped after the test (``live_server_factory`` for several, with extra env;
                    ``module_live_server`` for one shared by a test module)
    pg_cluster      a throwaway PostgreSQL cluster of its own, to restart (``trellis.testing.pg_cluster``)
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, func, inspect, select

from . import forkserver
from .ports import READY, free_port  # free_port: also imported from here by tests of every module

TEST_MASTER_KEY = "test-master-key"
TEST_SECRET_KEY = "test-secret-key-that-is-long-enough-for-hs256"
TEST_ADMIN = ("admin", "admin-password")


def pytest_report_header(config: pytest.Config) -> str:
    return f"trellis test database: {database_kind()}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files that hold a test marked ``long`` (fuzzers, module installs, killed servers: 25–170 s each on a
    slow 2-core machine) run first. xdist's ``loadfile`` hands out whole files, largest test count first
    unless told ``--no-loadscope-reorder`` (the Makefile does): these files, of one or two tests each, came
    last and ran alone at the end while the other worker idled. The order is otherwise kept (a stable sort)."""
    long_files = {item.path for item in items if item.get_closest_marker("long")}
    items.sort(key=lambda item: item.path not in long_files)


def database_kind() -> str:
    kind = os.environ.get("TRELLIS_TEST_DB", "sqlite").lower()
    if kind not in ("sqlite", "postgresql"):
        raise pytest.UsageError("TRELLIS_TEST_DB must be 'sqlite' or 'postgresql'")
    return kind


def _postgres_admin_url() -> str:
    return os.environ.get("TRELLIS_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


@pytest.fixture(scope="session")
def trellis_database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if database_kind() == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('db') / 'trellis-test.db'}"
        return
    import psycopg2
    from sqlalchemy.engine import make_url

    admin_url = make_url(_postgres_admin_url())
    dsn = admin_url.set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        conn = psycopg2.connect(dsn, connect_timeout=5)
    except psycopg2.OperationalError as exc:
        message = f"PostgreSQL at {admin_url.render_as_string()} is unreachable: {exc}"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    name = f"trellis_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin_url.set(drivername="postgresql+psycopg2", database=name).render_as_string(hide_password=False)
    finally:
        with conn.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.close()


@pytest.fixture(scope="session")
def app_config(trellis_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Settings of the test app; override this fixture in a conftest to change them."""
    return {
        "TESTING": True,
        "DATABASE_URL": trellis_database_url,
        "MASTER_KEY": TEST_MASTER_KEY,
        "SECRET_KEY": TEST_SECRET_KEY,
        "ADMIN_USERNAME": TEST_ADMIN[0],
        "ADMIN_PASSWORD": TEST_ADMIN[1],
        "ASYNC_MODE": "threading",
        "PASSWORD_PROFILE": "test",
        "STORAGE_PATH": str(tmp_path_factory.mktemp("storage")),
    }


@pytest.fixture(scope="session")
def app(app_config: dict[str, Any], tmp_path_factory: pytest.TempPathFactory):
    os.environ.setdefault("TRELLIS_INSTANCE_PATH", str(tmp_path_factory.mktemp("instance")))
    from trellis import create_app
    from trellis.admins import ensure_first_admin
    from trellis.migrate import upgrade

    application = create_app(app_config)
    upgrade(application)
    with application.app_context():
        ensure_first_admin()
    yield application
    application.extensions["trellis_events"].stop()  # before the test database is dropped
    application.extensions["trellis"].engine.dispose()


class SessionReads:
    """Reads on the session's connection: the test's rolled-back transaction, whose rows only that
    connection sees (the production provider, ``trellis.reads.ReadConnections``, would not see them)."""

    retryable = False  # inside a transaction: a failed statement has aborted it

    def __init__(self, connection: Any) -> None:
        self.connection = connection  # the one the session is bound to

    def open(self) -> Any:
        from trellis import db as trellis_db

        return trellis_db.session.connection()

    def close(self, connection: Any) -> None:
        pass

    def transaction(self) -> Any:
        # The test's connection itself: an after-commit callback cannot use the session.
        return contextlib.nullcontext(self.connection)

    def snapshot(self) -> Any:
        return contextlib.nullcontext(self.connection)  # one transaction already: the test's


@contextlib.contextmanager
def reads_in_session(connection: Any) -> Iterator[None]:
    """Within this block every app whose context is pushed reads through the session (the provider is
    swapped as each context is pushed, and put back afterwards)."""
    from flask import appcontext_pushed

    replaced: dict[int, tuple[Any, Any]] = {}  # id(state) → (state, its own provider)
    session_reads = SessionReads(connection)

    def swap(application: Any, **_extra: Any) -> None:
        state = application.extensions.get("trellis")
        if state is not None and state.reads is not session_reads:
            replaced.setdefault(id(state), (state, state.reads))
            state.reads = session_reads

    appcontext_pushed.connect(swap)
    try:
        yield
    finally:
        appcontext_pushed.disconnect(swap)
        for state, original in replaced.values():
            state.reads = original


@pytest.fixture()
def db(app) -> Iterator[Any]:
    """Run the test inside one transaction that is rolled back; the app's sessions join it."""
    from trellis import db as trellis_db
    from trellis.ratelimit import reset as reset_rate_limits

    reset_rate_limits(app)  # every test client calls from 127.0.0.1: no counts carried between tests
    trellis_db.session.remove()
    state = app.extensions["trellis"]
    connection = state.engine.connect()
    transaction = connection.begin()
    saved_session = dict(trellis_db.session.session_factory.kw)
    saved_environ = dict(os.environ)
    trellis_db.session.configure(bind=connection, join_transaction_mode="create_savepoint")
    try:
        # Every app (this one and any a test builds) reads through the session: the test's transaction.
        with reads_in_session(connection), app.app_context():
            yield trellis_db.session
    finally:
        trellis_db.session.remove()
        trellis_db.session.session_factory.kw.clear()
        trellis_db.session.session_factory.kw.update(saved_session)
        os.environ.clear()
        os.environ.update(saved_environ)
        if transaction.is_active:
            transaction.rollback()
        connection.close()
        state.generations.reset()


@pytest.fixture()
def client(app, db):
    return app.test_client()


@pytest.fixture()
def admin_headers() -> dict[str, str]:
    return {"masterkey": TEST_MASTER_KEY}


@pytest.fixture()
def project_call(client, admin_headers) -> Callable[..., dict[str, Any]]:
    """``project_call("plan" | "apply", project, prune=False, expect=200)``: ``POST /admin/project/<verb>`` as
    the administrator, the status checked; returns the answer's JSON."""

    def send(verb: str, project: Any, prune: bool = False, expect: int = 200) -> dict[str, Any]:
        response = client.post(
            f"/admin/project/{verb}", json={"project": project, "prune": prune}, headers=admin_headers
        )
        assert response.status_code == expect, response.get_json()
        answer: dict[str, Any] = response.get_json()
        return answer

    return send


@pytest.fixture()
def admin_token(client, admin_headers) -> str:
    response = client.post("/login", json={"username": TEST_ADMIN[0], "password": TEST_ADMIN[1]}, headers=admin_headers)
    assert response.status_code == 200, response.get_json()
    return response.get_json()["token"]


def reachable_redis(url: str) -> str:
    """``url`` once its Redis answers a PING; else the test fails under CI (``CI=true``) and is skipped
    elsewhere, so a laptop without Redis still runs the rest."""
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"Redis at {url} is unreachable: {exc}", pytrace=False)
        pytest.skip(f"Redis at {url} is unreachable: {exc}")
    return url


class LiveServer:
    """A real Trellis process (``python wsgi.py`` semantics, eventlet) on 127.0.0.1."""

    def __init__(self, env: dict[str, str], port: int, log_path: Path, command: list[str] | None = None) -> None:
        """``command`` serves on ``PORT`` from ``env`` (default: this interpreter's test server)."""
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        # The default test server says when it has bound its port: until then a /health answer on the port
        # may be another process's (a port taken between free_port() and this server's bind).
        self._banner = None if command else f"{READY} {port} ".encode()
        self.log_path = log_path
        self._log = None
        self.process: subprocess.Popen[bytes] | forkserver.ForkedProcess
        if command is None and forkserver.enabled(env):  # the test server, forked after its imports
            self.process = forkserver.shared().spawn(env, log_path)
            return
        self._log = open(log_path, "wb")
        self.process = subprocess.Popen(
            command or [sys.executable, "-m", "trellis.testing.server"],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout: float = 120.0) -> None:  # a busy machine (make test runs two passes) starts slowly
        import requests

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log_path.read_text()}")
            if self._banner is not None and self._banner not in self.log_path.read_bytes():
                time.sleep(0.1)
                continue
            try:
                if requests.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"server did not become ready:\n{self.log_path.read_text()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        if self._log is not None:
            self._log.close()


def live_server_env(app_config: dict[str, Any], folder: Path, port: int, **extra: str) -> dict[str, str]:
    """The environment of a real server process on the test database (same secrets as ``app``)."""
    env = dict(os.environ)
    env.update(
        TRELLIS_DATABASE_URL=app_config["DATABASE_URL"],
        TRELLIS_MASTER_KEY=app_config["MASTER_KEY"],
        TRELLIS_SECRET_KEY=app_config["SECRET_KEY"],
        TRELLIS_STORAGE_PATH=app_config["STORAGE_PATH"],
        TRELLIS_INSTANCE_PATH=str(folder / f"instance-{port}"),
        TRELLIS_ASYNC_MODE="eventlet",
        TRELLIS_PASSWORD_PROFILE=str(app_config.get("PASSWORD_PROFILE", "default")),
        HOST="127.0.0.1",
        PORT=str(port),
    )
    env.update(extra)
    return env


PORT_ATTEMPTS = 3


@contextlib.contextmanager
def running_servers(app, app_config: dict[str, Any], folder: Path) -> Iterator[Callable[..., LiveServer]]:
    """Start servers with ``start(**env)``; all are stopped and their committed data wiped at the end."""
    servers: list[LiveServer] = []

    def start(**extra_env: str) -> LiveServer:
        from ..server.serve import PORT_IN_USE  # not at the plugin's import: pytest loads it before any app

        for attempt in range(PORT_ATTEMPTS):
            port = free_port()
            env = live_server_env(app_config, folder, port, **extra_env)
            server = LiveServer(env, port, folder / f"server-{port}.log")
            servers.append(server)
            try:
                server.wait_ready()
                return server
            except RuntimeError:
                # free_port() only finds a port free: another test process can bind it before this server
                # does (seen once in CI, the two databases' runs side by side). Then take another one.
                if attempt + 1 == PORT_ATTEMPTS or PORT_IN_USE not in server.log_path.read_text():
                    raise
        raise AssertionError("unreachable")

    try:
        yield start
    finally:
        for server in servers:
            server.stop()
        wipe_data(app)


@contextlib.contextmanager
def statements_run(engine: Any = None) -> Iterator[list[str]]:
    """The SQL of every statement run on ``engine`` (on every engine when None) while the block runs,
    background threads' included: filter what the test is about."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    target = Engine if engine is None else engine
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement)

    event.listen(target, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(target, "before_cursor_execute", record)


@pytest.fixture()
def committing_app_factory(app, app_config) -> Iterator[Callable[..., Any]]:
    """``committing_app_factory(**config)``: a second app with every module (and ``config`` over the
    test's), outside the test transaction: its writes commit to the test database (wiped before and
    after), and its background parts (event log, read connections) are real."""
    wipe_data(app)
    from trellis import create_app  # not at the plugin's import: pytest loads it before any app

    made: list[Any] = []

    def make(**config: Any) -> Any:
        made.append(create_app({**app_config, **config}))
        return made[-1]

    try:
        yield make
    finally:
        for application in made:
            application.extensions["trellis_events"].stop()
            application.extensions["trellis"].reads.dispose()
        wipe_data(app)


@pytest.fixture()
def committing_app(committing_app_factory) -> Any:
    """:func:`committing_app_factory`'s app with the test's configuration."""
    return committing_app_factory()


@pytest.fixture()
def live_server_factory(app, app_config, tmp_path: Path) -> Iterator[Callable[..., LiveServer]]:
    """Start real servers sharing the test database: ``live_server_factory(TRELLIS_REDIS_URL=…)``."""
    with running_servers(app, app_config, tmp_path) as start:
        yield start


@pytest.fixture(scope="module")
def module_live_server(app, app_config, tmp_path_factory) -> Iterator[LiveServer]:
    """One real server shared by a test module (starting one costs seconds); wiped when the module ends."""
    with running_servers(app, app_config, tmp_path_factory.mktemp("live")) as start:
        yield start()


@pytest.fixture()
def live_server(live_server_factory) -> LiveServer:
    return live_server_factory()


@pytest.fixture()
def pg_cluster() -> Iterator[Any]:
    """A throwaway PostgreSQL cluster of its own, started (``trellis.testing.pg_cluster``); skips the test
    when the server binaries are not installed."""
    from .pg_cluster import BINARIES, Cluster

    if not BINARIES:
        pytest.skip("PostgreSQL server binaries are not installed")
    made = Cluster()
    try:
        made.pg_ctl("start")
        yield made
    finally:
        made.remove()


def wipe_data(app) -> None:
    """Delete committed rows of every table but the admins (after live-server tests)."""
    from trellis import db as trellis_db

    with app.app_context():
        engine = app.extensions["trellis"].engine
        with engine.begin() as connection:
            present = set(inspect(connection).get_table_names())
            for table in reversed(trellis_db.Base.metadata.sorted_tables):
                # The change counters only grow, as in production (a count cached under a number seen
                # before the wipe must not be read again after it).
                if table.name not in present or table.name in ("trellis_admins", "core_event_counters"):
                    continue
                if table.name == "core_events":
                    # Keep the newest event: event ids never go back, as in production, so servers still
                    # running (a test module's shared server) keep delivering the ids that follow.
                    newest = select(func.max(table.c.event_id)).scalar_subquery()
                    connection.execute(delete(table).where(table.c.event_id < newest))
                else:
                    connection.execute(delete(table))
    app.extensions["trellis"].generations.reset()
    app.extensions["trellis_events"].reset()
