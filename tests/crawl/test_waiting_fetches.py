"""Real crawls for "fetch concurrency" (docs/waiting.md): robots.txt fetches in flight
never exceed CONCURRENT_REQUESTS, however many origins a crawl is seeded with."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_twisted
from twisted.internet.task import LoopingCall

from scrapy_rep.crawl.fetcher import FETCH_META_KEY
from tests.support.crawl import DISALLOW_PRIVATE, REP, ListSpider, pages_of


class SamplingSpider(ListSpider):
    """Samples, every few milliseconds, how many robots.txt requests the downloader has
    in flight (``downloader.active``: from the start of the middleware chain on)."""

    name = "sampling"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.samples: list[int] = []
        self._loop = LoopingCall(self._sample)

    def _sample(self) -> None:
        engine = self.crawler.engine
        if engine is None or engine.downloader is None:
            return
        active = engine.downloader.active
        self.samples.append(sum(1 for r in active if FETCH_META_KEY in r.meta))

    async def start(self) -> AsyncIterator[Any]:
        self._loop.start(0.005)
        async for item in super().start():
            yield item

    def closed(self, reason: str) -> None:
        if self._loop.running:
            self._loop.stop()


@pytest.mark.slow
@pytest_twisted.ensureDeferred
async def test_robots_fetches_in_flight_never_exceed_concurrent_requests(
    mockserver: Any, run_crawl: Any
) -> None:
    hosts = [mockserver.unique_host("broad") for _ in range(300)]
    mockserver.configure_many(
        {h: {"robots": {"body": DISALLOW_PRIVATE, "delay": 0.05}} for h in hosts}
    )
    urls = [mockserver.url(h, "/a") for h in hosts]
    crawler = await run_crawl(
        urls,
        settings={**REP, "CONCURRENT_REQUESTS": 8, "REP_FETCH_TIMEOUT": 10},
        spider_cls=SamplingSpider,
        timeout=60,
    )
    samples = crawler.spider.samples
    assert samples, "no samples taken"
    assert max(samples) <= 8, max(samples)
    assert max(samples) >= 2  # they do run concurrently
    assert crawler.stat("robotstxt/fetch_peak_in_flight") == 8
    assert crawler.stat("robotstxt/request_count") == len(hosts)
    for h in hosts:
        assert pages_of(mockserver, h) == ["/a"], h
