"""Live test servers forked from a process that has already imported Trellis.

A live server is a real process serving as ``python wsgi.py`` does. Started from nothing, one spends
seconds of CPU before it answers, most of it imports (eventlet, SQLAlchemy, Socket.IO, every module), and
a suite run starts about a hundred of them per database: most of the suite's CPU
(``bench/results/core.md#test-servers``). So each test process keeps one *fork server*: a child that
patches for eventlet and imports Trellis and its modules once, then forks a server per request. The fork
builds its own app (``create_app``) from its own environment and serves exactly as
``trellis.testing.server`` does (gunicorn's ``preload_app`` works the same way), at a fraction of the
CPU to its first answer.

The fork server speaks JSON lines on its stdin/stdout and never runs eventlet's hub: the hub that
``monkey_patch`` created is closed in each fork, which makes its own. ``TRELLIS_TEST_FORK=0`` starts
servers as plain subprocesses instead.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

POLL_SECONDS = 0.05


def enabled(env: dict[str, str]) -> bool:
    """Whether a server with ``env`` may be forked: eventlet's async mode (what the fork server imported
    under), unless turned off."""
    mode = env.get("TRELLIS_ASYNC_MODE", "eventlet").strip().lower()
    return mode == "eventlet" and os.environ.get("TRELLIS_TEST_FORK", "1") != "0"


class ForkedProcess:
    """The part of :class:`subprocess.Popen` tests use, for a server forked by the fork server (its
    parent, which alone can reap it)."""

    def __init__(self, server: ForkServer, pid: int) -> None:
        self.server = server
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.reap(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"forked server {self.pid}", timeout or 0)
            time.sleep(POLL_SECONDS)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """This test process's fork server, started at its first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._log = Path(os.environ.get("TMPDIR", "/tmp")) / f"trellis-forkserver-{os.getpid()}.log"

    def spawn(self, env: dict[str, str], log_path: Path) -> ForkedProcess:
        log_path.write_bytes(b"")  # there at once, as a Popen's output file would be
        return ForkedProcess(self, self._ask({"spawn": {"env": env, "log": str(log_path)}})["pid"])

    def reap(self, pid: int) -> int | None:
        """The exit code of a forked server that has ended (negative: the signal that ended it), else None."""
        return self._ask({"reap": pid})["code"]

    def close(self) -> None:
        with self._lock:
            if self._process is not None and self._process.poll() is None:
                assert self._process.stdin is not None
                self._process.stdin.close()  # end of input: it exits
                self._process.wait(10)

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            process = self._started()
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(json.dumps(request).encode() + b"\n")
            process.stdin.flush()
            line = process.stdout.readline()
            if not line:
                raise RuntimeError(f"the fork server ended:\n{self._log.read_text(errors='replace')}")
            answer = json.loads(line)
            if "error" in answer:
                raise RuntimeError(answer["error"])
            return answer

    def _started(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            with open(self._log, "wb") as log:
                self._process = subprocess.Popen(
                    [sys.executable, "-m", "trellis.testing.forkserver"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                )
        return self._process


_shared: ForkServer | None = None


def shared() -> ForkServer:
    """The test process's fork server."""
    global _shared
    if _shared is None:
        import atexit

        _shared = ForkServer()
        atexit.register(_shared.close)
    return _shared


# ---- the fork server's own side ----------------------------------------------------------------------


def _serve_forked(env: dict[str, str], log: str) -> None:
    """In the fork: the environment, output and hub of a fresh server process, then serve (never returns)."""
    code = 1
    try:
        out = os.open(log, os.O_WRONLY | os.O_APPEND)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.environ.clear()
        os.environ.update(env)
        from eventlet import hubs

        hubs.get_hub().poll.close()  # the fork server's epoll instance: this process makes its own
        del hubs._threadlocal.hub

        from trellis.testing import server

        server.main()
        code = 0
    except SystemExit as exc:  # as the interpreter ends on one: its message printed, its code
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")
    warnings.filterwarnings("ignore", message="Using fork", category=DeprecationWarning)
    import eventlet

    eventlet.monkey_patch()
    from importlib.metadata import entry_points

    import trellis.testing.server  # noqa: F401  (create_app, serve: what a fork runs)
    from trellis.modules import ENTRY_POINT_GROUP

    for entry in entry_points(group=ENTRY_POINT_GROUP):
        entry.load()
    # Plain blocking calls from here on: eventlet's would run the hub, which every fork would inherit.
    real_os = eventlet.patcher.original("os")
    pending = b""
    while True:
        while b"\n" not in pending:
            chunk = real_os.read(0, 65536)
            if not chunk:
                return
            pending += chunk
        line, pending = pending.split(b"\n", 1)
        request = json.loads(line)
        try:
            if "spawn" in request:
                pid = real_os.fork()
                if pid == 0:
                    _serve_forked(request["spawn"]["env"], request["spawn"]["log"])
                answer: dict[str, Any] = {"pid": pid}
            else:
                pid, status = real_os.waitpid(request["reap"], real_os.WNOHANG)
                answer = {"code": None if pid == 0 else real_os.waitstatus_to_exitcode(status)}
        except OSError as exc:
            answer = {"error": f"{exc.__class__.__name__}: {exc}"}
        real_os.write(1, json.dumps(answer).encode() + b"\n")


if __name__ == "__main__":
    main()
