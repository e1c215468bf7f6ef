"""``ROBOTSTXT_PARSER = "scrapy_rep.RobotParser"``: this engine behind Scrapy's own
``RobotsTxtMiddleware`` (the parser interface of ``scrapy.robotstxt``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.robotstxt import RobotParser as _ScrapyRobotParser

from scrapy_rep.robotstxt._robotstxt import DEFAULT_MAX_SIZE, RobotsTxt

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self

__all__ = ["RobotParser"]


def _max_size(crawler: Crawler | None) -> int:
    settings: Any = getattr(crawler, "settings", None)
    if settings is None:
        return DEFAULT_MAX_SIZE
    try:
        return int(settings.getint("REP_MAX_SIZE", DEFAULT_MAX_SIZE))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"REP_MAX_SIZE must be an integer: {exc}") from exc


class RobotParser(_ScrapyRobotParser):
    """Scrapy parser plug-in backed by :class:`scrapy_rep.RobotsTxt`.

    Unlike Scrapy's stock parsers it matches groups by the crawler's product token
    (RFC 9309 §2.2.1), so a full ``User-Agent`` string works as well as the token.
    """

    def __init__(self, robotstxt_body: bytes | str, max_size: int = DEFAULT_MAX_SIZE) -> None:
        self.robotstxt = RobotsTxt.parse(robotstxt_body, max_size=max_size)

    @classmethod
    def from_crawler(cls, crawler: Crawler | None, robotstxt_body: bytes) -> Self:
        return cls(robotstxt_body, _max_size(crawler))

    def allowed(self, url: str | bytes, user_agent: str | bytes) -> bool:
        return self.robotstxt.allowed(url, user_agent)

    def crawl_delay(self, user_agent: str | bytes) -> float | None:
        return self.robotstxt.crawl_delay(user_agent)
