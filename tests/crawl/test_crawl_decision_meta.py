"""``request.meta["robotstxt_decision"]``: the same keys on every decision, and one
vocabulary of ``reason`` / ``source`` slugs (the one ``scrapy robots --json`` uses).

Real crawls against the mock server: a rule set, a 404 (allow-all), an origin that
stays unreachable until the fallback allows it, and audit mode's would-delay.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest_twisted

from scrapy_rep.crawl.product_token import BROWSER_TOKENS

REP = {"ADDONS": {"scrapy_rep.Addon": 0}, "REP_STORAGE": "memory"}
KEYS = {
    "allowed",
    "reason",
    "source",
    "line",
    "rule",
    "groups",
    "origin",
    "product_token",
    "robots",
    "waited",
}
#: The documented vocabularies (docs/reference.rst, "Decision meta").
REASONS = {
    "rule",
    "no-matching-rule",
    "no-matching-group",
    "robots.txt-always-allowed",
    "allow-all",
    "fallback-allow",
    "fallback-disallow",
    "unreachable",
}
SOURCES = {"fresh", "expired", "stale", "fallback", "unreachable"}


def _decisions(crawler: Any) -> dict[str, dict[str, Any]]:
    return {r.url: r.meta["robotstxt_decision"] for r in crawler.spider.responses}


@pytest_twisted.ensureDeferred
async def test_every_decision_has_the_same_keys(mockserver: Any, run_crawl: Any) -> None:
    rules, missing, down = (mockserver.unique_host(p) for p in ("m-rules", "m-404", "m-down"))
    mockserver.configure_many(
        {
            rules: {"robots": {"body": "User-agent: *\nAllow: /\n"}},
            missing: {"robots": {"status": 404}},
            down: {"robots": {"status": 503}},
        }
    )
    urls = [mockserver.url(rules, "/a"), mockserver.url(missing, "/b"), mockserver.url(down, "/c")]
    settings = {**REP, "REP_UNREACHABLE_WAIT": 0.5, "REP_RETRY_BACKOFF": 0.2}
    crawler = await run_crawl(urls, settings=settings)
    decisions = _decisions(crawler)
    assert set(decisions) == set(urls)
    for decision in decisions.values():
        assert set(decision) == KEYS
        assert decision["reason"] in REASONS and decision["source"] in SOURCES
    by_rule, allow_all, fallback = (decisions[url] for url in urls)
    assert (by_rule["reason"], by_rule["source"], by_rule["line"]) == ("rule", "fresh", 2)
    assert by_rule["rule"] == "Allow: /" and by_rule["groups"] == ["*"]
    assert (allow_all["reason"], allow_all["source"], allow_all["robots"]) == (
        "allow-all",
        "fresh",
        "404",
    )
    assert (allow_all["line"], allow_all["rule"], allow_all["groups"]) == (None, None, [])
    assert (fallback["reason"], fallback["source"]) == ("fallback-allow", "fallback")
    assert (fallback["line"], fallback["rule"], fallback["groups"]) == (None, None, [])


@pytest_twisted.ensureDeferred
async def test_audit_would_delay_is_a_slug(mockserver: Any, run_crawl: Any, host: str) -> None:
    mockserver.configure(host, {"robots": {"status": 503}})
    url = mockserver.url(host, "/x")
    crawler = await run_crawl([url], settings={**REP, "REP_ENFORCE": False})
    decision = _decisions(crawler)[url]
    assert set(decision) == KEYS
    assert (decision["allowed"], decision["reason"], decision["source"]) == (
        True,
        "unreachable",
        "unreachable",
    )
    start = [m for m in crawler.messages(logging.INFO) if "obeying robots.txt" in m]
    assert len(start) == 1
    # The start line must not promise what audit mode does not do (it waits for the
    # first answer of each origin).
    assert "nothing is dropped" in start[0] and "delayed" not in start[0]
    assert "REP_ENFORCE = False" in start[0]


@pytest_twisted.ensureDeferred
async def test_browser_token_warning_names_its_source(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    assert "mozilla" in BROWSER_TOKENS
    mockserver.configure(host, {"robots": {"status": 404}})
    settings = {**REP, "ROBOTSTXT_USER_AGENT": "Mozilla/5.0 (compatible; X)"}
    crawler = await run_crawl([mockserver.url(host, "/a")], settings=settings)
    [warning] = [m for m in crawler.messages(logging.WARNING) if "browser-like" in m]
    assert "taken from ROBOTSTXT_USER_AGENT" in warning
    # It set the setting already: the advice is to change its value, not to set it.
    assert "Set ROBOTSTXT_USER_AGENT" not in warning

    other = mockserver.unique_host("ua-header")
    mockserver.configure(other, {"robots": {"status": 404}})
    settings = {**REP, "USER_AGENT": "Mozilla/5.0 (X11)"}
    crawler = await run_crawl([mockserver.url(other, "/a")], settings=settings)
    [warning] = [m for m in crawler.messages(logging.WARNING) if "browser-like" in m]
    assert "Set ROBOTSTXT_USER_AGENT" in warning
