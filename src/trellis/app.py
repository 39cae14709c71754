"""The application factory: settings → database → API → modules (in dependency order)."""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from inspect import CO_COROUTINE
from types import FunctionType
from typing import Any

import pluggy
from flask import Flask, Request, g
from flask.cli import AppGroup
from flask.sessions import NullSession, SecureCookieSessionInterface
from flask_jwt_extended import JWTManager
from flask_socketio import SocketIO
from limits.strategies import RateLimiter
from sqlalchemy.engine import Engine
from werkzeug.middleware.proxy_fix import ProxyFix

from . import audit, connections, current, db, errors, events, reads, routes
from .cache import Generations, token_key
from .cli import trellis_cli
from .cors import init_cors
from .credentials import identify
from .errors import bad_request, not_found
from .hooks import make_manager
from .http import apply_body_limit
from .jsonbody import StrictJSONProvider, TrellisRequest, parse_request_body
from .metrics import Metrics, MetricsMiddleware
from .metrics import blp as metrics_blp
from .module_config import ConfigStore
from .modules import Module, load_modules, resolve
from .openapi import OpenAPIProvider, TrellisApi, init_api
from .project import routes as project_routes
from .ratelimit import init_limiter
from .reads import ReadConnections, ReadProvider
from .realtime import init_socketio
from .server.safety import SafetyNet
from .settings import instance_path, load_module_settings, load_settings
from .shared_redis import redis_client

log = logging.getLogger("trellis")

try:
    __version__ = version("trellis")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.0.0"

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


@dataclass
class Trellis:
    """What the host keeps per app, at ``app.extensions["trellis"]``."""

    modules: list[Module]
    engine: Engine
    api: TrellisApi
    configs: ConfigStore
    generations: Generations
    hooks: pluggy.PluginManager
    limiter: RateLimiter
    metrics: Metrics
    socketio: SocketIO | None = None
    reads: ReadProvider | None = None  # where reads that need no transaction run (trellis.reads)
    openapi_providers: list[OpenAPIProvider] = field(default_factory=list)

    def module(self, name: str) -> Module | None:
        return next((m for m in self.modules if m.name == name), None)


def create_app(config: dict[str, Any] | None = None, modules: Iterable[Module] | None = None) -> Flask:
    """Build a Trellis app.

    ``config`` overrides settings (tests); ``modules`` replaces entry-point discovery (tests of the
    loader); otherwise every installed module, filtered by ``TRELLIS_MODULES``, is loaded.
    """
    app = _Flask("trellis", instance_path=str(instance_path()))
    app.request_class = TrellisRequest
    app.json = StrictJSONProvider(app)
    load_settings(app, config)
    _configure_logging(app)
    proxies = int(app.config["PROXY_COUNT"])
    if proxies:
        # Client address (rate limits) and the address built URLs use (storage links …): scheme, host, port.
        app.wsgi_app = ProxyFix(  # type: ignore[method-assign]
            app.wsgi_app, x_for=proxies, x_proto=proxies, x_host=proxies, x_port=proxies
        )
    # An explicit module list (tests of the loader) is taken as given; discovery honours the allow-list.
    loaded = resolve(modules) if modules is not None else load_modules(app.config["MODULES"])
    load_module_settings(app, loaded, config)

    JWTManager(app)
    # An API of bearer tokens keeps no cookie session: skip Flask's per-request signing set-up.
    app.session_interface = _NoCookieSessions()
    engine = db.init_app(app)
    reads.init_app(app)
    api = init_api(app, __version__)
    errors.register(app)
    app.after_request(_common_headers)
    init_cors(app)

    trellis = Trellis(
        modules=loaded,
        engine=engine,
        api=api,
        configs=ConfigStore({m.name: m.config_schema for m in loaded}),
        generations=Generations(
            lambda: redis_client(app),
            token_key(engine.url.render_as_string(hide_password=True)),
            shared=app.config["CACHE_SHARED"],
            lease=float(app.config["CACHE_LEASE_SECONDS"]),
        ),
        hooks=make_manager(),
        limiter=init_limiter(app),
        metrics=Metrics(app),
        reads=ReadConnections(engine, max(1, int(app.config["DATABASE_POOL_SIZE"]) // 2)),
    )
    app.extensions["trellis"] = trellis
    events.init_app(app)
    connections.init_app(app)
    api.register_blueprint(routes.blp)
    routes.serve_favicon(app)
    api.register_blueprint(audit.blp)
    api.register_blueprint(project_routes.blp)
    if app.config["METRICS"]:
        api.register_blueprint(metrics_blp)
        # Inside Socket.IO's wrapper (installed next): /realtime polling is not counted as HTTP requests.
        app.wsgi_app = MetricsMiddleware(app.wsgi_app, trellis.metrics)  # type: ignore[method-assign]
    trellis.socketio = socketio = init_socketio(app)
    cli = _cli_group()
    guarded: dict[str, str] = {}
    for module in loaded:
        _install(app, trellis, module, cli, socketio)
        guarded.update({blueprint.name: module.name for blueprint in module.blueprints})
    # One hook, not three: Flask spends a few microseconds on every hook of every request.
    app.before_request(_request_checks(app, _active_guard(guarded, trellis.configs)))
    app.cli.add_command(cli)
    app.wsgi_app = SafetyNet(app.wsgi_app)  # type: ignore[method-assign]  # outermost: Socket.IO's included
    return app


def _install(app: Flask, trellis: Trellis, module: Module, cli: AppGroup, socketio: SocketIO) -> None:
    trellis.configs.defaults(module.name)  # a broken config schema fails at start-up, not on first use
    for hooks in module.hooks:
        trellis.hooks.register(hooks, name=f"{module.name}:{hooks.__class__.__name__}:{id(hooks)}")
    for blueprint in module.blueprints:
        trellis.api.register_blueprint(blueprint)
    for make_namespace in module.socket_namespaces:
        socketio.on_namespace(make_namespace())
    if module.cli is not None:
        cli.add_command(module.cli, module.name)
    if module.openapi_paths is not None:
        trellis.openapi_providers.append(module.openapi_paths)
    if module.init_app is not None:
        module.init_app(app)


def _active_guard(module_of_blueprint: dict[str, str], configs: ConfigStore):
    """Public routes of an inactive module answer 404; admins keep access to configure it."""

    def check_module_active(req: Request) -> None:
        name = module_of_blueprint.get(req.blueprint or "")
        if name is None or configs.is_active(name):
            return
        if req.path.startswith("/admin/"):
            return
        identity = identify()
        if identity is None or not identity.is_admin:
            raise not_found(f"The {name} module is not active")

    return check_module_active


def _cli_group() -> AppGroup:
    group = AppGroup("trellis", help=trellis_cli.help)
    for name, command in trellis_cli.commands.items():
        group.add_command(command, name)
    return group


def new_request_id() -> str:
    """128 random bits as hex. Python's generator, seeded from the OS (and again in a forked child):
    no system call per request, and unlike a counter it tells nothing of traffic."""
    return f"{random.getrandbits(128):032x}"


def _request_checks(app: Flask, check_module_active: Callable[[Request], None]) -> Callable[[], None]:
    """The host's before-request work: a request id, NUL refusal in the URL, the module-active guard,
    the route's body limit, then the one JSON parser over the body (see ``trellis.jsonbody``). The
    request is taken from its proxy once and handed down (``trellis.current``)."""

    def before_request() -> None:
        req = current.request()
        environ = req.environ
        incoming = environ.get("HTTP_X_REQUEST_ID", "")
        g.request_id = incoming if _REQUEST_ID.match(incoming) else new_request_id()
        _refuse_nul_in_url(environ)
        check_module_active(req)
        # A request without a body (most reads) has no limit to apply and nothing to parse, so it skips
        # the two checks (bench/results/core.md#requests-without-a-body).
        if environ.get("CONTENT_LENGTH", "") not in ("", "0") or "HTTP_TRANSFER_ENCODING" in environ:
            apply_body_limit(app, req)
            parse_request_body(req)

    return before_request


def _common_headers(response: Any) -> Any:
    headers = response.headers
    headers["X-Request-ID"] = current.g().get("request_id") or new_request_id()
    # Browsers must take the declared type as it is: a JSON body or an upload never turns into a page.
    headers["X-Content-Type-Options"] = "nosniff"
    return response


class _Flask(Flask):
    def ensure_sync(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """Flask asks this of every hook and view of every request (7 times a get, 9 a create), and answers
        through five calls of ``inspect``; a plain function's code flags say it at once (the override
        Flask's documentation offers). Anything else gets Flask's own answer."""
        if type(func) is FunctionType and not func.__code__.co_flags & CO_COROUTINE:
            return func
        return super().ensure_sync(func)


class _NoCookieSessions(SecureCookieSessionInterface):
    _none = NullSession()  # refuses writes: one serves every request

    def open_session(self, app: Flask, request: Any) -> NullSession:
        return self._none


def _refuse_nul_in_url(environ: dict[str, Any]) -> None:
    """NUL cannot be stored in PostgreSQL text or JSON; refuse it up front on every route (400); the
    JSON parser refuses it in bodies.

    The URL is checked as the server received it (cheaper than decoding it): the path arrives
    percent-decoded, the query string does not, where a NUL is ``%00``.
    """
    query = environ.get("QUERY_STRING", "")
    if "\x00" in environ.get("PATH_INFO", "") or "%00" in query or "\x00" in query:
        raise bad_request("NUL characters are not allowed in the URL")


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            record.request_id = g.get("request_id", "-")
        except RuntimeError:  # outside a request
            record.request_id = "-"
        return True


def _configure_logging(app: Flask) -> None:
    """Log lines carry the request id; configured once per process on the root logger."""
    root = logging.getLogger()
    if not any(isinstance(f, _RequestIdFilter) for h in root.handlers for f in h.filters):
        handler = logging.StreamHandler()
        handler.addFilter(_RequestIdFilter())
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s [%(request_id)s] %(name)s: %(message)s"))
        root.addHandler(handler)
    logging.getLogger("trellis").setLevel(app.config["LOG_LEVEL"])
