"""The cluster-wide Crawl-delay logs its turns once per origin and change, not once per
request (a long crawl of one origin would otherwise log a DEBUG line per page)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest_twisted

from tests.support.crawl import REP, pages_of

PAGES = [f"/p{n}" for n in range(4)]


@pytest_twisted.ensureDeferred
async def test_one_debug_line_for_the_turns_of_one_origin(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Path
) -> None:
    mockserver.configure(host, {"robots": {"body": "User-agent: *\nCrawl-delay: 0.2\n"}})
    settings = {**REP, "REP_STORAGE": f"sqlite:{tmp_path / 'store.db'}"}
    crawler = await run_crawl([mockserver.url(host, p) for p in PAGES], settings=settings)
    assert sorted(pages_of(mockserver, host)) == PAGES
    turns = crawler.stat("robotstxt/cluster_delay/turns")
    assert turns is not None and turns >= len(PAGES) - 1  # turns were reserved in the store
    lines = [
        m
        for m in crawler.messages(logging.DEBUG, logger="scrapy_rep")
        if m.startswith("Crawl-delay turn") and "missed by" not in m
    ]
    horizon_full = crawler.stat("robotstxt/cluster_delay/horizon_full") or 0
    # one line, and one more per change between "reserved" and "horizon full" at most
    assert 1 <= len(lines) <= 1 + 2 * horizon_full, lines
    assert horizon_full or len(lines) == 1, lines
