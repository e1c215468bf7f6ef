"""Scrapy's ``ROBOTSTXT_PARSER`` interface over this engine (``scrapy.robotstxt.RobotParser``).

In the crawl layer because the middleware hands one to ``robots_parsed`` receivers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.robotstxt import RobotParser as _ScrapyRobotParser

from scrapy_rep.robotstxt._robotstxt import DEFAULT_MAX_SIZE, RobotsTxt

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self


def max_size_of(crawler: Crawler | None) -> int:
    settings: Any = getattr(crawler, "settings", None)
    if settings is None:
        return DEFAULT_MAX_SIZE
    try:
        return int(settings.getint("REP_MAX_SIZE", DEFAULT_MAX_SIZE))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"REP_MAX_SIZE must be an integer: {exc}") from exc


class RobotParser(_ScrapyRobotParser):
    """Scrapy parser plug-in backed by :class:`scrapy_rep.RobotsTxt`: groups match by the
    crawler's product token (RFC 9309 §2.2.1), so a full ``User-Agent`` works too. The
    body is parsed on first use, unless *parsed* is its copy already."""

    def __init__(
        self,
        robotstxt_body: bytes | str,
        max_size: int = DEFAULT_MAX_SIZE,
        parsed: RobotsTxt | None = None,
    ) -> None:
        self._body = robotstxt_body
        self._max_size = max_size
        self._robotstxt: RobotsTxt | None = parsed

    @property
    def robotstxt(self) -> RobotsTxt:
        if self._robotstxt is None:
            self._robotstxt = RobotsTxt.parse(self._body, max_size=self._max_size)
        return self._robotstxt

    @classmethod
    def from_crawler(cls, crawler: Crawler | None, robotstxt_body: bytes) -> Self:
        return cls(robotstxt_body, max_size_of(crawler))

    def allowed(self, url: str | bytes, user_agent: str | bytes) -> bool:
        return self.robotstxt.allowed(url, user_agent)

    def crawl_delay(self, user_agent: str | bytes) -> float | None:
        return self.robotstxt.crawl_delay(user_agent)

    def sitemaps(self) -> list[str]:
        """The ``Sitemap:`` URLs of the file, in file order (RFC 9309 §2.2.4)."""
        return list(self.robotstxt.sitemaps)
