"""One HTTP attempt of a delivery: ``requests`` with a 10 s limit, no redirects, a capped response read.

Two sessions per process (connections are pooled, so a busy receiver gets keep-alive): the guarded one
checks every new connection's peer address (``targets.check_peer``); the open one is used while the
module config sets ``allowPrivateTargets``. A connection the guarded session keeps was checked when made.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from http.cookiejar import DefaultCookiePolicy
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from .targets import TargetRefused, check_peer

TIMEOUT_SECONDS = 10.0
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


class _GuardedAdapter(HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _GuardedHTTPPool, "https": _GuardedHTTPSPool}


def _session(adapter: HTTPAdapter) -> requests.Session:
    session = requests.Session()
    session.trust_env = False  # no proxy or .netrc from the environment: the peer is the target itself
    session.cookies.set_policy(DefaultCookiePolicy(allowed_domains=[]))  # receivers' cookies are not kept
    session.headers = {"User-Agent": USER_AGENT}  # type: ignore[assignment]
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


class Sender:
    """Posts signed bodies; safe to share between the threads of one process."""

    def __init__(self, pool_size: int = 10) -> None:
        self._guarded = _session(_GuardedAdapter(pool_connections=pool_size, pool_maxsize=pool_size))
        self._open = _session(HTTPAdapter(pool_connections=pool_size, pool_maxsize=pool_size))

    def post(self, url: str, body: bytes, headers: dict[str, str], allow_private: bool) -> Outcome:
        session = self._open if allow_private else self._guarded
        deadline = time.monotonic() + TIMEOUT_SECONDS
        try:
            with session.post(
                url, data=body, headers=headers, timeout=TIMEOUT_SECONDS, allow_redirects=False, stream=True
            ) as response:
                excerpt, complete = _read_capped(response, deadline)
        except requests.Timeout:
            return Outcome(False, None, f"No answer within {TIMEOUT_SECONDS:g} s")
        except requests.RequestException as exc:
            refused = _refusal(exc)
            if refused is not None:
                return Outcome(False, None, str(refused))
            return Outcome(False, None, f"Cannot reach the target: {_reason(exc)}")
        status = response.status_code
        if 200 <= status < 300:
            return Outcome(True, status, None)
        if 300 <= status < 400:
            return Outcome(False, status, f"Answered {status} (redirects are not followed)")
        if not complete and not excerpt:
            return Outcome(False, status, f"Answered {status}")
        return Outcome(False, status, f"Answered {status}: {excerpt[:ERROR_EXCERPT]}".rstrip(": "))


def _read_capped(response: requests.Response, deadline: float) -> tuple[str, bool]:
    """Read at most RESPONSE_CAP_BYTES of the body before ``deadline``: (its start as text, whole body read)."""
    raw = response.raw
    chunks: list[bytes] = []
    size = 0
    try:
        while size < RESPONSE_CAP_BYTES and time.monotonic() < deadline:
            chunk = raw.read1(RESPONSE_CAP_BYTES - size)  # what has arrived, not a full buffer (a trickle ends)
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
    """The TargetRefused somewhere inside the exceptions requests and urllib3 wrap around it."""
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


def _reason(exc: requests.RequestException) -> str:
    if isinstance(exc, requests.ConnectionError):
        return "connection failed (refused, reset, or the name does not resolve)"
    return exc.__class__.__name__
