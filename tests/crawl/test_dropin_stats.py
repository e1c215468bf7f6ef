"""Scrapy's own robotstxt/* stats and log lines keep their meaning (docs/compat.md).

Each case crawls the same site twice, once with Scrapy's RobotsTxtMiddleware and once
with scrapy-rep, and compares the stock keys. Scrapy's middleware downloads robots.txt
once per origin; its RedirectMiddleware and RetryMiddleware work inside that download.
scrapy-rep follows redirects and retries itself, and counts those in its own keys.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_twisted
from scrapy import Request
from scrapy.exceptions import IgnoreRequest

from tests.support.crawl import DISALLOW_PRIVATE, REP, ListSpider, pages_of

STOCK_KEYS = (
    "robotstxt/request_count",
    "robotstxt/response_count",
    "robotstxt/response_status_count/",
    "robotstxt/exception_count/",
    "robotstxt/forbidden",
)
# The same crawl settings for both; RetryMiddleware on, as in a default project (the
# stock middleware's robots.txt goes through it, scrapy-rep's does not).
COMMON: dict[str, Any] = {"RETRY_ENABLED": True, "RETRY_TIMES": 2}
SCRAPY_REP: dict[str, Any] = {**REP, **COMMON, "REP_UNREACHABLE_WAIT": 1.0}

CASES: dict[str, dict[str, Any]] = {
    "rules": {"robots": {"body": DISALLOW_PRIVATE}},
    "missing": {},
    "redirect": {
        "robots": {"redirect": "/moved/robots.txt"},
        "pages": {"/moved/robots.txt": {"body": DISALLOW_PRIVATE}},
    },
    "two-redirects": {
        "robots": {"status": 302, "redirect": "/r1"},
        "pages": {"/r1": {"status": 307, "redirect": "/r2"}, "/r2": {"body": DISALLOW_PRIVATE}},
    },
    "503": {"robots": {"status": 503}},
    "reset": {"robots": {"body": DISALLOW_PRIVATE, "reset_after": -1}},
}


def stock_keys(crawler: Any) -> dict[str, Any]:
    return {
        key: value for key, value in crawler.stats.get_stats().items() if key.startswith(STOCK_KEYS)
    }


async def crawl_both(
    mockserver: Any, run_crawl: Any, spec: dict[str, Any], settings: dict[str, Any] | None = None
) -> tuple[Any, Any, str, str]:
    """(stock crawler, scrapy-rep crawler, stock host, scrapy-rep host)."""
    hosts = mockserver.unique_host("stock"), mockserver.unique_host("rep")
    mockserver.configure_many(dict.fromkeys(hosts, spec))
    crawlers = []
    for host, base in zip(hosts, (COMMON, SCRAPY_REP), strict=True):
        urls = [mockserver.url(host, p) for p in ("/a", "/private")]
        crawlers.append(await run_crawl(urls, settings={**base, **(settings or {})}))
    return crawlers[0], crawlers[1], hosts[0], hosts[1]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest_twisted.ensureDeferred
async def test_stock_keys_count_as_the_stock_middleware(
    mockserver: Any, run_crawl: Any, case: str
) -> None:
    stock, rep, _, rep_host = await crawl_both(mockserver, run_crawl, CASES[case])
    assert stock_keys(rep) == stock_keys(stock)
    assert rep.stat("robotstxt/request_count") == 1
    assert not [k for k in rep.stats.get_stats() if k.startswith("robotstxt/") and "Ignore" in k]
    if case == "redirect":
        assert rep.stat("robotstxt/redirect_count") == 1
        assert rep.stat("robotstxt/download_status_count/301") == 1
        assert rep.stat("robotstxt/download_count") == 2
    elif case == "two-redirects":
        assert rep.stat("robotstxt/redirect_count") == 2
        assert rep.stat("robotstxt/download_count") == 3
    elif case in ("503", "reset"):
        # The server saw scrapy-rep's backoff retries; only scrapy-rep's keys count them.
        retries = mockserver.count(rep_host, "/robots.txt") - 1
        assert retries >= 1
        assert rep.stat("robotstxt/retry_count") == retries
        assert rep.stat("robotstxt/download_count") == retries + 1
    else:
        assert not rep.stat("robotstxt/retry_count")
        assert not rep.stat("robotstxt/redirect_count")


@pytest_twisted.ensureDeferred
async def test_failed_download_is_a_warning_with_the_error_text(
    mockserver: Any, run_crawl: Any
) -> None:
    """Scrapy's middleware logs ERROR 'Error downloading <request>: <error>'; scrapy-rep
    logs the origin becoming unreachable at WARNING with the same error text, once."""
    stock, rep, _, rep_host = await crawl_both(mockserver, run_crawl, CASES["reset"])
    stock_error = next(m for m in stock.messages(logging.ERROR) if "Error downloading" in m)
    error_text = stock_error.split(">: ", 1)[1].splitlines()[0]
    assert error_text
    warnings = [m for m in rep.messages(logging.WARNING, "scrapy_rep") if "unreachable" in m]
    assert len(warnings) == 1, warnings
    assert error_text in warnings[0]
    assert f"robots.txt of {mockserver.origin(rep_host)} is unreachable" in warnings[0]
    assert rep.stat("robotstxt/unreachable") == 1


@pytest_twisted.ensureDeferred
async def test_drop_line_starts_as_the_stock_one(mockserver: Any, run_crawl: Any) -> None:
    stock, rep, stock_host, rep_host = await crawl_both(mockserver, run_crawl, CASES["rules"])
    for crawler, host in ((stock, stock_host), (rep, rep_host)):
        start = f"Forbidden by robots.txt: <GET {mockserver.url(host, '/private')}>"
        assert sum(m.startswith(start) for m in crawler.messages(logging.DEBUG)) == 1


class RefuseTxtMiddleware:
    """A project's downloader middleware that refuses every ``*.txt`` URL."""

    def process_request(self, request: Request, spider: Any = None) -> None:
        if request.url.endswith(".txt"):
            raise IgnoreRequest("no .txt files in this project")


REFUSE_TXT = {"DOWNLOADER_MIDDLEWARES": {f"{__name__}.RefuseTxtMiddleware": 543}}


@pytest_twisted.ensureDeferred
async def test_robots_request_refused_by_the_crawler_allows_all(
    mockserver: Any, run_crawl: Any
) -> None:
    """The crawler's own middleware refuses robots.txt: that is the crawler's choice, not
    the site's answer. As with the stock middleware, every URL is allowed, nothing
    waits; scrapy-rep says so once per origin at WARNING and counts it."""
    hosts = [mockserver.unique_host("refused-a"), mockserver.unique_host("refused-b")]
    mockserver.configure_many({h: {"robots": {"body": DISALLOW_PRIVATE}} for h in hosts})
    urls = [mockserver.url(h, p) for h in hosts for p in ("/a", "/private", "/b")]
    crawler = await run_crawl(urls, settings={**SCRAPY_REP, **REFUSE_TXT})
    for host in hosts:
        assert mockserver.count(host, "/robots.txt") == 0
        assert sorted(pages_of(mockserver, host)) == ["/a", "/b", "/private"]
    assert crawler.stat("robotstxt/fetch_refused") == 2
    assert not crawler.stat("robotstxt/unreachable")
    assert not crawler.stat("robotstxt/forbidden")
    warnings = [m for m in crawler.messages(logging.WARNING, "scrapy_rep") if "refused" in m]
    assert len(warnings) == 2, warnings
    assert all("no .txt files in this project" in m for m in warnings)
    # The stock keys as Scrapy's middleware counts a refused robots.txt: a request, no
    # response, no exception key.
    stock_host = mockserver.unique_host("stock-refused")
    mockserver.configure(stock_host, {"robots": {"body": DISALLOW_PRIVATE}})
    stock = await run_crawl(
        [mockserver.url(stock_host, p) for p in ("/a", "/private")],
        settings={**COMMON, **REFUSE_TXT},
    )
    assert stock_keys(stock) == {"robotstxt/request_count": 1}
    assert stock_keys(crawler) == {"robotstxt/request_count": 2}


class TwoPhaseSpider(ListSpider):
    """Yields its start items in two halves, 1.5 s apart."""

    name = "two-phase"

    async def start(self) -> AsyncIterator[Any]:
        half = len(self.start_items) // 2
        for index, url in enumerate(self.start_items):
            if index == half:
                await asyncio.sleep(1.5)
            yield Request(str(url), callback=self.parse, errback=self.on_error)


@pytest_twisted.ensureDeferred
async def test_refused_robots_request_is_asked_again_after_min_ttl(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """The allow-all of a refusal lasts REP_MIN_TTL, then the crawler is asked again
    (still refused here): two refusals counted, still one WARNING for the origin."""
    mockserver.configure(host, {"robots": {"body": DISALLOW_PRIVATE}})
    urls = [mockserver.url(host, p) for p in ("/a", "/private", "/b", "/private/b")]
    settings = {**SCRAPY_REP, **REFUSE_TXT, "REP_MIN_TTL": 1}
    crawler = await run_crawl(urls, settings=settings, spider_cls=TwoPhaseSpider)
    assert mockserver.count(host, "/robots.txt") == 0
    assert sorted(pages_of(mockserver, host)) == ["/a", "/b", "/private", "/private/b"]
    assert crawler.stat("robotstxt/fetch_refused") == 2
    assert crawler.stat("robotstxt/refetch") == 1
    warnings = [m for m in crawler.messages(logging.WARNING, "scrapy_rep") if "refused" in m]
    assert len(warnings) == 1, warnings
