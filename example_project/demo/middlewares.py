"""Downloader middlewares of the demo: one download slot per origin, and a crawl ledger."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from scrapy.utils.httpobj import urlparse_cached

from demo.report import format_spider

logger = logging.getLogger(__name__)

# scrapy-rep puts its verdict on every request it lets through or drops.
DECISION = "robotstxt_decision"
# Set by CrawlLedger on requests that went through the scheduler (the robots.txt
# fetches of scrapy-rep do not, and are left out of the ledger).
FIRST_SCHEDULED = "demo_first_scheduled"
TIMES_SCHEDULED = "demo_times_scheduled"
WAITED = "demo_waited"


class OriginSlotMiddleware:
    """Give each origin (host:port) its own download slot.

    Scrapy keys download slots by host name, so all the demo origins, which differ only
    by port on 127.0.0.1, would share one slot: the ``Crawl-delay: 1`` that scrapy-rep
    applies to the ``delay`` origin's slot would then space out every origin. Real sites
    have their own host names; this keeps the demo faithful to that.
    """

    def process_request(self, request: Request) -> None:
        request.meta.setdefault("download_slot", urlparse_cached(request).netloc)


class CrawlLedger:
    """Records what happened to every request: downloaded, dropped by robots.txt (with
    the deciding rule from scrapy-rep's ``robotstxt_decision``) or failed, and how long
    it waited for its origin's robots.txt. Logs a table and writes ``DEMO_LEDGER`` (JSON)
    when the spider closes.

    A request that scrapy-rep holds while its origin's robots.txt is pending or
    unreachable is taken out at the scheduler and put back once the origin is decided;
    its ``robotstxt_decision`` then says how long it waited (``waited``, seconds), which
    is how the ledger tells a request was delayed. (``request_scheduled`` fires once per
    request, as without scrapy-rep, so extensions counting it are not misled.)
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.path = crawler.settings.get("DEMO_LEDGER")
        self.entries: list[dict[str, Any]] = []
        crawler.signals.connect(self._on_scheduled, signal=signals.request_scheduled)
        crawler.signals.connect(self._on_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlLedger:
        return cls(crawler)

    def _on_scheduled(self, request: Request, spider: Spider | None = None) -> None:
        meta = request.meta
        meta.setdefault(FIRST_SCHEDULED, time.time())
        meta[TIMES_SCHEDULED] = meta.get(TIMES_SCHEDULED, 0) + 1

    def process_request(self, request: Request) -> None:
        if FIRST_SCHEDULED in request.meta:
            # Download time minus first scheduling: the wait for robots.txt (a
            # Crawl-delay is applied later, inside the download slot).
            request.meta[WAITED] = time.time() - request.meta[FIRST_SCHEDULED]

    def process_response(self, request: Request, response: Response) -> Response:
        if FIRST_SCHEDULED in request.meta:
            self._record(request, "downloaded", status=response.status)
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        if FIRST_SCHEDULED not in request.meta:
            return
        decision = request.meta.get(DECISION) or {}
        if isinstance(exception, IgnoreRequest) and decision.get("allowed") is False:
            self._record(request, "dropped")
        else:
            self._record(request, "failed", error=f"{type(exception).__name__}: {exception}")

    def _token_from(self, request: Request) -> str:
        """Which of scrapy-rep's product token sources applied (SPEC section 3 order)."""
        spider = self.crawler.spider
        if request.meta.get("robotstxt_user_agent"):
            return "Request.meta"
        if getattr(spider, "robotstxt_user_agent", None):
            return "spider attribute"
        if (getattr(spider, "custom_settings", None) or {}).get("ROBOTSTXT_USER_AGENT"):
            return "custom_settings"
        if self.crawler.settings.get("ROBOTSTXT_USER_AGENT"):
            return "settings.py"
        return "User-Agent"

    def _record(self, request: Request, outcome: str, **extra: Any) -> None:
        decision = request.meta.get(DECISION) or {}
        parts = urlparse_cached(request)
        self.entries.append(
            {
                "url": request.url,
                "path": parts.path + (f"?{parts.query}" if parts.query else ""),
                "origin": decision.get("origin") or f"{parts.scheme}://{parts.netloc}",
                "outcome": outcome,
                "token": decision.get("product_token"),
                "token_from": self._token_from(request),
                "allowed": decision.get("allowed"),
                "reason": decision.get("reason"),
                "line": decision.get("line"),
                "rule": decision.get("rule"),
                "groups": decision.get("groups"),
                "source": decision.get("source"),
                "robots": decision.get("robots"),
                "held": (decision.get("waited") or 0.0) > 0,
                "waited": round(request.meta.get(WAITED, 0.0), 3),
                "at": time.time(),
                **extra,
            }
        )

    def _on_closed(self, spider: Spider, reason: str) -> None:
        assert self.crawler.stats is not None
        stats = {
            key: value
            for key, value in self.crawler.stats.get_stats().items()
            if key.startswith("robotstxt/") or key in ("item_scraped_count", "finish_reason")
        }
        ledger = {
            "spider": spider.name,
            "close_reason": reason,
            "entries": self.entries,
            "stats": stats,
        }
        for line in format_spider(ledger):
            logger.info("%s", line)
        if self.path:
            Path(self.path).write_text(json.dumps(ledger, indent=1, default=str), "utf-8")
