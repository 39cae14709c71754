"""Prometheus metrics, one registry per app: ``GET /metrics``.

What is measured:
- ``trellis_http_requests_total{method, route, status}`` and ``trellis_http_request_duration_seconds{method,
  route}``, taken by a WSGI wrapper around the Flask app. ``route`` is the URL rule
  (``/database/<string:schemaName>/<string:docId>``), never the raw path, so ids never become labels;
  a path no rule matches is ``unmatched``. Socket.IO traffic (``/realtime``) is not an HTTP request here.
- ``trellis_socketio_connections{namespace}`` and ``trellis_db_pool_checked_out``, read when scraped.
- the modules' own counters, declared through :func:`counter`.

Several processes: every Trellis process serves its own port (see README "Monitoring"), and Prometheus
scrapes each one as its own target; the registry is per process and per app, never the library's global one.
"""

from __future__ import annotations

import gc
import hmac
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from flask import Flask, Response, current_app, request
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from .credentials import ADMIN_SECURITY, require_admin
from .errors import ErrorSchema
from .http import Blueprint

UNMATCHED = "unmatched"
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Seconds; most API answers take 1-50 ms, uploads and provider calls up to seconds.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """The metrics of one app (``app.extensions["trellis"].metrics``)."""

    def __init__(self, app: Flask) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "trellis_http_requests", "HTTP requests answered", ("method", "route", "status"), registry=self.registry
        )
        self.duration = Histogram(
            "trellis_http_request_duration_seconds",
            "Time to produce an HTTP response (streamed bodies excluded)",
            ("method", "route"),
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_LiveCollector(app))
        self._counters: dict[str, tuple[Counter, tuple[str, ...]]] = {}  # name → (counter, its labels)
        self._lock = threading.Lock()
        # Label children per (method, rule, status): .labels() costs a few microseconds per call.
        self._request_children: dict[tuple[str, str, str], Any] = {}
        self._duration_children: dict[tuple[str, str], Any] = {}

    def counter(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> Counter:
        """The counter ``name``, created on first use; the same name must keep the same labels."""
        labels = tuple(labelnames)
        found = self._counters.get(name)
        if found is None:
            with self._lock:
                found = self._counters.get(name)
                if found is None:
                    found = Counter(name, documentation, labels, registry=self.registry), labels
                    self._counters[name] = found
        if found[1] != labels:
            raise ValueError(f"metric {name} is declared with labels {found[1]}, not {labels}")
        return found[0]

    def observe(self, method: str, route: str, status: str, seconds: float) -> None:
        key = (method, route, status)
        child = self._request_children.get(key)
        if child is None:
            child = self._request_children.setdefault(key, self.requests.labels(method, route, status))
        child.inc()
        timed = self._duration_children.get((method, route))
        if timed is None:
            timed = self._duration_children.setdefault((method, route), self.duration.labels(method, route))
        timed.observe(seconds)

    def exposition(self, accept: str | None = None) -> tuple[bytes, str]:
        """The registry in the format the scraper's ``Accept`` header asks for (text 0.0.4 by default)."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type


class MetricsMiddleware:
    """Counts and times every request the Flask app answers (WSGI: no Flask hook on the hot path)."""

    def __init__(self, wsgi_app: Any, metrics: Metrics) -> None:
        self.wsgi_app = wsgi_app
        self.metrics = metrics

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        started = perf_counter()
        status = "500"  # what a client sees when the app raised instead of answering
        route = UNMATCHED

        def capture(status_line: str, headers: Any, exc_info: Any = None) -> Any:
            # Flask calls this inside the request context, where its request still knows the matched rule
            # (Flask drops the request from the environ once the context ends).
            nonlocal status, route
            status = status_line[:3]
            request = environ.get("werkzeug.request")
            rule = request.url_rule if request is not None else None
            if rule is not None:
                route = rule.rule
            return start_response(status_line, headers, exc_info)

        try:
            return self.wsgi_app(environ, capture)
        finally:
            method = environ.get("REQUEST_METHOD", "")
            self.metrics.observe(method if method in _METHODS else "other", route, status, perf_counter() - started)


class _LiveCollector(Collector):
    """Gauges read from the live objects when scraped: nothing to update per request."""

    def __init__(self, app: Flask) -> None:
        self.app = app

    def describe(self) -> list[GaugeMetricFamily]:
        return list(self._families())

    def collect(self) -> Iterator[GaugeMetricFamily]:
        trellis = self.app.extensions.get("trellis")
        pool, connections, frozen = self._families()
        if trellis is not None:
            checked_out = getattr(trellis.engine.pool, "checkedout", None)
            pool.add_metric([], checked_out() if checked_out is not None else 0)
            for namespace, count in socketio_connections(trellis.socketio):
                connections.add_metric([namespace], count)
        frozen.add_metric([], gc.get_freeze_count())
        yield pool
        yield connections
        yield frozen

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily("trellis_db_pool_checked_out", "Database connections checked out of the pool"),
            GaugeMetricFamily(
                "trellis_socketio_connections", "Open Socket.IO connections of this process", labels=["namespace"]
            ),
            GaugeMetricFamily(
                "trellis_gc_frozen_objects",
                "Objects made at start-up and left out of the garbage collector's passes (trellis.server.serve)",
            ),
        )


def socketio_connections(socketio: Any) -> list[tuple[str, int]]:
    """(namespace, connected sockets in this process) for every namespace served."""
    server = getattr(socketio, "server", None)
    if server is None:
        return []
    namespaces = set(server.namespace_handlers) | {"/"}
    rooms = server.manager.rooms
    return [(ns, len(rooms.get(ns, {}).get(None, {}))) for ns in sorted(namespaces)]


def counter(name: str, documentation: str, labelnames: Sequence[str] = ()) -> Counter:
    """A counter in the current app's registry (created on first use); see :class:`ModuleCounter`."""
    return current_app.extensions["trellis"].metrics.counter(name, documentation, labelnames)


@dataclass(frozen=True)
class ModuleCounter:
    """A module's counter, declared once at import and counted in the current app's registry::

        SENT = ModuleCounter("trellis_email_sent_total", "Emails handed to a provider", ("provider", "status"))
        SENT.inc(provider="smtp", status="sent")

    The declaration holds no value: every app (and every test app) has its own counter.
    """

    name: str
    documentation: str
    labelnames: tuple[str, ...] = ()

    def inc(self, amount: float = 1, **labels: str) -> None:
        if amount:
            counter(self.name, self.documentation, self.labelnames).labels(**labels).inc(amount)


# --- GET /metrics ----------------------------------------------------------------------------------

blp = Blueprint("metrics", __name__, description="Prometheus metrics of this process")


def _authorise() -> None:
    """``Authorization: Bearer $TRELLIS_METRICS_TOKEN`` (a scraper's token) or administrator credentials."""
    token = current_app.config.get("METRICS_TOKEN")
    sent = _bearer()
    if token and sent is not None and hmac.compare_digest(sent.encode(), str(token).encode()):
        return
    require_admin()


def _bearer() -> str | None:
    scheme, _, value = request.environ.get("HTTP_AUTHORIZATION", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


@blp.route("/metrics", methods=["GET"])
@blp.alt_response(401, schema=ErrorSchema, description="Missing or invalid credentials")
@blp.alt_response(403, schema=ErrorSchema, description="A user token is not enough")
@blp.doc(
    security=ADMIN_SECURITY,
    responses={
        "200": {
            "description": "Prometheus text exposition format",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    },
)
def metrics() -> Response:
    """Prometheus metrics of this process (admin credentials or the Bearer `TRELLIS_METRICS_TOKEN`)."""
    _authorise()
    body, content_type = current_app.extensions["trellis"].metrics.exposition(request.headers.get("Accept"))
    return Response(body, content_type=content_type)
