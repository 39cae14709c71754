"""Two real server processes behind a real nginx, configured from ``deploy/nginx.conf``: they behave as one.

The topology of README "Production": processes ``a`` and ``b`` (eventlet, ``python -m
trellis.testing.server``) on one PostgreSQL database and one Redis, nginx in front (REST round-robin
over keep-alive connections, ``/realtime/`` sticky by client address), ``TRELLIS_PROXY_COUNT=1``.
Every case runs twice: with Redis, and with that Redis stopped (the processes fall back to reading
the cache generations from the database). The Redis is this module's own ``redis-server`` child on
a free port, so stopping it disturbs nobody; nginx runs as a child too (``daemon off``, a tmp prefix,
127.0.0.1 only). ``make test`` installs Debian's nginx (``make nginx``) when it is missing.

A change is made through one process (or nginx) and used on the very next request through the
other (or nginx, whose round-robin alternates): nothing waits or retries. The production topology is
PostgreSQL's: the module runs in the PostgreSQL pass of ``make test`` (its own throwaway database).
"""

from __future__ import annotations

import contextlib
import io
import os
import queue
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from trellis.testing.plugin import (
    TEST_MASTER_KEY,
    TEST_SECRET_KEY,
    LiveServer,
    database_kind,
    free_port,
)
from trellis.testing.sockets import InOrderClient

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[1]
ADMIN = {"masterkey": TEST_MASTER_KEY}
TIMEOUT = 30
STARTUP_SECONDS = 120  # the machine running make test may be busy far beyond its cores
ROUNDS = 6  # per case: round-robin over two processes, so each process serves every other request
BREAKER_SECONDS = 1.0  # the processes' Redis circuit breaker: short, so a test after an outage waits little


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _unavailable(message: str) -> None:
    if _in_ci():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


# ---- the topology -------------------------------------------------------------------------------


class OwnRedis:
    """A throwaway ``redis-server`` child on a free port: started and stopped at will."""

    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.folder = folder
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        if self.process is not None:
            return
        binary = shutil.which("redis-server")
        if binary is None:
            _unavailable("redis-server is not installed")
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            cwd=self.folder,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        import redis

        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            try:
                client.ping()
                return
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        self.process.wait(10)
        self.process = None


def nginx_config(upstreams: list[int], listen: int, prefix: Path) -> str:
    """``deploy/nginx.conf`` with the test's ports, inside a main configuration of its own."""
    site = (ROOT / "deploy" / "nginx.conf").read_text()
    servers = "    server 127.0.0.1:3001;\n    server 127.0.0.1:3002;\n"
    assert site.count(servers) == 2 and site.count("listen 80;") == 1, "deploy/nginx.conf changed shape"
    site = site.replace(servers, "".join(f"    server 127.0.0.1:{port};\n" for port in upstreams))
    site = site.replace("listen 80;", f"listen 127.0.0.1:{listen};")
    (prefix / "trellis.conf").write_text(site)
    user = "user root;\n" if os.geteuid() == 0 else ""  # workers must read and write the tmp prefix
    temp = "".join(
        f"    {kind}_temp_path {prefix / kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return (
        f"{user}daemon off;\nmaster_process on;\nworker_processes 1;\npid {prefix / 'nginx.pid'};\n"
        f"error_log {prefix / 'error.log'} warn;\nevents {{ worker_connections 512; }}\n"
        "http {\n"
        "    log_format upstream '$request_method $uri $status $upstream_addr';\n"
        f"    access_log {prefix / 'access.log'} upstream;\n{temp}"
        f"    include {prefix / 'trellis.conf'};\n"
        "}\n"
    )


class Nginx:
    def __init__(self, upstreams: list[int], prefix: Path) -> None:
        binary = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
        if binary is None:
            _unavailable("nginx is not installed: `make nginx` installs Debian's package")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.prefix = prefix
        prefix.mkdir(parents=True, exist_ok=True)
        config = prefix / "nginx.conf"
        config.write_text(nginx_config(upstreams, self.port, prefix))
        self.process = subprocess.Popen(
            [binary, "-p", str(prefix), "-c", str(config), "-e", str(prefix / "error.log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"nginx exited:\n{(prefix / 'error.log').read_text()}")
            try:
                requests.get(self.url + "/health", timeout=2)
                return
            except requests.RequestException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def upstreams_seen(self) -> set[str]:
        """The upstream addresses nginx sent requests to (from its access log)."""
        lines = (self.prefix / "access.log").read_text().splitlines()
        return {line.rsplit(" ", 1)[-1] for line in lines if ":" in line.rsplit(" ", 1)[-1]}

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


@dataclass
class Topology:
    a: LiveServer
    b: LiveServer
    nginx: Nginx
    redis: OwnRedis

    @property
    def url(self) -> str:
        return self.nginx.url

    def pairs(self) -> list[tuple[str, str]]:
        """(where a change is made, where it is used next): across processes both ways, and via nginx."""
        return [(self.a.url, self.b.url), (self.b.url, self.a.url)] + [(self.url, self.url)] * ROUNDS


@contextlib.contextmanager
def _database() -> Iterator[str]:
    """A throwaway PostgreSQL database, migrated, with the first admin."""
    import psycopg2
    from sqlalchemy.engine import make_url

    admin_url = make_url(os.environ.get("TRELLIS_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"))
    try:
        connection = psycopg2.connect(
            admin_url.set(drivername="postgresql").render_as_string(hide_password=False), connect_timeout=5
        )
    except psycopg2.OperationalError as exc:
        _unavailable(f"PostgreSQL is unreachable: {exc}")
    connection.autocommit = True
    name = f"trellis_two_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE DATABASE "{name}"')
    url = admin_url.set(drivername="postgresql+psycopg2", database=name).render_as_string(hide_password=False)
    try:
        from trellis import create_app
        from trellis.admins import ensure_first_admin
        from trellis.migrate import upgrade

        app = create_app(
            {
                "DATABASE_URL": url,
                "MASTER_KEY": TEST_MASTER_KEY,
                "SECRET_KEY": TEST_SECRET_KEY,
                "ASYNC_MODE": "threading",
                "PASSWORD_PROFILE": "test",
            }
        )
        upgrade(app)
        with app.app_context():
            ensure_first_admin()
        app.extensions["trellis"].engine.dispose()
        yield url
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.close()


@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    if database_kind() != "postgresql":
        pytest.skip("the two-process topology runs in the PostgreSQL pass (production's database)")
    folder = tmp_path_factory.mktemp("two-processes")
    redis = OwnRedis(folder)
    redis.start()
    servers: list[LiveServer] = []
    nginx = None
    try:
        with _database() as database_url:
            storage = folder / "storage"  # the local storage backend: one folder shared by both, as one disk
            for _ in range(2):
                port = free_port()
                env = dict(os.environ)
                env.update(
                    TRELLIS_DATABASE_URL=database_url,
                    TRELLIS_REDIS_URL=redis.url,
                    TRELLIS_MASTER_KEY=TEST_MASTER_KEY,
                    TRELLIS_SECRET_KEY=TEST_SECRET_KEY,
                    TRELLIS_STORAGE_PATH=str(storage),
                    TRELLIS_INSTANCE_PATH=str(folder / f"instance-{port}"),
                    TRELLIS_ASYNC_MODE="eventlet",
                    TRELLIS_PASSWORD_PROFILE="test",
                    TRELLIS_PROXY_COUNT="1",
                    TRELLIS_LOG_LEVEL="WARNING",
                    HOST="127.0.0.1",
                    PORT=str(port),
                    TRELLIS_REDIS_BREAKER_SECONDS=str(BREAKER_SECONDS),
                )
                servers.append(LiveServer(env, port, folder / f"server-{port}.log"))
            with ThreadPoolExecutor(2) as pool:  # the two start-ups overlap
                # Two start-ups at once on a loaded machine (make test runs both databases in parallel).
                list(pool.map(lambda server: server.wait_ready(timeout=STARTUP_SECONDS), servers))
            nginx = Nginx([server.port for server in servers], folder / "nginx")
            yield Topology(servers[0], servers[1], nginx, redis)
    finally:
        if nginx is not None:
            nginx.stop()
        for server in servers:
            server.stop()
        redis.stop()


@pytest.fixture(params=["redis", "redis-stopped"])
def through(request: pytest.FixtureRequest, topology: Topology) -> Topology:
    """The topology with its Redis running, or stopped (every process falls back to the database)."""
    if request.param == "redis":
        if topology.redis.process is None:  # back from an outage: wait out the processes' circuit breakers
            topology.redis.start()
            time.sleep(BREAKER_SECONDS + 0.5)
    else:
        topology.redis.stop()
    return topology


def _unique(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:8]


def _user(base: str) -> dict[str, Any]:
    email, password = f"{_unique('u')}@example.com", "a-long-enough-password-1"
    created = requests.post(
        f"{base}/authentication/users", json={"email": email, "password": password}, headers=ADMIN, timeout=TIMEOUT
    )
    assert created.status_code == 201, created.text
    signed_in = requests.post(
        f"{base}/authentication/local", json={"email": email, "password": password}, timeout=TIMEOUT
    )
    assert signed_in.status_code == 200, signed_in.text
    body = signed_in.json()
    return {
        "id": body["userId"],
        "headers": {"Authorization": f"Bearer {body['accessToken']}"},
        "token": body["accessToken"],
    }


# ---- the selection ------------------------------------------------------------------------------


def test_a_schema_created_is_usable_at_once_everywhere(through: Topology):
    for writer, reader in through.pairs():
        name = _unique("Thing")
        created = requests.post(
            f"{writer}/admin/database/schemas",
            headers=ADMIN,
            timeout=TIMEOUT,
            json={"name": name, "fields": {"title": "String"}},
        )
        assert created.status_code == 201, created.text
        document = requests.post(f"{reader}/database/{name}", json={"title": "first"}, headers=ADMIN, timeout=TIMEOUT)
        assert document.status_code == 201, (writer, reader, document.text)

        changed = requests.put(
            f"{writer}/admin/database/schemas/{created.json()['_id']}",
            headers=ADMIN,
            timeout=TIMEOUT,
            json={"fields": {"title": "String", "rank": "Number"}},
        )
        assert changed.status_code == 200, changed.text
        ranked = requests.post(
            f"{reader}/database/{name}", json={"title": "second", "rank": 2}, headers=ADMIN, timeout=TIMEOUT
        )
        assert ranked.status_code == 201 and ranked.json()["rank"] == 2, ranked.text

        deleted = requests.delete(
            f"{writer}/admin/database/schemas/{created.json()['_id']}?deleteData=true", headers=ADMIN, timeout=TIMEOUT
        )
        assert deleted.status_code == 200, deleted.text
        gone = requests.post(f"{reader}/database/{name}", json={"title": "third"}, headers=ADMIN, timeout=TIMEOUT)
        assert gone.status_code == 404, gone.text
    assert len(through.nginx.upstreams_seen()) == 2  # round-robin reached both processes


def test_a_config_put_is_what_the_next_get_shows(through: Topology):
    for number, (writer, reader) in enumerate(through.pairs()):
        value = f"_trap{number}{uuid.uuid4().hex[:6]}"
        put = requests.put(f"{writer}/config/forms", json={"honeypotField": value}, headers=ADMIN, timeout=TIMEOUT)
        assert put.status_code == 200, put.text
        shown = requests.get(f"{reader}/config/forms", headers=ADMIN, timeout=TIMEOUT)
        assert shown.status_code == 200 and shown.json()["honeypotField"] == value, (writer, reader, shown.text)


def test_a_lowered_storage_limit_refuses_the_next_upload(through: Topology):
    user = _user(through.url)
    for limit_at, upload_at in through.pairs():
        for limit, expected in ((10, 413), (10_000, 201)):
            put = requests.put(
                f"{limit_at}/config/storage", json={"maxFileSize": limit}, headers=ADMIN, timeout=TIMEOUT
            )
            assert put.status_code == 200, put.text
            sent = requests.post(
                f"{upload_at}/storage/upload",
                headers=user["headers"],
                timeout=TIMEOUT,
                files={"file": ("note.txt", io.BytesIO(b"twenty bytes of text"), "text/plain")},
                data={"isPublic": "true"},
            )
            assert sent.status_code == expected, (limit_at, upload_at, limit, sent.text)
    # Through nginx, a built URL names nginx's address (trusted X-Forwarded-*), not a process's.
    assert sent.json()["url"].startswith(f"{through.url}/storage/public/"), sent.json()["url"]
    assert requests.get(sent.json()["url"], timeout=TIMEOUT).content == b"twenty bytes of text"


def test_forms_limits_follow_the_config_at_once(through: Topology):
    form = requests.post(
        f"{through.url}/admin/forms",
        headers=ADMIN,
        timeout=TIMEOUT,
        json={
            "name": _unique("Contact"),
            "fields": [{"name": "first", "type": "text"}, {"name": "second", "type": "text"}],
        },
    )
    assert form.status_code == 201, form.text
    submit = f"/forms/submit/{form.json()['_id']}"
    big = {"first": "x" * 900, "second": "y" * 900}  # valid fields, a body over 1024 bytes
    for limit_at, submit_at in through.pairs():
        assert (
            requests.put(
                f"{limit_at}/config/forms",
                json={"maxBodyBytes": 1024, "rateLimit": "1000/minute"},
                headers=ADMIN,
                timeout=TIMEOUT,
            ).status_code
            == 200
        )
        refused = requests.post(f"{submit_at}{submit}", json=big, timeout=TIMEOUT)
        assert refused.status_code == 413, (limit_at, submit_at, refused.text)
        assert (
            requests.put(
                f"{limit_at}/config/forms", json={"maxBodyBytes": 4096}, headers=ADMIN, timeout=TIMEOUT
            ).status_code
            == 200
        )
        accepted = requests.post(f"{submit_at}{submit}", json=big, timeout=TIMEOUT)
        assert accepted.status_code == 201, (limit_at, submit_at, accepted.text)
    if through.redis.process is None:
        return  # rate limits are counted in Redis: with it stopped they are not enforced (fail open)
    # A lowered rate limit is in force on the next submission, counted once across both processes.
    assert (
        requests.put(
            f"{through.a.url}/config/forms", json={"rateLimit": "3/minute"}, headers=ADMIN, timeout=TIMEOUT
        ).status_code
        == 200
    )
    answers = [
        requests.post(f"{base}{submit}", json={"first": "hi"}, timeout=TIMEOUT).status_code
        for base in (through.b.url, through.url, through.url, through.a.url, through.b.url)
    ]
    assert answers.count(201) <= 3 and answers[-2:] == [429, 429], answers
    requests.put(f"{through.a.url}/config/forms", json={"rateLimit": "1000/minute"}, headers=ADMIN, timeout=TIMEOUT)


def test_a_custom_endpoint_created_answers_at_once(through: Topology):
    name = _unique("Item")
    assert (
        requests.post(
            f"{through.url}/admin/database/schemas",
            headers=ADMIN,
            timeout=TIMEOUT,
            json={"name": name, "fields": {"n": "Number"}},
        ).status_code
        == 201
    )
    assert (
        requests.post(
            f"{through.url}/database/{name}/many",
            headers=ADMIN,
            timeout=TIMEOUT,
            json={"docs": [{"n": n} for n in range(5)]},
        ).status_code
        == 201
    )
    for writer, reader in through.pairs():
        endpoint = _unique("small")
        created = requests.post(
            f"{writer}/admin/database/customEndpoints",
            headers=ADMIN,
            timeout=TIMEOUT,
            json={
                "name": endpoint,
                "operation": "GET",
                "selectedSchema": name,
                "query": {
                    "AND": [{"schemaField": "n", "operation": "lt", "comparisonField": {"type": "Custom", "value": 3}}]
                },
            },
        )
        assert created.status_code == 201, created.text
        called = requests.get(f"{reader}/database/function/{endpoint}", headers=ADMIN, timeout=TIMEOUT)
        assert called.status_code == 200, (writer, reader, called.text)
        assert sorted(doc["n"] for doc in called.json()["documents"]) == [0, 1, 2]


def test_a_blocked_user_is_refused_by_both_processes(through: Topology):
    for blocker in (through.a.url, through.b.url, through.url):
        user = _user(through.url)
        for base in (through.a.url, through.b.url):  # warm: both processes know the user as active
            assert requests.get(f"{base}/authentication/user", headers=user["headers"], timeout=TIMEOUT).ok
        blocked = requests.put(f"{blocker}/authentication/users/{user['id']}/block", headers=ADMIN, timeout=TIMEOUT)
        assert blocked.status_code == 200, blocked.text
        for base in [through.a.url, through.b.url] + [through.url] * 4:
            refused = requests.get(f"{base}/authentication/user", headers=user["headers"], timeout=TIMEOUT)
            assert refused.status_code in (401, 403), (blocker, base, refused.text)


def test_chat_crosses_processes(through: Topology):
    alice, bob = _user(through.url), _user(through.url)
    room = requests.post(
        f"{through.url}/chat/rooms",
        json={"roomName": "across", "users": [bob["id"]]},
        headers=alice["headers"],
        timeout=TIMEOUT,
    )
    assert room.status_code == 201, room.text
    room_id = room.json()["roomId"]
    inbox: queue.Queue = queue.Queue()
    client = InOrderClient(reconnection=False)
    client.on("message", inbox.put, namespace="/chat/")
    # Long-polling first, then the websocket upgrade: every request of the session must reach the same
    # process (nginx's sticky /realtime/ upstream).
    client.connect(
        through.url,
        socketio_path="realtime",
        namespaces=["/chat/"],
        auth={"token": alice["token"]},
        wait_timeout=TIMEOUT,
    )
    try:
        texts = []
        for base in (through.a.url, through.b.url, through.url, through.url):
            text = _unique("hello ")
            sent = requests.post(
                f"{base}/chat/rooms/{room_id}/messages", json={"message": text}, headers=bob["headers"], timeout=TIMEOUT
            )
            assert sent.status_code == 201, sent.text
            texts.append(text)
        stored = requests.get(f"{through.url}/chat/rooms/{room_id}/messages", headers=alice["headers"], timeout=TIMEOUT)
        assert sorted(m["message"] for m in stored.json()["messages"]) == sorted(texts)
        if through.redis.process is None:
            return  # without Redis, events do not cross processes: the messages are stored, fetched by REST
        received = [inbox.get(timeout=10)["message"] for _ in texts]
        assert received == texts  # one of a and b is not the socket's process: its messages crossed
    finally:
        client.disconnect()
