"""Shared benchmark machinery: a throwaway database, a real server process, and wrk as the load.

    with bench_server(database="postgresql") as server:     # eventlet process, migrated, admin created
        stats = wrk(server.url + "/health", connections=16)  # {"rps", "p50_ms", "p99_ms", ...}

`wrk` (Debian package) generates the load: it is C, so the 2-core machine spends its CPU on the
server rather than on the load generator. `ceiling_server()` serves a minimal Flask JSON route the
same way (eventlet, one process) to put every figure beside the best this stack can do.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
MASTER_KEY = "bench-master-key"
SECRET_KEY = "bench-secret-key-long-enough-for-hs256-signing"
ADMIN = ("admin", "bench-admin-password")
PG_ADMIN_DSN = os.environ.get("TRELLIS_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


@dataclass
class Server:
    url: str
    process: subprocess.Popen
    database_url: str
    env: dict[str, str]

    @property
    def admin_headers(self) -> dict[str, str]:
        return {"masterkey": MASTER_KEY}

    def rss_mb(self) -> float:
        """Resident memory of the server process, from /proc."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024

    def peak_rss_mb(self) -> float:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024


@contextlib.contextmanager
def throwaway_database(kind: str = "postgresql") -> Iterator[str]:
    """A fresh database URL, dropped afterwards."""
    if kind == "sqlite":
        folder = tempfile.mkdtemp(prefix="trellis-bench-")
        try:
            yield f"sqlite:///{folder}/bench.db"
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return
    import psycopg2

    name = f"trellis_bench_{uuid.uuid4().hex[:8]}"
    conn = psycopg2.connect(PG_ADMIN_DSN)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN_DSN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg2://") + f"/{name}"
    finally:
        with conn.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.close()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait(url: str, process: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited:\n{log.read_text()}")
        try:
            requests.get(url, timeout=1)
            return
        except requests.RequestException:
            time.sleep(0.2)
    raise RuntimeError(f"server not ready:\n{log.read_text()}")


@contextlib.contextmanager
def bench_server(
    database: str = "postgresql", modules: str | None = None, prefix: tuple[str, ...] = (), **env: str
) -> Iterator[Server]:
    """Migrate a throwaway database, create the admin, and serve it with eventlet on a free port
    (``prefix``: a command the server runs under, e.g. valgrind; see ``serve``)."""
    with throwaway_database(database) as db_url, tempfile.TemporaryDirectory(prefix="trellis-bench-") as tmp:
        full_env = dict(os.environ)
        full_env.update(
            TRELLIS_DATABASE_URL=db_url,
            TRELLIS_MASTER_KEY=MASTER_KEY,
            TRELLIS_SECRET_KEY=SECRET_KEY,
            TRELLIS_ADMIN_USERNAME=ADMIN[0],
            TRELLIS_ADMIN_PASSWORD=ADMIN[1],
            TRELLIS_INSTANCE_PATH=f"{tmp}/instance",
            TRELLIS_STORAGE_PATH=f"{tmp}/storage",
            TRELLIS_ASYNC_MODE="eventlet",
            TRELLIS_LOG_LEVEL="WARNING",
            HOST="127.0.0.1",
        )
        if modules is not None:
            full_env["TRELLIS_MODULES"] = modules
        full_env.update(env)
        subprocess.run(
            [sys.executable, "-m", "flask", "--app", str(ROOT / "wsgi.py"), "trellis", "init"],
            env=full_env,
            check=True,
            capture_output=True,
            cwd=tmp,
        )
        with serve(full_env, tmp, prefix) as server:
            yield server


@contextlib.contextmanager
def serve(env: dict[str, str], folder: str, prefix: tuple[str, ...] = (), **overrides: str) -> Iterator[Server]:
    """A Trellis server process with ``env`` (plus ``overrides``) on a free port, logging into ``folder``.

    ``serve(server.env, folder, TRELLIS_REDIS_URL="")`` starts a second process on the same database.
    ``prefix`` runs it under another command in the same process (valgrind): ten minutes to start, not one.
    """
    port = _free_port()
    env = {**env, **overrides, "PORT": str(port)}
    log = Path(folder) / f"server-{port}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [*prefix, sys.executable, "-m", "trellis.testing.server"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=folder,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            _wait(url + "/health", process, log, 600 if prefix else 60)
            yield Server(url, process, env["TRELLIS_DATABASE_URL"], env)
        finally:
            process.terminate()
            process.wait(10)


def insert_many(server: Server, schema: str, batches: list[list[dict[str, Any]]], workers: int = 2) -> list[str]:
    """Documents through ``POST /database/<schema>/many`` as the admin, a batch per request, ``workers``
    requests at a time; returns their ids in the order of the batches."""
    from concurrent.futures import ThreadPoolExecutor

    def send(batch: list[dict[str, Any]]) -> list[str]:
        response = requests.post(
            f"{server.url}/database/{schema}/many", json={"docs": batch}, headers=server.admin_headers, timeout=300
        )
        response.raise_for_status()
        return [doc["_id"] for doc in response.json()["docs"]]

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return [doc_id for chunk in pool.map(send, batches) for doc_id in chunk]


@contextlib.contextmanager
def redis_child() -> Iterator[str]:
    """A redis-server child on a free port (never the shared 6379, whose pub/sub channels other work uses):
    yields its URL, stopped afterwards."""
    import redis

    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="trellis-bench-redis-") as folder:
        command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        child = subprocess.Popen([*command, "--dir", folder], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    redis.Redis(port=port, socket_connect_timeout=1).ping()
                    break
                except redis.ConnectionError:
                    if time.monotonic() > deadline or child.poll() is not None:
                        raise RuntimeError("redis-server did not start") from None
                    time.sleep(0.05)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            child.terminate()
            child.wait(10)


def callgrind_prefix(folder: Path) -> tuple[str, ...]:
    """The command that runs a server under callgrind (``serve``'s ``prefix``), its counts dumped into
    ``folder``; ``Callgrind`` reads them."""
    return ("valgrind", "--tool=callgrind", f"--callgrind-out-file={folder}/callgrind.out.%p", "--dump-line=no")


class Callgrind:
    """The counters of one process under callgrind (``callgrind_prefix``): ``zero()``, then ``dump()``
    returns the instructions executed since (all threads; eventlet's green threads are one of them)."""

    def __init__(self, pid: int, folder: Path, host: str) -> None:
        self.pid, self.folder, self.dumps = pid, folder, 0
        # valgrind names its control pipes after $HOST, which the server's environment sets to the address
        # it listens on: callgrind_control finds them only with the same value.
        self.env = {k: v for k, v in os.environ.items() if k != "HOST"} | ({"HOST": host} if host else {})

    def _control(self, *args: str) -> None:
        command = ["callgrind_control", *args, str(self.pid)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=self.env)
        if done.returncode or "OK." not in done.stdout:
            raise RuntimeError(f"{' '.join(command)}: {done.stdout} {done.stderr}")

    def zero(self) -> None:
        self._control("--zero")

    def dump(self, label: str) -> int:
        self._control(f"--dump={label}")
        self.dumps += 1
        newest = max(self.folder.glob("callgrind.out.*"), key=lambda p: p.stat().st_mtime_ns)
        match = re.search(r"^summary:\s+(\d+)", newest.read_text(errors="replace"), re.M)
        if match is None:
            raise RuntimeError(f"no summary in {newest}")
        return int(match.group(1))


@contextlib.contextmanager
def ceiling_server(prefix: tuple[str, ...] = ()) -> Iterator[Server]:
    """A minimal Flask app with one JSON route, served exactly like Trellis: ``trellis.server.serve.serve``
    (eventlet, its HTTP parser and TCP_NODELAY, Socket.IO's middleware), one process (under ``prefix``,
    as ``serve``)."""
    port = _free_port()
    code = (
        "import eventlet; eventlet.monkey_patch()\n"
        "from flask import Flask\n"
        "from flask_socketio import SocketIO\n"
        "app = Flask('ceiling')\n"
        "@app.get('/item')\n"
        "def item():\n"
        "    return {'_id': 'abc', 'title': 'hello', 'price': 10}\n"
        "SocketIO(app, async_mode='eventlet')\n"
        "from trellis.server.serve import serve\n"
        f"serve(app, '127.0.0.1', {port})\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "ceiling.log"
        with open(log, "wb") as out:
            process = subprocess.Popen([*prefix, sys.executable, "-c", code], stdout=out, stderr=subprocess.STDOUT)
            try:
                url = f"http://127.0.0.1:{port}"
                _wait(url + "/item", process, log, 600 if prefix else 60)
                yield Server(url, process, "", {"HOST": os.environ.get("HOST", "")})
            finally:
                process.terminate()
                process.wait(10)


_LUA_REQUEST = """
wrk.method = {method}
wrk.body = {body}
{headers}
"""

# Lua that lets each request pick the next path from a file (e.g. many document ids), from a start chosen here
# (wrk never seeds Lua's math.random): a measured run does not replay its warm-up's paths, whose rows it has
# just read into the caches.
_LUA_PATHS = """
local paths = {{}}
for line in io.lines({paths_file}) do paths[#paths + 1] = line end
local i = {start}
request = function()
  i = i + 1
  return wrk.format(nil, paths[(i % #paths) + 1])
end
"""


def wrk(
    url: str,
    *,
    connections: int = 16,
    duration: int = 10,
    threads: int = 2,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: Any = None,
    paths: list[str] | None = None,
) -> dict[str, float]:
    """Run wrk against ``url``; returns requests/s, latency p50/p90/p99 (ms), errors."""
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install wrk (make bench does it)")
    headers = dict(headers or {})
    if body is not None and not isinstance(body, str):
        body = json.dumps(body)
        headers.setdefault("Content-Type", "application/json")
    lua_headers = "\n".join(f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in headers.items())
    script = _LUA_REQUEST.format(
        method=json.dumps(method), body=json.dumps(body) if body else "nil", headers=lua_headers
    )
    with tempfile.TemporaryDirectory() as tmp:
        if paths:
            paths_file = Path(tmp) / "paths.txt"
            paths_file.write_text("\n".join(paths))
            script += _LUA_PATHS.format(paths_file=json.dumps(str(paths_file)), start=random.randrange(len(paths)))
        script_file = Path(tmp) / "req.lua"
        script_file.write_text(script)
        result = subprocess.run(
            [
                "wrk",
                "-t",
                str(threads),
                "-c",
                str(connections),
                "-d",
                f"{duration}s",
                "--latency",
                "-s",
                str(script_file),
                url,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
    return parse_wrk(result.stdout)


def _ms(value: str) -> float:
    number, unit = re.match(r"([\d.]+)(us|ms|s|m)", value).groups()
    return float(number) * {"us": 0.001, "ms": 1, "s": 1000, "m": 60000}[unit]


def parse_wrk(output: str) -> dict[str, float]:
    stats: dict[str, float] = {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))}
    for pct in ("50", "90", "99"):
        match = re.search(rf"^\s+{pct}%\s+(\S+)", output, re.M)
        stats[f"p{pct}_ms"] = round(_ms(match.group(1)), 2) if match else float("nan")
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output)
    stats["non_2xx"] = float(non2xx.group(1)) if non2xx else 0.0
    stats["socket_errors"] = float(sum(int(x) for x in errors.groups())) if errors else 0.0
    stats["rps"] = round(stats["rps"], 1)
    return stats


def median_interval(values: list[float], confidence: float = 0.9) -> tuple[float, float, float]:
    """The order statistics that bracket the median of ``values`` with at least ``confidence`` (the sign
    test: each round is above the true median with probability ½, whatever a round's distribution), and
    the coverage they give; with too few rounds, the widest pair (min, max) and its lower coverage.

    Why: on a shared 2-core machine a round's Trellis ÷ Parse moves by ±15% (0.86–1.25 in one run of 8
    rounds, 2026-11-28), so a median alone cannot say whether a goal of 1.0 is met; ``[x₂, x₇]`` of 8 rounds
    covers the median with 93%."""
    ordered = sorted(values)
    n = len(ordered)
    tail = [math.comb(n, i) / 2**n for i in range(n + 1)]  # P(exactly i rounds below the median)
    k = 1  # x_k … x_(n-k+1) misses the median with probability 2 * P(B < k)
    while k < n // 2 and 1 - 2 * sum(tail[: k + 1]) >= confidence:
        k += 1
    return ordered[k - 1], ordered[n - k], 1 - 2 * sum(tail[:k])


def paired_line(
    number: int, name: str, first: tuple[str, dict[str, float]], second: tuple[str, dict[str, float]]
) -> str:
    """One line of progress for a paired run: each side's req/s, foreign CPU and non-2xx answers, and
    the first side's req/s as a ratio to the second's."""
    sides = ", ".join(
        f"{label} {s['rps']} req/s (foreign {s['foreign_pct']:.0f}%, non-2xx {int(s['non_2xx'])})"
        for label, s in (first, second)
    )
    return f"round {number} {name}: {sides} → {first[1]['rps'] / second[1]['rps']:.2f}×"


def table(rows: list[tuple[str, dict[str, float]]]) -> str:
    """Markdown table of named wrk results."""
    lines = ["| case | req/s | p50 ms | p90 ms | p99 ms | non-2xx |", "|---|---:|---:|---:|---:|---:|"]
    for name, s in rows:
        lines.append(f"| {name} | {s['rps']} | {s['p50_ms']} | {s['p90_ms']} | {s['p99_ms']} | {int(s['non_2xx'])} |")
    return "\n".join(lines)


def explain_plain_and_prepared(cursor: Any, sql: str, parameters: Any) -> tuple[str, str]:
    """``EXPLAIN (ANALYZE, BUFFERS)`` of a statement the server ran (psycopg2's SQL and parameters), as
    it was sent before statements were prepared, and as the server runs it now: ``PREPARE`` once
    (``trellis.statements.prepared_form``), seven runs so PostgreSQL settles on its plan, then the
    ``EXECUTE``. The second of two runs each."""
    from trellis.statements import prepared_form

    for _ in range(2):
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, parameters)
        plain = "\n".join(row[0] for row in cursor.fetchall())
    prepared = prepared_form(sql)
    cursor.execute("DEALLOCATE ALL")
    cursor.execute(prepared.prepare, parameters)
    for _ in range(7):
        cursor.execute(prepared.execute, parameters)
    for _ in range(2):
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + prepared.execute, parameters)
        after = "\n".join(row[0] for row in cursor.fetchall())
    # What PostgreSQL's generic plan would cost where it keeps planning per run (plan_cache_mode=auto
    # chooses a custom plan when the generic one's estimate is higher): measured, not configured.
    cursor.execute("SET plan_cache_mode = force_generic_plan")
    for _ in range(2):
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + prepared.execute, parameters)
        generic = [row[0] for row in cursor.fetchall()]
    cursor.execute("RESET plan_cache_mode")
    cursor.execute("DEALLOCATE ALL")
    timings = [line.strip() for line in generic if line.startswith(("Planning Time", "Execution Time"))]
    after += "\n\nThe generic plan forced (plan_cache_mode = force_generic_plan): " + ", ".join(timings)
    return cursor.mogrify(sql, parameters).decode() + "\n\n" + plain, prepared.execute + "\n\n" + after


def interpreter() -> str:
    """The Python the benchmark's servers run on (they are started with ``sys.executable``): its version and
    the interpreter behind the virtualenv. The build matters: on one machine Debian's CPython 3.11.2 spent
    2–13% less CPU per request than pyenv's default build of 3.11.7, which has no PGO or LTO (peer.md)."""
    return f"{platform.python_implementation()} {platform.python_version()} ({os.path.realpath(sys.executable)})"


def report_header(title: str, command: str, revision: str, load: str) -> list[str]:
    """The first lines of a benchmark's report: what ran, at which revision, on what machine, and how the
    report shows the load of others' work on it (``load``)."""
    return [
        f"# {title}",
        "",
        f"Command: `{command}` (revision `{revision}`). Machine: {os.cpu_count()} cores, {platform.machine()}, "
        f"{interpreter()}, shared with other engineers' work ({load}).",
        "",
    ]


@contextlib.contextmanager
def checkout(revision: str) -> Iterator[str]:
    """A worktree of ``revision``; yields the PYTHONPATH that makes a server import the core and every
    module from it instead of this tree (the virtualenv's editable installs come after PYTHONPATH)."""
    with tempfile.TemporaryDirectory(prefix="trellis-base-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), revision], check=True)
        try:
            yield os.pathsep.join(
                [str(tree / "src"), *sorted(str(p) for p in (tree / "plugins").iterdir() if p.is_dir())]
            )
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=True)
