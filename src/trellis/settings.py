"""Settings: one declared table of ``TRELLIS_*`` environment variables, read once at start into ``app.config``.

Each :class:`Setting` names a variable (without the ``TRELLIS_`` prefix), its kind (how its text is read and
checked), its default and what it does. :data:`CORE` is the core's table; a module declares its own in
``Module.settings`` and they are read the same way once the module set is known. A value that does not fit
its kind stops the start with a :class:`SettingsError` naming the variable. Secrets missing outside
production are generated once under ``instance/``. The README tables are written from these declarations
(``python -m trellis.settings_doc``).
"""

from __future__ import annotations

import json
import logging
import math
import os
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from flask import Flask

from . import passwords

log = logging.getLogger(__name__)

PREFIX = "TRELLIS_"
# Secrets generated on first start when the environment does not provide them.
GENERATED_SECRETS = ("MASTER_KEY", "SECRET_KEY")


class SettingsError(RuntimeError):
    """Settings that make start-up impossible (missing secret in production, bad value)."""


# ---- kinds: how a value is read (environment text, or a Python value given by a test or a caller) ------

TRUE_WORDS = frozenset({"true", "1", "yes", "on"})
FALSE_WORDS = frozenset({"false", "0", "no", "off"})


def parse_bool(value: Any) -> bool:
    """The one reading of a boolean setting: true/false, 1/0, yes/no, on/off in any case; nothing else."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError(value)


def _whole(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return int(str(value).strip())  # "10.5" and "ten" raise


def _real(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(value)
    number = float(str(value).strip()) if isinstance(value, str) else float(value)
    if not math.isfinite(number):
        raise ValueError(value)
    return number


def _at_least(minimum: float, strictly: bool, read: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def parse(value: Any) -> Any:
        number = read(value)
        if number < minimum or (strictly and number == minimum):
            raise ValueError(value)
        return number

    return parse


def _items(value: Any) -> list[Any]:
    """Comma-separated text, or a list/tuple given as such; blanks dropped."""
    items = value.split(",") if isinstance(value, str) else list(value) if isinstance(value, list | tuple) else [value]
    return [item.strip() if isinstance(item, str) else item for item in items if str(item).strip()]


def _text_list(value: Any) -> list[str] | None:
    return [str(item) for item in _items(value)] or None


def _url(value: Any) -> str | None:
    text = str(value).strip()
    if not text:
        return None
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ValueError(value)
    return text.rstrip("/")


@dataclass(frozen=True)
class Kind:
    """How a setting's value is read: ``parse`` raises ValueError (or TypeError) for a value that does not
    fit; ``label`` is the README's type column and ``expects`` completes "TRELLIS_X must be …"."""

    label: str
    expects: str
    parse: Callable[[Any], Any]


BOOL = Kind("bool", "true or false (also 1/0, yes/no, on/off)", parse_bool)
TEXT = Kind("text", "text", str)
INT = Kind("int ≥ 0", "a whole number, 0 or more", _at_least(0, False, _whole))
COUNT = Kind("int > 0", "a whole number more than 0", _at_least(0, True, _whole))
NUMBER = Kind("number > 0", "a number more than 0", _at_least(0, True, _real))
SECONDS = Kind("seconds > 0", "a number of seconds more than 0", _at_least(0, True, _real))
SECONDS_OR_ZERO = Kind("seconds ≥ 0", "a number of seconds, 0 or more", _at_least(0, False, _real))
SECONDS_LIST = Kind(
    "seconds, comma-separated",
    "a comma-separated list of seconds, each more than 0",
    lambda value: tuple(SECONDS.parse(item) for item in _items(value)),
)
LIST = Kind("list, comma-separated", "a comma-separated list", _text_list)
URL = Kind("URL", "an absolute http(s) URL without query or fragment, e.g. https://api.example.com", _url)


def choice(*options: str) -> Kind:
    """One of ``options``, in any case; the value kept is the option as declared."""
    by_word = {option.lower(): option for option in options}

    def parse(value: Any) -> str:
        return by_word[str(value).strip().lower()]  # KeyError: not one of them

    return Kind(" / ".join(options), "one of " + ", ".join(options), parse)


@dataclass(frozen=True)
class Setting:
    """One ``TRELLIS_<name>`` variable. ``shown``: the default as documented when it is worked out at start
    (a path under the instance folder, a generated secret)."""

    name: str
    kind: Kind
    default: Any
    description: str
    shown: str | None = None

    @property
    def variable(self) -> str:
        return PREFIX + self.name

    def read(self, value: Any) -> Any:
        """``value`` (environment text or a Python value) as this setting's kind; None stays None."""
        if value is None:
            return None
        try:
            return self.kind.parse(value)
        except (ValueError, TypeError, KeyError):
            raise SettingsError(f"{self.variable} must be {self.kind.expects}, not {value!r}") from None

    def value(self, overrides: Mapping[str, Any] | None = None) -> Any:
        """The setting's value: an explicit override, else the environment, else the default."""
        if overrides and overrides.get(self.name) is not None:
            return self.read(overrides[self.name])
        if self.variable in os.environ:
            return self.read(os.environ[self.variable])
        return self.read(self.default)


MIB = 1024 * 1024

CORE: tuple[Setting, ...] = (
    Setting(
        "DATABASE_URL",
        TEXT,
        None,
        "SQLAlchemy URL; production: `postgresql://…` or `postgresql+psycopg://…` (served through psycopg2, "
        "which eventlet makes cooperative)",
        shown="`sqlite:///instance/trellis.db`",
    ),
    Setting(
        "DATABASE_PREPARE",
        BOOL,
        True,
        "PostgreSQL: prepare the hot statements once per connection on the server; `false` behind a pooler "
        "that hands each transaction another server connection (pgbouncer's transaction mode)",
    ),
    Setting(
        "DATABASE_POOL_SIZE",
        COUNT,
        32,
        "PostgreSQL: connections a process keeps for its transactions, opening as many again under load; its "
        "autocommit reads keep half as many (and as many again). A process may hold 3× this, so PostgreSQL's "
        "`max_connections` must cover every process's share (its default of 100 does not cover two processes "
        "at the default)",
    ),
    Setting(
        "REDIS_URL", TEXT, None, "Socket.IO message queue between workers, rate-limit storage, Database list counts"
    ),
    Setting("MASTER_KEY", TEXT, None, "the `masterkey` header value", shown="generated into `instance/`"),
    Setting("SECRET_KEY", TEXT, None, "signs admin and user tokens", shown="generated into `instance/`"),
    Setting("ADMIN_USERNAME", TEXT, "admin", "the first administrator's name"),
    Setting("ADMIN_PASSWORD", TEXT, None, "the first administrator's password", shown="generated"),
    Setting("STORAGE_PATH", TEXT, None, "files of the Storage module's local backend", shown="`instance/storage`"),
    Setting("BACKUP_PATH", TEXT, None, "folder of the backup archives (`trellis.backups`)", shown="`instance/backups`"),
    Setting(
        "INSTANCE_PATH",
        TEXT,
        None,
        "where generated secrets and the SQLite file live (read before the app is built)",
        shown="`./instance`",
    ),
    Setting("ENV", TEXT, "development", "`production` refuses to start without the secrets above"),
    Setting("MODULES", LIST, None, "allow-list of modules to load", shown="all installed"),
    Setting(
        "MIGRATIONS_PATH",
        TEXT,
        None,
        "the Alembic environment of the core's migrations",
        shown="the package's `trellis/migrations`",
    ),
    Setting(
        "ASYNC_MODE",
        choice("eventlet", "gevent", "threading"),
        "eventlet",
        "Flask-SocketIO async mode (`wsgi.py` reads it before anything else, to patch the standard library)",
    ),
    # False: this process is alone on its database; configs and schemas are not re-checked per request.
    Setting(
        "CACHE_SHARED",
        BOOL,
        True,
        "`false` only for a process alone on its database: module configs and schemas are then not "
        "re-checked per request",
    ),
    Setting(
        "CACHE_LEASE_SECONDS",
        SECONDS_OR_ZERO,
        0.2,
        "with Redis: how long a read of the change token vouches for a process's caches; a change of configs, "
        "schemas, team memberships or sessions (sign-out, a revoked session, a blocked or deleted user) waits as "
        "long before it is acknowledged (`0`: one Redis read per request instead)",
    ),
    Setting("ADMIN_TOKEN_HOURS", NUMBER, 20, "admin token lifetime"),
    Setting(
        "MAX_CONTENT_LENGTH",
        COUNT,
        16 * MIB,
        "request body limit in bytes (413 above it), for a `Content-Length` and a chunked body alike",
        shown="16 MiB",
    ),
    # Slow and idle clients (trellis.http_protocol.ConnectionGuard).
    Setting(
        "HEADER_TIMEOUT",
        SECONDS,
        10,
        "seconds for a request's line and headers from its first byte, however slowly they trickle in (then "
        "**408** and the connection is closed); a new connection must send its first byte within as long",
    ),
    Setting(
        "IDLE_TIMEOUT",
        SECONDS,
        75,
        "seconds a kept-alive connection may wait for its next request (above nginx's upstream 60 s, so the "
        "proxy closes first)",
    ),
    Setting(
        "MAX_CONNECTIONS",
        COUNT,
        1024,
        "open connections per process; a new one at the cap closes the connection that has waited longest "
        "for a request or for the rest of its headers (connections inside a request, websockets and event "
        "streams included, are never closed). The open-file limit is raised to this + 256 at start when the "
        "hard limit allows",
    ),
    Setting(
        "TCP_NODELAY",
        BOOL,
        True,
        "`TCP_NODELAY` on accepted connections (`false` only to measure the difference)",
    ),
    Setting("ACCESS_LOG", BOOL, False, "`python wsgi.py` logs a line per request"),
    Setting("CORS_ORIGINS", LIST, "*", "origins allowed by CORS, for every HTTP route and Socket.IO alike"),
    Setting(
        "LOG_LEVEL",
        choice("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
        "INFO",
        "log level; every line carries the request id",
    ),
    # The public base URL of links mailed to users; unset: the request's, when its host is trusted.
    Setting(
        "PUBLIC_URL",
        URL,
        None,
        "the public base URL (`https://api.example.com`) of links mailed to users (password reset, "
        "verification, magic link); the Authentication module's `hostUrl` config wins over it",
    ),
    Setting(
        "TRUSTED_HOSTS",
        LIST,
        None,
        "hosts (Flask's `TRUSTED_HOSTS`; `.example.org` takes every subdomain) the server answers for: any "
        "other `Host` is refused with 400. Without `TRELLIS_PUBLIC_URL`, mailed links use the request's own "
        "host only when it is trusted: these hosts, or, unset, `localhost`, `127.0.0.1`, `::1` and `HOST` (any "
        "other `Host` gets 400 on the routes that mail links)",
    ),
    Setting(
        "PROXY_COUNT",
        INT,
        0,
        "reverse proxies whose `X-Forwarded-For/Proto/Host/Port` headers are trusted: client IP for rate "
        "limits, and the address of built URLs (storage links); with `0` built URLs follow the `Host` header",
    ),
    Setting("RATELIMIT_ENABLED", BOOL, True, "`false` turns every rate limit off"),
    Setting("METRICS", BOOL, True, "Prometheus metrics at `/metrics` (`false`: nothing counted, `/metrics` is 404)"),
    Setting(
        "METRICS_TOKEN",
        TEXT,
        None,
        "a scraper may send `Authorization: Bearer <token>` instead of admin credentials",
    ),
    Setting(
        "PASSWORD_PROFILE",
        choice(*passwords.PROFILES),
        "default",
        "argon2 cost profile: `default` (RFC 9106 low memory) or `test` (cheapest; refused in production)",
    ),
    Setting(
        "EVENTS",
        BOOL,
        True,
        "`false` records no events (only to price the event log): live data, webhooks and replay then see no change",
    ),
    Setting(
        "EVENTS_RETENTION_SECONDS",
        SECONDS,
        600,
        "the event log keeps events at least this long (and at least `TRELLIS_EVENTS_RETENTION_COUNT`)",
    ),
    Setting("EVENTS_RETENTION_COUNT", INT, 10_000, "the event log keeps at least this many events per schema"),
    Setting("REDIS_CONNECT_TIMEOUT", SECONDS, 0.25, "seconds to connect to Redis"),
    Setting("REDIS_TIMEOUT", SECONDS, 0.5, "seconds a Redis command may take"),
    Setting(
        "REDIS_BREAKER_SECONDS",
        SECONDS,
        5,
        "after a failed connection, Redis is not tried again for this long (each command fails at once)",
    ),
)
CORE_BY_NAME = {setting.name: setting for setting in CORE}


def instance_path() -> Path:
    """The instance folder: read before the app (and its config) exists."""
    folder = CORE_BY_NAME["INSTANCE_PATH"].value()
    return Path(folder or Path.cwd() / "instance").resolve()


def core_value(config: Mapping[str, Any], name: str) -> Any:
    """A core setting from a Trellis app's config, or, for a bare Flask app (the benchmarks serve one),
    read from the environment and the table."""
    return config[name] if name in config else CORE_BY_NAME[name].value()


def apply_settings(app: Flask, table: Iterable[Setting], overrides: Mapping[str, Any] | None = None) -> None:
    """Read each setting of ``table`` into ``app.config`` (override, else environment, else default)."""
    for setting in table:
        app.config[setting.name] = setting.value(overrides)


def load_settings(app: Flask, overrides: dict[str, Any] | None = None) -> None:
    """Fill ``app.config`` from the core's table (defaults, ``TRELLIS_*`` variables, then explicit overrides);
    overrides that are not settings (Flask's own keys, ``TESTING`` …) are taken as given."""
    if overrides:
        app.config.update(overrides)
    apply_settings(app, CORE, overrides)
    folder = Path(app.instance_path)
    if not app.config["DATABASE_URL"]:
        app.config["DATABASE_URL"] = f"sqlite:///{folder / 'trellis.db'}"
    if not app.config["STORAGE_PATH"]:
        app.config["STORAGE_PATH"] = str(folder / "storage")
    _ensure_secrets(app, folder)
    if is_production(app) and app.config["PASSWORD_PROFILE"] != "default":
        raise SettingsError("TRELLIS_PASSWORD_PROFILE must be 'default' in production")
    passwords.configure(app.config["PASSWORD_PROFILE"])
    # flask-jwt-extended signs with this key; Flask sessions too.
    app.config["JWT_SECRET_KEY"] = app.config["SECRET_KEY"]


def load_module_settings(app: Flask, modules: Iterable[Any], overrides: Mapping[str, Any] | None = None) -> None:
    """Read the settings the loaded modules declare (``Module.settings``), each name declared once."""
    owners = dict.fromkeys(CORE_BY_NAME, "the core")
    for module in modules:
        for setting in module.settings:
            if setting.name in owners:
                raise SettingsError(f"{setting.variable} is declared by {owners[setting.name]} and by {module.name}")
            owners[setting.name] = module.name
        apply_settings(app, module.settings, overrides)


def is_production(app: Flask) -> bool:
    return str(app.config.get("ENV", "")).lower() == "production"


def _ensure_secrets(app: Flask, folder: Path) -> None:
    missing = [key for key in GENERATED_SECRETS if not app.config.get(key)]
    if not missing:
        return
    if is_production(app):
        names = ", ".join(f"TRELLIS_{key}" for key in missing)
        raise SettingsError(f"TRELLIS_ENV=production needs {names} to be set; refusing to generate secrets")
    stored_file = folder / "secrets.json"
    stored: dict[str, str] = {}
    if stored_file.exists():
        stored = json.loads(stored_file.read_text())
    created = []
    for key in missing:
        if key not in stored:
            stored[key] = secrets.token_urlsafe(32)
            created.append(key)
        app.config[key] = stored[key]
    if created:
        folder.mkdir(parents=True, exist_ok=True)
        stored_file.write_text(json.dumps(stored, indent=2))
        os.chmod(stored_file, 0o600)
        # Printed once, on the start that generated them; never logged afterwards.
        print(f"Trellis generated {', '.join(created)} into {stored_file}")
        if "MASTER_KEY" in created:
            print(f"  master key: {stored['MASTER_KEY']}")
