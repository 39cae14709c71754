"""Which addresses a webhook may reach (SSRF protection).

Anyone who can register a webhook can make the server send requests; without a check that is a way to
reach what only the server can reach: loopback services, the private network, a cloud's metadata endpoint
(169.254.169.254, fd00:ec2::254, 100.100.100.200). Targets are checked twice: the URL's host is resolved
when a webhook is saved (a refusal is a 400), and every connection the sender opens is checked against the
address it actually connected to, so a name that resolves elsewhere later (DNS rebinding) is refused too.
``allowPrivateTargets`` in the module config turns both checks off (development and tests).
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

MAX_URL_LENGTH = 2048


class TargetRefused(OSError):
    """The connection's peer is not a public address (an OSError so that HTTP libraries pass it up)."""


# IPv6 prefixes whose last 32 bits are an IPv4 address the packet ends up at (RFC 6052 NAT64, RFC 6145
# SIIT). The 6to4 (2002::/16) and Teredo forms are read by the standard library itself.
_EMBEDDING_V4 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("::ffff:0:0:0/96"))
# Never a target whatever they embed: local-use NAT64 (RFC 8215) and the deprecated IPv4-compatible ::/96.
_REFUSED_V6 = (
    (ipaddress.ip_network("64:ff9b:1::/48"), "a local-use NAT64"),
    (ipaddress.ip_network("::/96"), "an IPv4-compatible (deprecated)"),
)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address leads to (mapped, NAT64, SIIT, 6to4, Teredo, ISATAP), if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if any(ip in network for network in _EMBEDDING_V4) or (int(ip) >> 32) & 0xFDFFFFFF == 0x5EFE:  # ISATAP
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_problem(address: str) -> str | None:
    """Why ``address`` may not be a webhook target, or None when it is a public address.

    Python 3.11's ``is_global`` calls NAT64 (64:ff9b::/96), 6to4, IPv4-translated and site-local
    addresses global, though each may reach loopback or the private network: an IPv6 address that embeds
    an IPv4 one is judged by that IPv4 address, and site-local (fec0::/10) is refused.
    """
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id is None:
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            inner = address_problem(str(embedded))
            return None if inner is None else f"{ip} leads to {inner}"
        for network, kind in _REFUSED_V6:
            if ip in network and not ip.is_loopback and not ip.is_unspecified:
                return f"{ip} is {kind} address"
    for flag, kind in (
        ("is_loopback", "a loopback"),
        ("is_link_local", "a link-local (cloud metadata)"),
        ("is_private", "a private"),
        ("is_multicast", "a multicast"),
        ("is_unspecified", "an unspecified"),
        ("is_site_local", "a site-local"),
        ("is_reserved", "a reserved"),
    ):
        if getattr(ip, flag, False):
            return f"{ip} is {kind} address"
    if not ip.is_global:  # shared (100.64.0.0/10, which holds some metadata services), reserved, documentation
        return f"{ip} is not a public address"
    return None


def url_problem(url: str) -> str | None:
    """Why ``url`` is not an http(s) URL with a host (the form only; see :func:`host_problem`)."""
    if len(url) > MAX_URL_LENGTH:
        return f"Longer than {MAX_URL_LENGTH} characters."
    if any(char.isspace() or ord(char) < 32 for char in url):
        return "Must not contain spaces or control characters."
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"Not a valid URL: {exc}."
    if parts.scheme not in ("http", "https"):
        return "Must be an http:// or https:// URL."
    if not parts.hostname:
        return "Must name a host."
    if port == 0:
        return "Port 0 is not a port."
    if parts.username is not None or parts.password is not None:
        return "Must not carry credentials (use the signature to authenticate deliveries)."
    return None


def host_problem(url: str) -> str | None:
    """Resolve the URL's host: why it may not be a target (not public, or not resolvable), else None."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        found = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        return f"The host {parts.hostname!r} does not resolve ({exc})."
    for *_, sockaddr in found:
        problem = address_problem(str(sockaddr[0]))
        if problem is not None:
            return f"The host {parts.hostname!r} resolves to {problem}; set allowPrivateTargets to allow it."
    return None


def check_peer(sock: socket.socket) -> None:
    """Refuse a connection whose peer is not public (raises :class:`TargetRefused` and closes it)."""
    peer = sock.getpeername()[0]
    problem = address_problem(peer)
    if problem is not None:
        sock.close()
        raise TargetRefused(f"refused: {problem} (allowPrivateTargets is off)")
