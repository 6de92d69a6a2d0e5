"""Where a provider is: its base URL, checked and shown without credentials."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit, urlunsplit

__all__ = ["display_url", "is_loopback"]


def display_url(url: str) -> str:
    """The URL without any user:password part."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def is_loopback(url: str) -> bool:
    """Whether ``url`` names this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
