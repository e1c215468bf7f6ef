"""Origins: the unit robots.txt applies to.

RFC 9309 section 2.3: the rules of a robots.txt apply only to the host, protocol and
port it was fetched from. We normalise so that spellings of one origin share one entry:
scheme and host lower-cased, IDN hosts as punycode, default ports folded.
"""

from __future__ import annotations

import re
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


# "scheme://authority" as written -> origin: a crawl sends thousands of requests to each
# origin, and this makes the per-request cost one dict lookup.  Bounded: cleared whole
# when full (a crawl of more hosts than this only loses the memo, never correctness).
_BY_PREFIX: dict[str, str | None] = {}
_BY_PREFIX_LIMIT = 8192
_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^/?#]*").match


def origin_of_memo(url: str) -> str | None:
    """origin_of, memoised on the URL's ``scheme://authority`` prefix."""
    # Stripped as origin_of strips it ("http:// " has no host there; unstripped, its
    # prefix would read " " as one). str.strip returns the same object when there is
    # nothing to strip, so the common case allocates nothing.
    url = url.strip()
    m = _PREFIX(url)
    if m is None:
        return origin_of(url)  # no authority: not an http(s) URL robots.txt covers
    prefix = m.group()
    try:
        return _BY_PREFIX[prefix]
    except KeyError:
        pass
    origin = origin_of(prefix + "/")
    if len(_BY_PREFIX) >= _BY_PREFIX_LIMIT:
        _BY_PREFIX.clear()
    _BY_PREFIX[prefix] = origin
    return origin


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
