"""Settings: defaults, ``TRELLIS_*`` environment variables, and secrets kept under ``instance/``."""

from __future__ import annotations

import json
import logging
import os
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from flask import Flask

from . import passwords

log = logging.getLogger(__name__)

# Secrets generated on first start when the environment does not provide them.
GENERATED_SECRETS = ("MASTER_KEY", "SECRET_KEY")

DEFAULTS: dict[str, Any] = {
    "ENV": "development",
    "DATABASE_URL": None,  # computed: SQLite file under the instance folder
    "REDIS_URL": None,
    "MASTER_KEY": None,
    "SECRET_KEY": None,
    "ADMIN_USERNAME": "admin",
    "ADMIN_PASSWORD": None,
    "STORAGE_PATH": None,  # computed: instance/storage
    "ASYNC_MODE": "eventlet",
    "ADMIN_TOKEN_HOURS": 20,
    "MAX_CONTENT_LENGTH": 16 * 1024 * 1024,
    "CORS_ORIGINS": "*",
    "LOG_LEVEL": "INFO",
    # Reverse proxies in front of the app whose X-Forwarded-* headers are trusted (client IP for rate limits).
    "PROXY_COUNT": 0,
    # False: this process is alone on its database; configs and schemas are not re-checked per request.
    "CACHE_SHARED": True,
    # How long a read of the shared change token vouches for this process's caches (writers wait as long).
    "CACHE_LEASE_SECONDS": 0.2,
    # Prometheus metrics at /metrics (false: no per-request counting, /metrics answers 404); a scraper
    # may authenticate with "Authorization: Bearer <METRICS_TOKEN>" instead of admin credentials.
    "METRICS": True,
    "METRICS_TOKEN": None,
    # argon2 cost profile: "default" (RFC 9106 low memory) or "test" (cheapest; refused in production)
    "PASSWORD_PROFILE": "default",
    # The event log keeps events at least this long and at least this many per family (trellis.events).
    "EVENTS_RETENTION_SECONDS": 600,
    "EVENTS_RETENTION_COUNT": 10_000,
    # The public base URL of links mailed to users; unset: the request's, when its host is trusted.
    "PUBLIC_URL": None,
    # Hosts the request's own base URL may come from (Flask's setting; unset: loopback names and HOST).
    "TRUSTED_HOSTS": None,
    # Slow and idle clients (trellis.server.http_protocol.ConnectionGuard): seconds for a request's line and
    # headers, seconds a kept-alive connection waits for its next request, connections per process.
    "HEADER_TIMEOUT": 10,
    "IDLE_TIMEOUT": 75,
    "MAX_CONNECTIONS": 1024,
}
# Settings that must be positive numbers (MAX_CONNECTIONS a whole one).
POSITIVE = ("HEADER_TIMEOUT", "IDLE_TIMEOUT", "MAX_CONNECTIONS")


class SettingsError(RuntimeError):
    """Settings that make start-up impossible (missing secret in production, bad value)."""


def instance_path() -> Path:
    return Path(os.environ.get("TRELLIS_INSTANCE_PATH", Path.cwd() / "instance")).resolve()


def load_settings(app: Flask, overrides: dict[str, Any] | None = None) -> None:
    """Fill ``app.config`` from defaults, ``TRELLIS_*`` variables, then explicit overrides."""
    for key, value in DEFAULTS.items():
        if app.config.get(key) is None:  # Flask pre-sets some keys (MAX_CONTENT_LENGTH …) to None
            app.config[key] = value
    app.config.from_prefixed_env("TRELLIS")
    if overrides:
        app.config.update(overrides)
    folder = Path(app.instance_path)
    if not app.config["DATABASE_URL"]:
        app.config["DATABASE_URL"] = f"sqlite:///{folder / 'trellis.db'}"
    if not app.config["STORAGE_PATH"]:
        app.config["STORAGE_PATH"] = str(folder / "storage")
    _public_address(app)
    if app.config["CACHE_SHARED"] not in (True, False):  # from_prefixed_env decodes true/false only
        raise SettingsError("TRELLIS_CACHE_SHARED must be true or false")
    for key in POSITIVE:
        value = app.config[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise SettingsError(f"TRELLIS_{key} must be a positive number (got {value!r})")
        if key == "MAX_CONNECTIONS" and not isinstance(value, int):
            raise SettingsError(f"TRELLIS_{key} must be a whole number (got {value!r})")
    _ensure_secrets(app, folder)
    for key in GENERATED_SECRETS:  # from_prefixed_env JSON-decodes: a key of digits arrives as an int
        app.config[key] = str(app.config[key])
    if is_production(app) and app.config["PASSWORD_PROFILE"] != "default":
        raise SettingsError("TRELLIS_PASSWORD_PROFILE must be 'default' in production")
    passwords.configure(app.config["PASSWORD_PROFILE"])
    # flask-jwt-extended signs with this key; Flask sessions too.
    app.config["JWT_SECRET_KEY"] = app.config["SECRET_KEY"]


def is_production(app: Flask) -> bool:
    return str(app.config.get("ENV", "")).lower() == "production"


def _public_address(app: Flask) -> None:
    """``TRUSTED_HOSTS`` as a list (the environment gives a comma-separated string, which Flask would read
    letter by letter) and ``PUBLIC_URL`` an absolute http(s) URL without a trailing slash."""
    hosts = app.config["TRUSTED_HOSTS"]
    if isinstance(hosts, str):
        app.config["TRUSTED_HOSTS"] = [host.strip() for host in hosts.split(",") if host.strip()] or None
    public = app.config["PUBLIC_URL"]
    if public:
        parts = urlsplit(str(public))
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
            raise SettingsError("TRELLIS_PUBLIC_URL must be an absolute http(s) URL, e.g. https://api.example.com")
        app.config["PUBLIC_URL"] = str(public).rstrip("/")


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
