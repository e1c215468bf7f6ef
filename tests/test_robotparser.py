"""scrapy_rep.RobotParser as Scrapy's ROBOTSTXT_PARSER."""

from __future__ import annotations

from typing import Any

import pytest_twisted
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.robotstxt import RobotParser as ScrapyRobotParser
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.test import get_crawler

from scrapy_rep import RobotsTxt
from scrapy_rep.robotparser import RobotParser

BODY = b"User-agent: MyBot\nDisallow: /private\nCrawl-delay: 2.5\n\nUser-agent: *\nDisallow: /\n"


def test_is_a_scrapy_parser() -> None:
    assert issubclass(RobotParser, ScrapyRobotParser)
    assert load_object("scrapy_rep.RobotParser") is RobotParser


def test_from_crawler_and_queries() -> None:
    crawler = get_crawler(settings_dict={"ROBOTSTXT_PARSER": "scrapy_rep.RobotParser"})
    parser = RobotParser.from_crawler(crawler, BODY)
    assert isinstance(parser.robotstxt, RobotsTxt)
    assert parser.allowed("https://example.com/public", "MyBot/1.0 (+https://x)")
    assert not parser.allowed("https://example.com/private/x", "MyBot/1.0")
    assert not parser.allowed(b"https://example.com/public", b"OtherBot")
    assert parser.crawl_delay("mybot") == 2.5
    assert parser.crawl_delay(b"OtherBot") is None


def test_crawler_none_and_max_size() -> None:
    parser = RobotParser.from_crawler(None, BODY)  # type: ignore[arg-type]
    assert not parser.robotstxt.truncated
    crawler = get_crawler(settings_dict={"REP_MAX_SIZE": 20})
    small = RobotParser.from_crawler(crawler, BODY)
    assert small.robotstxt.truncated
    assert small.allowed("https://example.com/private", "MyBot")  # rule cut off


def test_stock_middleware_uses_it() -> None:
    crawler = get_crawler(
        settings_dict={"ROBOTSTXT_OBEY": True, "ROBOTSTXT_PARSER": "scrapy_rep.RobotParser"}
    )
    mw = build_from_crawler(RobotsTxtMiddleware, crawler)
    assert mw._parserimpl is RobotParser
    parser = mw._parserimpl.from_crawler(crawler, BODY)
    assert not parser.allowed("https://example.com/anything", "SomeBot")


@pytest_twisted.ensureDeferred
async def test_real_crawl_with_stock_middleware(mockserver: Any, run_crawl: Any, host: str) -> None:
    """A whole crawl: Scrapy's own RobotsTxtMiddleware with this parser plugged in.

    Uses the shared crawl harness (tests/conftest.py) only through its fixtures.
    """
    mockserver.configure(
        host,
        {
            "robots": {
                "body": "User-agent: *\nDisallow: /\n\nUser-agent: mybot\nDisallow: /private\n"
            }
        },
    )
    crawler = await run_crawl(
        [mockserver.url(host, "/ok"), mockserver.url(host, "/private/x")],
        settings={
            "ROBOTSTXT_PARSER": "scrapy_rep.RobotParser",
            "USER_AGENT": "MyBot/1.0 (+https://mybot.example)",
        },
    )
    assert crawler.spider.response_urls == [mockserver.url(host, "/ok")]
    assert crawler.stat("robotstxt/forbidden") == 1


def test_parses_on_first_use_and_lists_sitemaps() -> None:
    """The middleware builds one for each robots_parsed; parsing waits for a query."""
    body = b"User-agent: *\nDisallow: /x\nSitemap: https://example.com/a.xml\n"
    parser = RobotParser.from_crawler(None, body)  # type: ignore[arg-type]
    assert parser._robotstxt is None
    assert parser.sitemaps() == ["https://example.com/a.xml"]
    assert parser._robotstxt is not None
    assert not parser.allowed("https://example.com/x", "bot")
