"""Delivery of notifications to device tokens: the outbox (delivers nothing) and FCM's HTTP v1 API.

A provider takes the whole batch and answers one :class:`Outcome` per token, in order; it never raises
for a delivery problem (the caller records every outcome, then decides the HTTP answer).
"""

from __future__ import annotations

import hashlib
import logging
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import requests
from google.auth import exceptions as google_exceptions
from google.auth.transport.requests import Request as GoogleAuthRequest
from google.oauth2 import service_account
from requests.adapters import HTTPAdapter

from .models import FAILED, SENT

log = logging.getLogger(__name__)

FCM_SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
# FCM's v1 API takes one message per request (its batch endpoint is gone): fan out in parallel.
FCM_CONCURRENCY = 16
FCM_TIMEOUT_SECONDS = 10

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Notification:
    title: str
    body: str
    data: dict[str, str]


@dataclass(frozen=True)
class Outcome:
    status: str
    provider_message_id: str | None = None
    error: str | None = None
    token_invalid: bool = False  # the provider says this device token is dead: forget it
    reached: bool = True  # False when the provider could not be reached or authenticated at all


class Provider(Protocol):
    name: str

    def deliver(self, tokens: Sequence[str], notification: Notification) -> list[Outcome]: ...


class OutboxProvider:
    """The default: the outbox rows are the whole delivery (``GET /admin/pushNotifications/outbox``)."""

    name = "outbox"

    def deliver(self, tokens: Sequence[str], notification: Notification) -> list[Outcome]:
        return [Outcome(SENT)] * len(tokens)


class FcmClient:
    """FCM HTTP v1 with a service account: one HTTP session and one cached OAuth 2.0 access token.

    Kept per process (see :class:`PushState`) so consecutive sends reuse connections and the token;
    google-auth signs the JWT grant and exchanges it at ``tokenUri``.
    """

    name = "firebase"

    def __init__(self, settings: dict[str, Any]) -> None:
        info = {
            "type": "service_account",
            "project_id": settings["projectId"],
            "client_email": settings["clientEmail"],
            "private_key": settings["privateKey"],
            "token_uri": settings["tokenUri"],
        }
        self._credentials = service_account.Credentials.from_service_account_info(info, scopes=[FCM_SCOPE])
        self.url = f"{settings['baseUrl'].rstrip('/')}/v1/projects/{settings['projectId']}/messages:send"
        self.session = requests.Session()
        adapter = HTTPAdapter(pool_connections=2, pool_maxsize=FCM_CONCURRENCY)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self._lock = threading.Lock()

    def access_token(self, stale: str | None = None) -> str:
        """A valid access token; ``stale`` is one FCM just refused, so a new one is fetched."""
        with self._lock:
            if not self._credentials.valid or self._credentials.token == stale:
                self._credentials.refresh(GoogleAuthRequest(self.session))
            return self._credentials.token

    def deliver(self, tokens: Sequence[str], notification: Notification) -> list[Outcome]:
        try:
            access_token = self.access_token()
        except (google_exceptions.RefreshError, google_exceptions.TransportError) as exc:
            reason = f"FCM access token could not be obtained: {_short(exc)}"
            log.warning("%s", reason)
            return [Outcome(FAILED, error=reason, reached=False)] * len(tokens)
        return parallel_map(lambda token: self._send_one(token, notification, access_token), tokens, FCM_CONCURRENCY)

    def _send_one(self, token: str, notification: Notification, access_token: str) -> Outcome:
        message: dict[str, Any] = {
            "token": token,
            "notification": {"title": notification.title, "body": notification.body},
        }
        if notification.data:
            message["data"] = notification.data
        try:
            response = self._post(message, access_token)
            if response.status_code == 401:  # revoked or expired early: one new token, one retry
                response = self._post(message, self.access_token(stale=access_token))
        except (google_exceptions.RefreshError, google_exceptions.TransportError) as exc:
            return Outcome(FAILED, error=f"FCM access token could not be obtained: {_short(exc)}", reached=False)
        except requests.RequestException as exc:
            return Outcome(FAILED, error=f"FCM could not be reached: {exc.__class__.__name__}", reached=False)
        if response.status_code == 200:
            return Outcome(SENT, provider_message_id=_json(response).get("name"))
        return _failure(response)

    def _post(self, message: dict[str, Any], access_token: str) -> requests.Response:
        return self.session.post(
            self.url,
            json={"message": message},
            headers={"Authorization": f"Bearer {access_token}"},
            timeout=FCM_TIMEOUT_SECONDS,
        )


def _failure(response: requests.Response) -> Outcome:
    """FCM's error answer → Outcome; dead tokens (UNREGISTERED, INVALID_ARGUMENT on the token) are flagged."""
    error = _json(response).get("error") or {}
    details = error.get("details") or []
    fcm_code = next((d.get("errorCode") for d in details if d.get("errorCode")), None)
    violations = [v.get("field") for d in details for v in d.get("fieldViolations") or []]
    status = error.get("status") or str(response.status_code)
    token_invalid = fcm_code == "UNREGISTERED" or (
        (fcm_code or status) == "INVALID_ARGUMENT" and "message.token" in violations
    )
    reason = f"FCM answered {response.status_code} {fcm_code or status}: {error.get('message') or response.reason}"
    return Outcome(FAILED, error=reason, token_invalid=token_invalid)


def _json(response: requests.Response) -> dict[str, Any]:
    try:
        payload = response.json()
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


def _short(exc: Exception) -> str:
    text = str(exc.args[0]) if exc.args else exc.__class__.__name__
    return text[:300]


def parallel_map(func: Callable[[T], R], items: Iterable[T], workers: int) -> list[R]:
    """``[func(item) …]`` with up to ``workers`` running at once, in the server's concurrency model.

    Under eventlet (the production server) green threads; otherwise a thread pool.
    """
    items = list(items)
    if len(items) <= 1:
        return [func(item) for item in items]
    eventlet = sys.modules.get("eventlet")  # only the server imports it; never import it from here
    if eventlet is not None and eventlet.patcher.is_monkey_patched("thread"):
        return list(eventlet.GreenPool(min(workers, len(items))).imap(func, items))
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        return list(pool.map(func, items))


class PushState:
    """What the module keeps per app and process: the FCM client of the current settings."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fcm: tuple[str, FcmClient] | None = None

    def fcm(self, settings: dict[str, Any]) -> FcmClient:
        key = hashlib.sha256(repr(sorted(settings.items())).encode()).hexdigest()
        with self._lock:
            # A changed configuration gets a new client; a request still using the old one finishes with it.
            if self._fcm is None or self._fcm[0] != key:
                self._fcm = (key, FcmClient(settings))
            return self._fcm[1]


def make_provider(config: dict[str, Any], state: PushState) -> Provider:
    if config["provider"] == "firebase":
        return state.fcm(config["firebase"])
    return OutboxProvider()
