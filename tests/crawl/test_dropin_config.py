"""Configuration mistakes an existing Scrapy project makes when it adopts scrapy-rep
(docs/compat.md): the stock middleware or a project subclass of it left enabled, and
ROBOTSTXT_PARSER set to another parser."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import pytest_twisted
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware as StockMiddleware
from scrapy.settings import Settings

from scrapy_rep.addon import Addon
from scrapy_rep.middleware import RobotsTxtMiddleware
from tests.support.crawl import DISALLOW_PRIVATE, REP, pages_of

STOCK = "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware"
OURS = "scrapy_rep.middleware.RobotsTxtMiddleware"
MANUAL: dict[str, Any] = {k: v for k, v in REP.items() if k != "ADDONS"}
DOUBLE = "is enabled beside scrapy_rep.RobotsTxtMiddleware"
PARSER_IGNORED = "ROBOTSTXT_PARSER"


class ProjectRobotsMiddleware(StockMiddleware):
    """A project's own subclass of Scrapy's middleware (e.g. to log drops its way)."""


class ProjectRepMiddleware(RobotsTxtMiddleware):
    """A project's subclass of scrapy-rep's middleware: the add-on must keep it."""


PROJECT_STOCK = f"{__name__}.ProjectRobotsMiddleware"
PROJECT_REP = f"{__name__}.ProjectRepMiddleware"


def warnings_about(crawler: Any, text: str) -> list[str]:
    return [m for m in crawler.messages(logging.WARNING, "scrapy_rep") if text in m]


def applied(middlewares: dict[Any, Any]) -> dict[Any, Any]:
    settings = Settings({"DOWNLOADER_MIDDLEWARES": middlewares})
    Addon().update_settings(settings)
    return dict(settings.getdict("DOWNLOADER_MIDDLEWARES"))


def test_addon_disables_stock_subclasses_and_keeps_ours() -> None:
    assert applied({PROJECT_STOCK: 120}) == {PROJECT_STOCK: None, STOCK: None, OURS: 100}
    assert applied({ProjectRobotsMiddleware: 90}) == {
        ProjectRobotsMiddleware: None,
        STOCK: None,
        OURS: 100,
    }
    assert applied({PROJECT_REP: 110}) == {PROJECT_REP: 110, STOCK: None}
    assert applied({StockMiddleware: 100}) == {STOCK: None, OURS: 100}


@pytest_twisted.ensureDeferred
async def test_addon_disables_a_project_subclass(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """With the add-on, the project's subclass of the stock middleware does not run:
    robots.txt is fetched once, every drop is scrapy-rep's."""
    mockserver.configure(host, {"robots": {"body": DISALLOW_PRIVATE, "delay": 0.3}})
    urls = [mockserver.url(host, p) for p in ("/a", "/private", "/private/b", "/c")]
    settings = {**REP, "DOWNLOADER_MIDDLEWARES": {PROJECT_STOCK: 100}}
    crawler = await run_crawl(urls, settings=settings)
    assert mockserver.count(host, "/robots.txt") == 1
    assert sorted(pages_of(mockserver, host)) == ["/a", "/c"]
    assert crawler.stat("robotstxt/request_count") == 1
    assert crawler.stat("robotstxt/forbidden") == 2
    assert crawler.logged(f"disabled {PROJECT_STOCK}", logging.INFO, "scrapy_rep")
    assert not warnings_about(crawler, DOUBLE)


@pytest.mark.parametrize("other", [STOCK, PROJECT_STOCK])
@pytest_twisted.ensureDeferred
async def test_without_addon_both_middlewares_warn_once(
    mockserver: Any, run_crawl: Any, host: str, other: str
) -> None:
    """scrapy-rep added to DOWNLOADER_MIDDLEWARES beside the stock middleware (still in
    the base list) or beside a project subclass: one WARNING at start-up naming it.
    Both then run, as configured: the server sees robots.txt twice."""
    mockserver.configure(host, {"robots": {"body": DISALLOW_PRIVATE}})
    urls = [mockserver.url(host, p) for p in ("/a", "/private", "/b")]
    middlewares: dict[str, Any] = {OURS: 100}
    if other != STOCK:
        middlewares.update({STOCK: None, other: 110})
    crawler = await run_crawl(urls, settings={**MANUAL, "DOWNLOADER_MIDDLEWARES": middlewares})
    warnings = warnings_about(crawler, DOUBLE)
    assert len(warnings) == 1, warnings
    assert other in warnings[0]
    assert "ADDONS" in warnings[0]
    assert mockserver.count(host, "/robots.txt") == 2
    assert sorted(pages_of(mockserver, host)) == ["/a", "/b"]


@pytest_twisted.ensureDeferred
async def test_manual_setup_without_stock_does_not_warn(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    mockserver.configure(host, {"robots": {"body": DISALLOW_PRIVATE}})
    settings = {**MANUAL, "DOWNLOADER_MIDDLEWARES": {STOCK: None, OURS: 100}}
    crawler = await run_crawl([mockserver.url(host, "/a")], settings=settings)
    assert not warnings_about(crawler, DOUBLE)
    assert not warnings_about(crawler, PARSER_IGNORED)
    assert mockserver.count(host, "/robots.txt") == 1


@pytest.mark.parametrize(
    ("parser", "warned"),
    [
        ("scrapy.robotstxt.PythonRobotParser", True),
        ("scrapy.robotstxt.ProtegoRobotParser", True),  # chosen by the project
        ("scrapy_rep.RobotParser", False),
        ("scrapy_rep.robotparser.RobotParser", False),
        (None, False),  # Scrapy's default
    ],
)
@pytest_twisted.ensureDeferred
async def test_robotstxt_parser_is_ignored_with_one_warning(
    mockserver: Any, run_crawl: Any, host: str, parser: str | None, warned: bool
) -> None:
    """A parser the stock middleware would use does not decide here: scrapy-rep's engine
    does, and says once that the setting is ignored. PythonRobotParser (the standard
    library) takes the first matching rule, so it would allow /private/open; RFC 9309's
    longest match disallows it."""
    mockserver.configure(
        host,
        {"robots": {"body": "User-agent: *\nAllow: /private\nDisallow: /private/open\n"}},
    )
    urls = [mockserver.url(host, p) for p in ("/private/open", "/private/x")]
    settings = {**REP, **({"ROBOTSTXT_PARSER": parser} if parser else {})}
    crawler = await run_crawl(urls, settings=settings)
    assert pages_of(mockserver, host) == ["/private/x"]
    assert crawler.stat("robotstxt/forbidden") == 1
    warnings = warnings_about(crawler, PARSER_IGNORED)
    assert len(warnings) == int(warned), warnings
    if warned:
        assert parser in warnings[0]
        assert "ignored" in warnings[0]
