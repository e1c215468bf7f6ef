"""Product tokens: the part of a user-agent string that robots.txt groups name.

RFC 9309 §2.2.1: a crawler matches ``User-agent:`` lines by its *product token*,
``[a-zA-Z_-]+``, case-insensitively.  Google's library cuts both the robots.txt value
and the crawler's name at the first character outside that set, so
``User-agent: googlebot/2.1`` and ``googlebot*`` both mean ``googlebot``.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["product_token", "token_key"]

_TOKEN = re.compile(r"[A-Za-z_-]*")


def product_token(ua: str | bytes) -> str:
    """Return the leading ``[A-Za-z_-]+`` run of *ua* (``""`` when there is none).

    ``"MyBot/1.2 (+http://x)"`` -> ``"MyBot"``.  Leading whitespace is skipped, since
    a header value copied with its padding should still name the crawler.
    """
    if isinstance(ua, (bytes, bytearray, memoryview)):
        ua = bytes(ua).decode("utf-8", "replace")
    elif not isinstance(ua, str):
        return ""
    match = _TOKEN.match(ua.lstrip())
    return match.group() if match else ""


@lru_cache(maxsize=512)
def token_key(ua: str) -> str:
    """The lower-cased product token of *ua*, the key that groups are stored under.

    Cached because a crawler asks with the same few user-agent strings millions of
    times; the cache is bounded so arbitrary input cannot grow it without limit.
    """
    return product_token(ua).lower()
