"""Per-request stats skip Scrapy 2.19's per-access wrapper only for Scrapy's own
``inc_value`` (``stat_counter``, crawl/decide.py): a collector that overrides it still
receives every count."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest_twisted
from scrapy.statscollectors import MemoryStatsCollector

from tests.support.crawl import DISALLOW_PRIVATE, REP


class ForwardingStats(MemoryStatsCollector):
    """A collector that also sends its counts elsewhere (as exporters do)."""

    forwarded: ClassVar[list[tuple[str, int]]] = []

    def inc_value(self, key: str, count: int = 1, start: int = 0, spider: Any = None) -> None:
        type(self).forwarded.append((key, count))
        super().inc_value(key, count, start)


@pytest_twisted.ensureDeferred
async def test_default_collector_counts_every_decision(mockserver: Any, run_crawl: Any) -> None:
    host = mockserver.unique_host("stats")
    robots = DISALLOW_PRIVATE + "Content-Signal: search=yes\n"
    mockserver.configure(host, {"robots": {"body": robots}})
    urls = [mockserver.url(host, p) for p in ("/a", "/b", "/c", "/private", "/private/x")]
    crawler = await run_crawl(urls, settings=REP)
    assert crawler.stat("robotstxt/allowed") == 3
    assert crawler.stat("robotstxt/forbidden") == 2
    assert crawler.stat("rep/usage/search/y") == 3
    # the labels the file does not declare are not counted
    assert not [key for key in crawler.stats.get_stats() if key.endswith("/unknown")]


@pytest_twisted.ensureDeferred
async def test_a_collector_overriding_inc_value_receives_every_count(
    mockserver: Any, run_crawl: Any
) -> None:
    ForwardingStats.forwarded.clear()
    host = mockserver.unique_host("stats")
    mockserver.configure(host, {"robots": {"body": DISALLOW_PRIVATE}})
    urls = [mockserver.url(host, p) for p in ("/a", "/b", "/private")]
    settings = {**REP, "STATS_CLASS": f"{__name__}.ForwardingStats"}
    crawler = await run_crawl(urls, settings=settings)
    forwarded = ForwardingStats.forwarded
    assert forwarded.count(("robotstxt/allowed", 1)) == 2
    assert forwarded.count(("robotstxt/forbidden", 1)) == 1
    assert crawler.stat("robotstxt/allowed") == 2
    assert crawler.stat("robotstxt/forbidden") == 1
