"""Where a provider is: its base URL, checked and shown without credentials."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit, urlunsplit

__all__ = ["display_url", "host_port", "is_loopback"]

#: The port a URL means when it names none.
DEFAULT_PORTS = {"http": 80, "https": 443}


def display_url(url: str) -> str:
    """The URL without any user:password part."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def host_port(url: str) -> str:
    """``host:port`` of ``url`` (the scheme's port when it names none): where a worker
    connects, and nothing that could be a credential. The URL, credentials removed, when
    it has no host."""
    parts = urlsplit(url)
    host = parts.hostname
    if not host:
        return display_url(url)
    try:
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:  # a port that is not a number
        port = None
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port}" if port else shown


def is_loopback(url: str) -> bool:
    """Whether ``url`` names this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
