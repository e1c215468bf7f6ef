"""Real crawls for the product token (docs/behaviour.md, "Product token"): where it
comes from, in which order, reduced from full User-Agent strings, and the browser-like warning."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import pytest_twisted
from scrapy.http import Request

from tests.support.crawl import ListSpider

REP: dict[str, Any] = {
    "ADDONS": {"scrapy_rep.Addon": 0},
    "REP_STORAGE": "memory",
    "RETRY_ENABLED": False,
}
NAMES = ("alpha", "beta", "gamma", "delta", "epsilon")
# Each crawler name has its own group forbidding /<name>; `*` forbids /star.
ROBOTS = "".join(f"User-agent: {n}bot\nDisallow: /{n}\n\n" for n in NAMES)
ROBOTS += "User-agent: *\nDisallow: /star\n"
PATHS = (*(f"/{n}" for n in NAMES), "/star")


class AttrSpider(ListSpider):
    name = "ua-attr"
    robotstxt_user_agent = "BetaBot/1.0 (+https://beta.invalid/bot)"


class CustomSettingsSpider(ListSpider):
    name = "ua-custom"
    custom_settings = {"ROBOTSTXT_USER_AGENT": "GammaBot"}  # noqa: RUF012


class AttrAndCustomSettingsSpider(AttrSpider):
    name = "ua-both"
    custom_settings = {"ROBOTSTXT_USER_AGENT": "GammaBot"}  # noqa: RUF012


def forbidden_paths(mockserver: Any, host: str) -> list[str]:
    received = set(mockserver.paths(host))
    return [p for p in PATHS if p not in received]


# name -> (spider class, settings, meta token, header token, expected forbidden path)
CASES: dict[str, tuple[type[ListSpider], dict[str, Any], str | None, str | None, str]] = {
    "meta-wins": (
        AttrAndCustomSettingsSpider,
        {"USER_AGENT": "EpsilonBot/3"},
        "AlphaBot/2.0 (+http://alpha.invalid)",
        "DeltaBot/1.0",
        "/alpha",
    ),
    "spider-attribute": (
        AttrAndCustomSettingsSpider,
        {"USER_AGENT": "EpsilonBot/3"},
        None,
        "DeltaBot/1.0",
        "/beta",
    ),
    "setting": (
        ListSpider,
        {"ROBOTSTXT_USER_AGENT": "gammabot/7.1", "USER_AGENT": "EpsilonBot/3"},
        None,
        "DeltaBot/1.0",
        "/gamma",
    ),
    "custom-settings": (
        CustomSettingsSpider,
        {"USER_AGENT": "EpsilonBot/3"},
        None,
        "DeltaBot/1.0",
        "/gamma",
    ),
    "request-header": (
        ListSpider,
        {"USER_AGENT": "EpsilonBot/3"},
        None,
        "DeltaBot/1.0 (compatible; +http://delta.invalid)",
        "/delta",
    ),
    "user-agent-setting": (
        ListSpider,
        {"USER_AGENT": "EPSILONBOT/3.1 (+https://epsilon.invalid/bot)"},
        None,
        None,
        "/epsilon",
    ),
    "default-scrapy-ua": (ListSpider, {}, None, None, "/star"),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest_twisted.ensureDeferred
async def test_product_token_sources_in_order(
    mockserver: Any, run_crawl: Any, host: str, case: str
) -> None:
    spider_cls, settings, meta_token, header_token, expected = CASES[case]
    mockserver.configure(host, {"robots": {"body": ROBOTS}})
    meta = {"robotstxt_user_agent": meta_token} if meta_token else {}
    headers = {"User-Agent": header_token} if header_token else {}
    requests = [Request(mockserver.url(host, p), meta=meta, headers=headers) for p in PATHS]
    crawler = await run_crawl(
        settings={**REP, **settings},
        spider_cls=spider_cls,
        # Passed explicitly: run_crawl recognises only its own (conftest) ListSpider.
        spider_kwargs={"start_items": requests},
    )
    # Exactly one group applied: the chosen crawler's, never merged with `*`.
    assert forbidden_paths(mockserver, host) == [expected]
    assert crawler.stat("robotstxt/forbidden") == 1
    assert not crawler.logged("browser-like", level=logging.WARNING)


@pytest_twisted.ensureDeferred
async def test_meta_token_per_request(mockserver: Any, run_crawl: Any, host: str) -> None:
    """Requests of one crawl can carry different tokens; one fetched copy serves all."""
    mockserver.configure(host, {"robots": {"body": ROBOTS}})
    requests = [
        Request(mockserver.url(host, "/alpha"), meta={"robotstxt_user_agent": "betabot"}),
        Request(mockserver.url(host, "/beta"), meta={"robotstxt_user_agent": "betabot"}),
        Request(mockserver.url(host, "/beta?x"), meta={"robotstxt_user_agent": "alphabot"}),
        Request(mockserver.url(host, "/alpha?x"), meta={"robotstxt_user_agent": "AlphaBot/1"}),
    ]
    crawler = await run_crawl(requests, settings=REP)
    assert mockserver.count(host, "/robots.txt") == 1
    assert sorted(p for p in mockserver.paths(host) if p != "/robots.txt") == ["/alpha", "/beta?x"]
    assert crawler.stat("robotstxt/forbidden") == 2


@pytest_twisted.ensureDeferred
async def test_browser_like_user_agent_warns_once(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    browser = (
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/126.0 Safari/537.36"
    )
    mockserver.configure(host, {"robots": {"body": ROBOTS + "\nUser-agent: chrome\nDisallow: /"}})
    urls = [mockserver.url(host, p) for p in PATHS]
    crawler = await run_crawl(urls, settings={**REP, "USER_AGENT": browser})
    # The token is "Mozilla" (the leading product token), so only `*` applies.
    assert forbidden_paths(mockserver, host) == ["/star"]
    warnings = [
        m
        for m in crawler.messages(level=logging.WARNING, logger="scrapy_rep")
        if "browser-like" in m
    ]
    assert len(warnings) == 1, warnings
    assert "Mozilla" in warnings[0]
