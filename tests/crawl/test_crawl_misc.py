"""Real crawls for enabling scrapy-rep (add-on, manual middleware setting, the parser
plug-in, ROBOTSTXT_OBEY), sharing one fetched copy between crawls, audit mode, and
setting validation at start-up."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import pytest_twisted

from scrapy_rep.policy.config import SettingError
from tests.support.crawl import DISALLOW_PRIVATE, pages_of

REP: dict[str, Any] = {
    "ADDONS": {"scrapy_rep.Addon": 0},
    "REP_STORAGE": "memory",
    "RETRY_ENABLED": False,
}
STOCK = "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware"


def enabled_middlewares(crawler: Any) -> str:
    return next(m for m in crawler.messages() if m.startswith("Enabled downloader middlewares"))


@pytest_twisted.ensureDeferred
async def test_obey_false_fetches_nothing(mockserver: Any, run_crawl: Any, host: str) -> None:
    mockserver.configure(host, {"robots": {"body": "User-agent: *\nDisallow: /\n"}})
    urls = [mockserver.url(host, p) for p in ("/a", "/private")]
    crawler = await run_crawl(urls, settings={**REP, "ROBOTSTXT_OBEY": False})
    assert sorted(mockserver.paths(host)) == ["/a", "/private"]
    assert not crawler.stat("robotstxt/request_count")
    assert "scrapy_rep" not in enabled_middlewares(crawler)
    assert "RobotsTxtMiddleware" not in enabled_middlewares(crawler)


@pytest_twisted.ensureDeferred
async def test_addon_replaces_stock_middleware(mockserver: Any, run_crawl: Any, host: str) -> None:
    """A slow robots.txt and a burst: both middlewares would fetch it (and the stock
    one would leak pages); with the add-on it is fetched once and nothing leaks."""
    mockserver.configure(host, {"robots": {"body": "User-agent: *\nDisallow: /\n", "delay": 0.5}})
    urls = [mockserver.url(host, f"/p{i}") for i in range(10)]
    crawler = await run_crawl(urls, settings=REP)
    assert mockserver.paths(host) == ["/robots.txt"]
    assert crawler.stat("robotstxt/forbidden") == 10
    listing = enabled_middlewares(crawler)
    assert "scrapy_rep.middleware.RobotsTxtMiddleware" in listing
    assert STOCK not in listing


@pytest_twisted.ensureDeferred
async def test_manual_middleware_setting(mockserver: Any, run_crawl: Any, host: str) -> None:
    mockserver.configure(host, {"robots": {"body": DISALLOW_PRIVATE, "delay": 0.5}})
    urls = [mockserver.url(host, p) for p in ("/a", "/private", "/private/b", "/c")]
    settings = {
        "DOWNLOADER_MIDDLEWARES": {STOCK: None, "scrapy_rep.RobotsTxtMiddleware": 100},
        "REP_STORAGE": "memory",
        "RETRY_ENABLED": False,
    }
    crawler = await run_crawl(urls, settings=settings)
    assert mockserver.count(host, "/robots.txt") == 1
    assert sorted(pages_of(mockserver, host)) == ["/a", "/c"]
    assert crawler.stat("robotstxt/forbidden") == 2
    assert crawler.stat("robotstxt/delayed") == 4
    assert STOCK not in enabled_middlewares(crawler)


@pytest_twisted.ensureDeferred
async def test_parser_plugin_in_stock_middleware(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """ROBOTSTXT_PARSER = scrapy_rep.RobotParser behind Scrapy's own middleware: the
    full UA string is reduced to its product token to choose the group."""
    robots = "User-agent: mybot\nDisallow: /mine\n\nUser-agent: *\nDisallow: /private\n"
    mockserver.configure(host, {"robots": {"body": robots}})
    urls = [mockserver.url(host, p) for p in ("/mine", "/private", "/a")]
    settings = {
        "ROBOTSTXT_PARSER": "scrapy_rep.RobotParser",
        "USER_AGENT": "MyBot/1.0 (+https://mybot.invalid)",
        "RETRY_ENABLED": False,
    }
    crawler = await run_crawl(urls, settings=settings)
    assert STOCK in enabled_middlewares(crawler)
    assert sorted(pages_of(mockserver, host)) == ["/a", "/private"]
    assert crawler.stat("robotstxt/forbidden") == 1


@pytest_twisted.ensureDeferred
async def test_shared_store_serves_a_second_crawl(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Any
) -> None:
    """One fetched copy serves every spider sharing the store: a second crawl with the
    same SQLite store does not fetch robots.txt again, and its rules still apply."""
    mockserver.configure(host, {"robots": {"body": DISALLOW_PRIVATE}})
    settings = {**REP, "REP_STORAGE": f"sqlite:{tmp_path / 'rep.sqlite'}"}
    first = await run_crawl([mockserver.url(host, "/private")], settings=settings)
    second = await run_crawl(
        [mockserver.url(host, "/a"), mockserver.url(host, "/private/x")], settings=settings
    )
    assert mockserver.count(host, "/robots.txt") == 1
    assert pages_of(mockserver, host) == ["/a"]
    assert first.stat("robotstxt/forbidden") == 1
    assert second.stat("robotstxt/forbidden") == 1
    assert not second.stat("robotstxt/request_count")
    assert second.stat("robotstxt/cache_hit") == 1


@pytest_twisted.ensureDeferred
async def test_audit_mode_drops_nothing(mockserver: Any, run_crawl: Any, host: str) -> None:
    mockserver.configure(host, {"robots": {"body": DISALLOW_PRIVATE}})
    urls = [mockserver.url(host, p) for p in ("/a", "/private")]
    crawler = await run_crawl(urls, settings={**REP, "REP_ENFORCE": False})
    assert sorted(pages_of(mockserver, host)) == ["/a", "/private"]
    assert not crawler.stat("robotstxt/forbidden")
    assert crawler.stat("robotstxt/audit/would_forbid") == 1
    assert crawler.logged("audit mode: would forbid 1, would delay 0", level=logging.INFO)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("REP_CACHE_TTL", "abc"),
        ("REP_FETCH_TIMEOUT", 0),
        ("REP_RETRY_BACKOFF", -1),
        ("REP_UNREACHABLE_WAIT", "soon"),
        ("REP_UNREACHABLE_FALLBACK", "maybe"),
        ("REP_MAX_SIZE", 1000),
        ("REP_MAX_REDIRECTS", "five"),
        ("REP_CRAWL_DELAY", "perhaps"),
        ("REP_MAX_CRAWL_DELAY", float("nan")),
        ("REP_STORAGE", "carrier-pigeon://x"),
    ],
)
@pytest_twisted.ensureDeferred
async def test_bad_setting_fails_the_crawl_start(
    mockserver: Any, run_crawl: Any, host: str, name: str, value: Any
) -> None:
    with pytest.raises(SettingError, match=name):
        await run_crawl([mockserver.url(host, "/a")], settings={**REP, name: value})
    assert mockserver.paths(host) == []


@pytest_twisted.ensureDeferred
async def test_startup_logs_mode_and_store(mockserver: Any, run_crawl: Any, host: str) -> None:
    crawler = await run_crawl([mockserver.url(host, "/a")], settings=REP)
    assert crawler.logged("obeying robots.txt (enforcing)", level=logging.INFO)
    assert crawler.logged("scrapy-rep summary: 1 origin(s)", level=logging.INFO)
    assert pages_of(mockserver, host) == ["/a"]
