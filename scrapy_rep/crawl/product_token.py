"""Which product token a request's crawler obeys (docs/behaviour.md, "Product token").

RFC 9309 2.2.1: crawlers match on the product token, not on the full UA string.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.http.headers import Headers

from scrapy_rep.robotstxt import product_token

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from scrapy_rep.policy.config import Config

logger = logging.getLogger(__name__)

# Tokens that mean a browser UA string reached us; robots.txt groups never name them.
BROWSER_TOKENS = frozenset({"mozilla", "opera", "safari", "chrome", "applewebkit"})
_USER_AGENT = b"User-Agent"  # (as Headers.normkey spells it: title case)


class ProductTokens:
    """The product token of each request (``token_for``, on every request), and one
    warning when it is a browser's."""

    def __init__(self, config: Config, crawler: Crawler) -> None:
        self.config = config
        self.crawler = crawler  # (crawler.spider is set before any request is scheduled)
        self._warned_browser = False
        # (raw value, its product token, whether it is browser-like): the last one seen
        self._token_of: tuple[object, str, bool] = (None, "", False)

    def token_for(self, request: Request) -> str:
        raw: Any = request.meta.get("robotstxt_user_agent")
        if not raw:
            raw = getattr(self.crawler.spider, "robotstxt_user_agent", None)
        if not raw:
            raw = self.config.robotstxt_user_agent
        if not raw:
            headers = request.headers
            if type(headers) is Headers:
                # Headers.get(b"User-Agent") without its key normalisation: a dict of
                # title-cased keys to lists of values, the last one the one it returns.
                values = dict.get(headers, _USER_AGENT)
                raw = values[-1] if values else None
            elif headers:
                raw = headers.get(_USER_AGENT)
        if not raw:
            raw = self.config.user_agent
        if raw != self._token_of[0]:  # the same raw value on nearly every request
            token = product_token(raw)
            self._token_of = (raw, token, token.lower() in BROWSER_TOKENS)
        _, token, browser_like = self._token_of
        if browser_like and not self._warned_browser:
            self._warned_browser = True
            where, fix = self._token_source(request)
            logger.warning(
                "the robots.txt product token is %r, taken from %s, a "
                "browser-like User-Agent. robots.txt groups name crawlers, so only '*' "
                "groups will apply. %s",
                token,
                where,
                fix,
            )
        return token

    def _token_source(self, request: Request) -> tuple[str, str]:
        """Where ``token_for`` found the token, and what to change (for the warning)."""
        own_name = "Set it to your crawler's name (for example 'MyBot')."
        if request.meta.get("robotstxt_user_agent"):
            return 'request.meta["robotstxt_user_agent"]', own_name
        if getattr(self.crawler.spider, "robotstxt_user_agent", None):
            return "the spider attribute robotstxt_user_agent", own_name
        if self.config.robotstxt_user_agent:
            return "ROBOTSTXT_USER_AGENT", own_name
        fix = "Set ROBOTSTXT_USER_AGENT to your crawler's name (for example 'MyBot')."
        if request.headers and request.headers.get(b"User-Agent"):
            return "the request's User-Agent header", fix
        return "USER_AGENT", fix
