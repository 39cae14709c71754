"""The public base URL of this server, for absolute links that leave the request they were built in.

A link mailed to someone (a password reset, a magic link …) must never take its host from a header the
sender of the request chose: ``Host: attacker.example`` would mail a genuine token to a page of the
attacker's. The base URL is ``TRELLIS_PUBLIC_URL`` when set; otherwise the request's own base URL, but
only when its host is trusted: ``TRELLIS_TRUSTED_HOSTS`` (Flask's ``TRUSTED_HOSTS``), by default the
loopback names and the ``HOST`` the server listens on. Any other host is refused with 400.
"""

from __future__ import annotations

import os
import re

from flask import Flask, current_app, request

from .errors import bad_request

LOOPBACK = ("localhost", "127.0.0.1", "::1")


def trusted_hosts(app: Flask) -> list[str]:
    """``TRUSTED_HOSTS`` when set, else the loopback names and the configured ``HOST``."""
    configured = app.config.get("TRUSTED_HOSTS")
    if configured:
        return [str(host) for host in configured]
    listen = os.environ.get("HOST")
    return [*LOOPBACK, *([listen] if listen else [])]


# A Host header: a name or IPv4 address, or an IPv6 address in brackets, and an optional port. Anything
# else (userinfo, paths, spaces) is refused rather than parsed leniently.
_HOST = re.compile(r"(?P<name>[a-z0-9.-]+|\[[0-9a-f:.]+\])(?::[0-9]{1,5})?", re.IGNORECASE)


def _hostname(host: str) -> str:
    """``Host`` without its port, lower case, IPv6 without brackets (``[::1]:3000`` → ``::1``); empty
    when malformed."""
    match = _HOST.fullmatch(host or "")
    return match.group("name").lower().strip("[]") if match else ""


def host_is_trusted(host: str, trusted: list[str]) -> bool:
    """Exact names, or every subdomain of an entry written with a leading dot (``.example.com``), as in
    Flask's ``TRUSTED_HOSTS``."""
    name = _hostname(host)
    if not name:
        return False
    for entry in trusted:
        entry = entry.strip().lower().strip("[]")
        if entry.startswith("."):
            if name == entry[1:] or name.endswith(entry):
                return True
        elif name == entry:
            return True
    return False


def base_url() -> str:
    """The base URL for links sent to someone else (no trailing slash); 400 for an untrusted ``Host``."""
    configured = current_app.config.get("PUBLIC_URL")
    if configured:
        return str(configured).rstrip("/")
    if not host_is_trusted(request.host, trusted_hosts(current_app)):
        raise bad_request(
            "This server does not know its public address and the request's Host is not trusted: set "
            "TRELLIS_PUBLIC_URL (or the module's hostUrl) or add the host to TRELLIS_TRUSTED_HOSTS",
            {"Host": ["Not a trusted host."]},
        )
    return request.host_url.rstrip("/")
