"""Real crawls for the parser's decisions (docs/rfc.md): product tokens with digits
pick their own group, and each parsed copy's issues are counted in one DEBUG line."""

from __future__ import annotations

import logging
from typing import Any

import pytest_twisted

REP: dict[str, Any] = {
    "ADDONS": {"scrapy_rep.Addon": 0},
    "REP_STORAGE": "memory",
    "RETRY_ENABLED": False,
    "LOG_LEVEL": "DEBUG",
}
ROBOTS = (
    "User-agent: Agent1\nDisallow: /one\n\n"
    "User-agent: Agent2\nDisallow: /two\n\n"
    "User-agent: MJ12bot\nDisallow: /mj\n\n"
    "User-agent: *\nDisallow: /star\n"
    "Host: example.com\nCrawl-delay: soon\ndisalow: /typo\n"
)
PATHS = ("/one", "/two", "/mj", "/star", "/typo")


@pytest_twisted.ensureDeferred
async def test_digits_in_tokens_pick_their_own_group(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    mockserver.configure(host, {"robots": {"body": ROBOTS}})
    urls = [mockserver.url(host, p) for p in PATHS]
    settings = {**REP, "ROBOTSTXT_USER_AGENT": "Agent2/1.0 (+http://agent.invalid)"}
    crawler = await run_crawl(urls, settings=settings)
    received = set(mockserver.paths(host))
    # only Agent2's group: not merged with Agent1's (Google's library would cut both
    # names at the digit), never with "*"
    assert [p for p in PATHS if p not in received] == ["/two"]
    assert crawler.stat("robotstxt/forbidden") == 1


@pytest_twisted.ensureDeferred
async def test_issues_are_counted_in_one_debug_line_per_origin(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    mockserver.configure(host, {"robots": {"body": ROBOTS}})
    urls = [mockserver.url(host, p) for p in PATHS]
    crawler = await run_crawl(urls, settings={**REP, "ROBOTSTXT_USER_AGENT": "MJ12bot"})
    assert sorted(p for p in PATHS if p not in set(mockserver.paths(host))) == ["/mj"]
    lines = [
        m
        for m in crawler.messages(level=logging.DEBUG, logger="scrapy_rep")
        if "not taken as written" in m
    ]
    assert len(lines) == 1, lines
    assert mockserver.origin(host) in lines[0]
    assert "3 line(s)" in lines[0]
    assert "unknown-field 1, invalid-value 1, typo 1" in lines[0]
