"""Signals Scrapy's own RobotsTxtMiddleware sends, and how often (docs/compat.md).

``robots_parsed`` (Scrapy 2.18+) once per fetched robots.txt with a RobotParser and the
page request that triggered the fetch, side by side with the stock middleware; and
``request_scheduled`` once per request although scrapy-rep holds requests back while
their origin's robots.txt is fetched.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from scrapy import Request, signals
from scrapy.crawler import Crawler

from tests.support.crawl import DISALLOW_PRIVATE, REP, ListSpider, pages_of

HAS_ROBOTS_PARSED = hasattr(signals, "robots_parsed")
STOCK: dict[str, Any] = {"RETRY_ENABLED": False}


class ListeningSpider(ListSpider):
    """Records every ``robots_parsed`` and ``request_scheduled`` it receives."""

    name = "listening"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.parsed: list[tuple[Any, Request]] = []
        self.scheduled: Counter[str] = Counter()

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> ListeningSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        if HAS_ROBOTS_PARSED:
            crawler.signals.connect(spider.on_robots_parsed, signal=signals.robots_parsed)
        crawler.signals.connect(spider.on_scheduled, signal=signals.request_scheduled)
        return spider

    def on_robots_parsed(self, robotparser: Any, request: Request) -> None:
        self.parsed.append((robotparser, request))

    def on_scheduled(self, request: Request, spider: Any = None) -> None:
        self.scheduled[request.url] += 1


class PhasedListeningSpider(ListeningSpider):
    """Yields its start items in two halves, ``pause`` seconds apart."""

    name = "phased-listening"
    pause = 1.5

    async def start(self) -> AsyncIterator[Any]:
        half = len(self.start_items) // 2
        for index, url in enumerate(self.start_items):
            if index == half:
                await asyncio.sleep(self.pause)
            yield Request(str(url), callback=self.parse, errback=self.on_error)


@pytest.mark.skipif(not HAS_ROBOTS_PARSED, reason="robots_parsed is new in Scrapy 2.18")
@pytest.mark.parametrize("middleware", ["stock", "scrapy-rep"])
@pytest_twisted.ensureDeferred
async def test_robots_parsed_once_per_origin_with_the_triggering_request(
    mockserver: Any, run_crawl: Any, middleware: str
) -> None:
    """Two origins, several pages each: one signal per origin, whichever middleware,
    with a parser that answers as the crawl did and the first page request of the
    origin. A 404 robots.txt is an answer too: its parser allows everything."""
    rules = mockserver.unique_host("rules")
    missing = mockserver.unique_host("missing")
    mockserver.configure_many({rules: {"robots": {"body": DISALLOW_PRIVATE}}, missing: {}})
    urls = [mockserver.url(h, p) for h in (rules, missing) for p in ("/a", "/private", "/b")]
    settings = REP if middleware == "scrapy-rep" else STOCK
    crawler = await run_crawl(urls, settings=settings, spider_cls=ListeningSpider)
    spider = crawler.spider
    assert mockserver.count(rules, "/robots.txt") == 1
    assert mockserver.count(missing, "/robots.txt") == 1
    assert sorted(pages_of(mockserver, rules)) == ["/a", "/b"]
    by_origin = {urls.index(req.url) // 3: (parser, req) for parser, req in spider.parsed}
    assert len(spider.parsed) == 2
    assert sorted(by_origin) == [0, 1]
    parser, request = by_origin[0]
    assert request.url == urls[0]  # the page request that triggered the fetch
    assert parser.allowed(mockserver.url(rules, "/a"), "mybot")
    assert not parser.allowed(mockserver.url(rules, "/private/x"), "mybot")
    parser, request = by_origin[1]
    assert request.url == urls[3]
    assert parser.allowed(mockserver.url(missing, "/private"), "mybot")


@pytest.mark.skipif(not HAS_ROBOTS_PARSED, reason="robots_parsed is new in Scrapy 2.18")
@pytest_twisted.ensureDeferred
async def test_robots_parsed_after_retries_and_not_for_failures(
    mockserver: Any, run_crawl: Any
) -> None:
    """503 then 200: sent once, after the 200, with the page request that found the
    origin unknown. A robots.txt that never comes (the origin falls back) sends nothing:
    no robots.txt was parsed (the stock middleware sends nothing on a failed download
    either)."""
    flaky = mockserver.unique_host("flaky")
    down = mockserver.unique_host("down")
    mockserver.configure_many(
        {
            flaky: {"robots": [{"status": 503}, {"body": DISALLOW_PRIVATE}]},
            down: {"robots": {"body": DISALLOW_PRIVATE, "reset_after": -1}},
        }
    )
    urls = [mockserver.url(flaky, "/a"), mockserver.url(flaky, "/private")]
    urls.append(mockserver.url(down, "/a"))
    settings = {**REP, "REP_UNREACHABLE_WAIT": 1.0}
    crawler = await run_crawl(urls, settings=settings, spider_cls=ListeningSpider)
    assert mockserver.count(flaky, "/robots.txt") == 2
    assert pages_of(mockserver, flaky) == ["/a"]
    assert pages_of(mockserver, down) == ["/a"]  # the fallback allowed it
    assert [request.url for _, request in crawler.spider.parsed] == [urls[0]]
    parser = crawler.spider.parsed[0][0]
    assert not parser.allowed(urls[1], "mybot")


@pytest.mark.parametrize("middleware", ["stock", "scrapy-rep"])
@pytest_twisted.ensureDeferred
async def test_request_scheduled_once_per_request(
    mockserver: Any, run_crawl: Any, host: str, middleware: str
) -> None:
    """scrapy-rep holds the requests of an origin whose robots.txt is not known yet (a
    slow one here) and puts them into the scheduler later; extensions counting
    ``request_scheduled`` still see each request once, as with the stock middleware."""
    mockserver.configure(host, {"robots": {"body": DISALLOW_PRIVATE, "delay": 0.3}})
    urls = [mockserver.url(host, p) for p in ("/a", "/b", "/private")]
    settings = REP if middleware == "scrapy-rep" else STOCK
    crawler = await run_crawl(urls, settings=settings, spider_cls=ListeningSpider)
    assert crawler.spider.scheduled == dict.fromkeys(urls, 1)
    assert crawler.stat("scheduler/enqueued") == 3
    if middleware == "scrapy-rep":
        # (The stock middleware lets /private through here: only the first request
        # waiting on a robots.txt gets its parser, see SCRAPY_NOTES.)
        assert sorted(pages_of(mockserver, host)) == ["/a", "/b"]
        assert crawler.stat("robotstxt/delayed") == 3
        assert crawler.stat("robotstxt/released") == 3


@pytest.mark.skipif(not HAS_ROBOTS_PARSED, reason="robots_parsed is new in Scrapy 2.18")
@pytest_twisted.ensureDeferred
async def test_robots_parsed_again_after_a_refetch(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """The copy expires (max-age=1) and is downloaded again: a new download, so a new
    signal (with the request that found it expired) and a new robotstxt/request_count."""
    mockserver.configure(
        host,
        {
            "robots": [
                {"body": DISALLOW_PRIVATE, "headers": {"Cache-Control": "max-age=1"}},
                {"body": "User-agent: *\nDisallow: /b\n"},
            ]
        },
    )
    urls = [mockserver.url(host, p) for p in ("/a", "/private", "/b", "/c")]
    settings = {**REP, "REP_MIN_TTL": 1}
    crawler = await run_crawl(urls, settings=settings, spider_cls=PhasedListeningSpider)
    assert mockserver.count(host, "/robots.txt") == 2
    assert [request.url for _, request in crawler.spider.parsed] == [urls[0], urls[2]]
    assert not crawler.spider.parsed[1][0].allowed(urls[2], "mybot")
    assert crawler.stat("robotstxt/request_count") == 2
    assert crawler.stat("robotstxt/refetch") == 1


@pytest.mark.skipif(not HAS_ROBOTS_PARSED, reason="robots_parsed is new in Scrapy 2.18")
@pytest_twisted.ensureDeferred
async def test_no_robots_parsed_for_a_stored_copy(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Path
) -> None:
    """A second run served by the SQLite store downloads nothing, so sends nothing."""
    mockserver.configure(host, {"robots": {"body": DISALLOW_PRIVATE}})
    settings = {**REP, "REP_STORAGE": f"sqlite:{tmp_path / 'store.db'}"}
    first = await run_crawl(
        [mockserver.url(host, "/a")], settings=settings, spider_cls=ListeningSpider
    )
    second = await run_crawl(
        [mockserver.url(host, "/b"), mockserver.url(host, "/private")],
        settings=settings,
        spider_cls=ListeningSpider,
    )
    assert mockserver.count(host, "/robots.txt") == 1
    assert len(first.spider.parsed) == 1
    assert second.spider.parsed == []
    assert second.stat("robotstxt/cache_hit") == 1
    assert second.stat("robotstxt/forbidden") == 1
