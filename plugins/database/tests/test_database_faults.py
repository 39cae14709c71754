"""Dependency faults on the data path, with real processes: a Redis restart that kept its data after
writes made while it was down (counts stay exact), and a PostgreSQL restart under reads (no 500)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from trellis.testing.plugin import TEST_MASTER_KEY, LiveServer, database_kind, free_port, live_server_env

ADMIN = {"masterkey": TEST_MASTER_KEY}
pytestmark = pytest.mark.live


class RedisChild:
    """Our own redis-server on its own port (the shared one is never touched); its data is kept in
    ``folder`` across :meth:`restart`, as a Redis with persistence would."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.port = folder, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
                "--dbfilename",
                "dump.rdb",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_for_port(self.port)

    def stop(self, keep_data: bool = True) -> None:
        if keep_data:
            subprocess.run(["redis-cli", "-p", str(self.port), "SAVE"], check=True, capture_output=True)
        self.process.terminate()
        self.process.wait(10)

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


def _wait_for_port(port: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


@pytest.fixture()
def redis_child(tmp_path: Path) -> Iterator[RedisChild]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    child = RedisChild(tmp_path)
    try:
        yield child
    finally:
        child.close()


def test_counts_stay_exact_across_a_redis_restart_that_kept_its_data(live_server_factory, redis_child):
    server = live_server_factory(TRELLIS_REDIS_URL=redis_child.url)
    created = requests.post(
        f"{server.url}/admin/database/schemas",
        headers=ADMIN,
        timeout=30,
        json={"name": "Outage", "fields": {"n": "Number"}},
    )
    assert created.status_code == 201, created.text
    docs = requests.post(f"{server.url}/database/Outage/many", json={"docs": [{"n": i} for i in range(20)]}, timeout=30)
    assert docs.status_code == 201
    url = f"{server.url}/database/Outage?n[$lt]=15&limit=1"
    assert requests.get(url, timeout=30).json()["count"] == 15
    assert requests.get(url, timeout=30).json()["count"] == 15  # now kept in Redis

    redis_child.stop(keep_data=True)
    for _ in range(3):  # writes while Redis is down: their invalidation cannot reach it
        assert requests.post(f"{server.url}/database/Outage", json={"n": 0}, timeout=30).status_code == 201
    assert requests.get(url, timeout=30).json()["count"] == 18  # counted in the database meanwhile
    redis_child.start()  # back, with the counts it held before the writes

    assert requests.get(url, timeout=30).json()["count"] == 18, server.log_path.read_text()[-3000:]
    assert requests.get(url, timeout=30).json()["count"] == 18  # the count kept now is the right one
    assert requests.post(f"{server.url}/database/Outage", json={"n": 1}, timeout=30).status_code == 201
    assert requests.get(url, timeout=30).json()["count"] == 19  # and Redis invalidation works again


# ---- PostgreSQL restarted under reads --------------------------------------------------------------------


class PostgresCluster:
    """A throwaway PostgreSQL cluster (initdb) on its own port, run as the ``postgres`` system user."""

    def __init__(self, folder: Path) -> None:
        bins = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
        if not bins or shutil.which("runuser") is None:
            pytest.skip("PostgreSQL server binaries are not installed")
        self.bin, self.folder, self.port = bins[-1], folder, free_port()
        self.data = folder / "data"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.chown(folder, "postgres")
        self._as_postgres(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale",
            "C",
        )
        self.start()

    def _as_postgres(self, *command: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        # No pipes: the server pg_ctl leaves running would hold them open.
        subprocess.run(
            [*prefix, *command], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120
        )

    def start(self) -> None:
        self._as_postgres(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-w",
            "-l",
            str(self.folder / "log"),
            "-o",
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off",
            "start",
        )

    def restart(self) -> None:
        self._as_postgres(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-w",
            "-l",
            str(self.folder / "log"),
            "-m",
            "fast",
            "restart",
        )

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._as_postgres(str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-m", "immediate", "stop")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/postgres"


@pytest.fixture()
def pg_cluster() -> Iterator[PostgresCluster]:
    if database_kind() != "postgresql":
        pytest.skip("a PostgreSQL restart is a PostgreSQL test")
    folder = Path(tempfile.mkdtemp(prefix="trellis-pg-"))
    folder.chmod(0o755)  # the cluster's own folder inside belongs to the postgres user
    cluster = None
    try:
        cluster = PostgresCluster(folder / "cluster")
        yield cluster
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)


def test_reads_survive_a_postgresql_restart(app_config, pg_cluster, tmp_path):
    from trellis import create_app
    from trellis.migrate import upgrade

    config = {**app_config, "DATABASE_URL": pg_cluster.url}
    application = create_app(config)
    upgrade(application)
    application.extensions[
        "trellis_events"
    ].stop()  # the served process has its own; this one would outlive the cluster
    application.extensions["trellis"].engine.dispose()
    port = free_port()
    # The process is alone on its database, so schemas and configs are not re-checked per request: the
    # core's generation check stays out of the way and what is measured is the document read path.
    env = live_server_env(config, tmp_path, port, TRELLIS_CACHE_SHARED="false")
    server = LiveServer(env, port, tmp_path / "server.log")
    try:
        server.wait_ready()
        created = requests.post(
            f"{server.url}/admin/database/schemas",
            headers=ADMIN,
            timeout=30,
            json={"name": "Restarted", "fields": {"n": "Number"}},
        )
        assert created.status_code == 201, created.text
        docs = requests.post(
            f"{server.url}/database/Restarted/many", timeout=30, json={"docs": [{"n": i} for i in range(30)]}
        ).json()["docs"]
        get_url = f"{server.url}/database/Restarted/{docs[0]['_id']}"
        list_url = f"{server.url}/database/Restarted?n[$lt]=20&limit=5"

        def warm() -> None:  # several pooled connections, all about to die
            with requests.Session() as http:
                for _ in range(10):
                    assert http.get(get_url, timeout=30).status_code == 200
                    assert http.get(list_url, timeout=30).status_code == 200

        threads = [threading.Thread(target=warm) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        during: list[int] = []
        answers_500: list[str] = []
        stop = threading.Event()

        def read_on() -> None:
            with requests.Session() as http:
                while not stop.is_set():
                    response = http.get(get_url, timeout=30)
                    during.append(response.status_code)
                    if response.status_code == 500:
                        answers_500.append(response.text)

        reader = threading.Thread(target=read_on)
        reader.start()
        pg_cluster.restart()
        stop.set()
        reader.join()
        # while it restarts: at most a 503, never a 500
        assert set(during) <= {200, 503}, (answers_500, server.log_path.read_text()[-4000:])

        after = [requests.get(url, timeout=30).status_code for url in (get_url, list_url) * 5]
        assert after == [200] * 10  # dead pooled connections are replaced and the read run again

        pg_cluster.stop()
        response = requests.get(get_url, timeout=30)
        assert response.status_code == 503, response.text
        assert response.headers["Retry-After"] == "1"
        assert response.json()["name"] == "SERVICE_UNAVAILABLE"
        pg_cluster.start()
        assert requests.get(get_url, timeout=30).status_code == 200
    finally:
        server.stop()
