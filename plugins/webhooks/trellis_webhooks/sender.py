"""One HTTP attempt of a delivery: urllib3 with a 10 s limit, no redirects, a capped response read.

urllib3 is the client ``requests`` is built on; driving it directly halves the CPU of an attempt, and a
delivery's CPU is what the API's reads lose while webhooks are busy (py-spy, ``bench/results/webhooks.md``:
``requests``' own layers, preparing the request, merging environment settings, cookies and the adapter,
were half of each attempt's time in the HTTP client). Nothing of what ``requests`` adds is wanted here:
no proxies or ``.netrc`` from the environment, no cookies, no redirects.

Two connection pools per process (a busy receiver gets keep-alive): the guarded one checks every new
connection's peer address (``targets.check_peer``); the open one is used while the module config sets
``allowPrivateTargets``. A connection the guarded pool keeps was checked when made.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import HTTPError, NewConnectionError, ProtocolError, TimeoutError
from urllib3.util import parse_url

from .settings import SEND_TIMEOUT_SECONDS
from .targets import TargetRefused, check_peer

TIMEOUT_SECONDS = SEND_TIMEOUT_SECONDS
# What is read of an answer: enough for an error message, and a receiver answering with an endless body
# cannot hold a sender.
RESPONSE_CAP_BYTES = 64 * 1024
ERROR_EXCERPT = 300
USER_AGENT = "Trellis-Webhooks/0.1"


@dataclass(frozen=True)
class Outcome:
    delivered: bool
    status: int | None  # the receiver's HTTP status, None when there was no answer
    error: str | None


class _GuardedHTTPConnection(HTTPConnection):
    def _new_conn(self) -> Any:
        sock = super()._new_conn()
        check_peer(sock)
        return sock


class _GuardedHTTPSConnection(HTTPSConnection):
    def _new_conn(self) -> Any:
        sock = super()._new_conn()
        check_peer(sock)  # before the TLS handshake: nothing is sent to a refused peer
        return sock


class _GuardedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _GuardedHTTPConnection


class _GuardedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection


_TIMEOUT = urllib3.Timeout(TIMEOUT_SECONDS)


@functools.lru_cache(maxsize=1024)
def _target(url: str) -> str:
    """The request target (path and query) of a webhook's URL, parsed once."""
    return parse_url(url).request_uri


def _pools(size: int, guarded: bool) -> urllib3.PoolManager:
    manager = urllib3.PoolManager(num_pools=size, maxsize=size, retries=False)
    if guarded:
        manager.pool_classes_by_scheme = {"http": _GuardedHTTPPool, "https": _GuardedHTTPSPool}
    return manager


class Sender:
    """Posts signed bodies; safe to share between the threads of one process."""

    def __init__(self, pool_size: int = 10) -> None:
        self._guarded = _pools(pool_size, guarded=True)
        self._open = _pools(pool_size, guarded=False)

    def post(self, url: str, body: bytes, headers: dict[str, str], allow_private: bool) -> Outcome:
        pools = self._open if allow_private else self._guarded
        deadline = time.monotonic() + TIMEOUT_SECONDS
        try:
            # Straight to the host's pool: PoolManager.request would parse the URL and encode the headers
            # again on every attempt (~15% of an attempt's CPU, py-spy).
            pool = pools.connection_from_url(url)
            response = pool.urlopen(
                "POST",
                _target(url),
                body=body,
                headers={**headers, "User-Agent": USER_AGENT},
                timeout=_TIMEOUT,
                redirect=False,
                retries=False,
                preload_content=False,
                assert_same_host=False,
            )
        except TimeoutError as exc:
            if not isinstance(exc, NewConnectionError):  # urllib3 files a refused connection under timeouts
                return Outcome(False, None, f"No answer within {TIMEOUT_SECONDS:g} s")
            return Outcome(False, None, f"Cannot reach the target: {_reason(exc)}")
        except (HTTPError, OSError) as exc:
            refused = _refusal(exc)
            if refused is not None:
                return Outcome(False, None, str(refused))
            return Outcome(False, None, f"Cannot reach the target: {_reason(exc)}")
        excerpt, complete = "", False
        try:
            excerpt, complete = _read_capped(response, deadline)
        finally:
            if complete:
                response.release_conn()
            else:
                response.close()  # a body left unread: the connection is not reused
        status = response.status
        if 200 <= status < 300:
            return Outcome(True, status, None)
        if 300 <= status < 400:
            return Outcome(False, status, f"Answered {status} (redirects are not followed)")
        if not complete and not excerpt:
            return Outcome(False, status, f"Answered {status}")
        return Outcome(False, status, f"Answered {status}: {excerpt[:ERROR_EXCERPT]}".rstrip(": "))


def _read_capped(response: urllib3.BaseHTTPResponse, deadline: float) -> tuple[str, bool]:
    """Read at most RESPONSE_CAP_BYTES of the body before ``deadline``: (its start as text, whole body read)."""
    chunks: list[bytes] = []
    size = 0
    try:
        while size < RESPONSE_CAP_BYTES and time.monotonic() < deadline:
            chunk = response.read1(RESPONSE_CAP_BYTES - size)  # what has arrived, not a full buffer (a trickle ends)
            if not chunk:
                return _text(chunks), True
            chunks.append(chunk)
            size += len(chunk)
    except Exception:  # a broken or undecodable body: the status is the answer that counts
        return _text(chunks), False
    return _text(chunks), False


def _text(chunks: list[bytes]) -> str:
    return b"".join(chunks)[: ERROR_EXCERPT * 4].decode("utf-8", "replace").strip()


def _refusal(exc: BaseException) -> TargetRefused | None:
    """The TargetRefused somewhere inside the exceptions urllib3 wraps around it."""
    seen: set[int] = set()
    pending: list[Any] = [exc]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, TargetRefused):
            return current
        if isinstance(current, BaseException):
            pending.extend([current.__cause__, current.__context__, getattr(current, "reason", None), *current.args])
    return None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, (OSError, ProtocolError, NewConnectionError)):
        return "connection failed (refused, reset, or the name does not resolve)"
    return exc.__class__.__name__
