"""Product tokens: the part of a user-agent string that robots.txt groups name.

RFC 9309 §2.2.1: a crawler matches ``User-agent:`` lines by its *product token*,
case-insensitively.  The RFC asks crawlers to use ``[a-zA-Z_-]``; real files and real
crawlers also use digits (``MJ12bot``, ``360Spider``) and non-ASCII letters, so (SPEC,
"Words") a token is the leading run of ASCII letters and digits, ``-``, ``_`` and
non-ASCII letters, and a digit never ends it.  Google's library cuts at the first
digit, which merges ``Agent1`` with ``Agent2``: this is an RFC-over-Google decision.

The same rule reduces both the file's ``User-agent`` values and the crawler's name,
so ``User-agent: googlebot/2.1`` and ``googlebot*`` both mean ``googlebot``.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["product_token", "token_key"]

# ASCII letters, digits, "-", "_", then (only when the value is not ASCII) any word
# character: non-ASCII digits and numerics are cut off after the match (see _trim).
_TOKEN = re.compile(r"[-\w]*")
_ASCII_TOKEN = re.compile(r"[-A-Za-z0-9_]*", re.ASCII)


def _trim(token: str) -> str:
    """Cut *token* (a run of ``[-\\w]``) at its first non-ASCII non-letter."""
    for i, char in enumerate(token):
        if not char.isascii() and not char.isalpha():
            return token[:i]
    return token


def product_token(ua: str | bytes) -> str:
    """Return the leading product token of *ua* (``""`` when there is none).

    ``"MyBot/1.2 (+http://x)"`` -> ``"MyBot"``, ``"MJ12bot/v1.4"`` -> ``"MJ12bot"``.
    Leading whitespace is skipped, since a header value copied with its padding
    should still name the crawler.
    """
    if isinstance(ua, (bytes, bytearray, memoryview)):
        ua = bytes(ua).decode("utf-8", "replace")
    elif not isinstance(ua, str):
        return ""
    ua = ua.lstrip()
    if ua.isascii():
        match = _ASCII_TOKEN.match(ua)
        return match.group() if match else ""
    match = _TOKEN.match(ua)
    return _trim(match.group()) if match else ""


@lru_cache(maxsize=512)
def token_key(ua: str) -> str:
    """The lower-cased product token of *ua*, the key that groups are stored under.

    Cached because a crawler asks with the same few user-agent strings millions of
    times; the cache is bounded so arbitrary input cannot grow it without limit.
    """
    return product_token(ua).lower()
