"""Origins: the unit robots.txt applies to.

RFC 9309 section 2.3: the rules of a robots.txt apply only to the host, protocol and
port it was fetched from. We normalise so that spellings of one origin share one entry:
scheme and host lower-cased, IDN hosts as punycode, default ports folded.
"""

from __future__ import annotations

from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}


def _ascii_host(host: str) -> str:
    host = host.lower().rstrip(".")
    if host.isascii():
        return host
    try:
        # IDNA 2003 (the codec in the standard library) is what most crawlers and
        # browsers still resolve with; it maps müller.eu to xn--mller-kva.eu.
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host


def origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` for an http(s) URL, or None when robots.txt does not apply."""
    try:
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        if scheme not in DEFAULT_PORTS:
            return None
        host = parts.hostname
        port = parts.port
    except ValueError:
        return None
    if not host:
        return None
    host = _ascii_host(host)
    if ":" in host:  # IPv6 literal: keep the brackets in the origin
        host = f"[{host}]"
    if port is None or port == DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def robots_url(origin: str) -> str:
    return f"{origin}/robots.txt"


def hostname_of(origin: str) -> str:
    """The host part of an origin, as Scrapy keys its download slots."""
    return urlsplit(origin).hostname or ""
