"""A dont_filter request parked by a stopped run and adopted by the next run before its
spider yields the request again is crawled once (docs/waiting.md): the dupefilter cannot
tell the two copies apart, so scrapy-rep drops the later one and counts it.

Two real crawls in a row on one SQLite store, against the suite's local server; what the
server received and the stats are the evidence."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from scrapy import Request

from tests.support.crawl import REP, ListSpider, pages_of

ALLOW_ALL = "User-agent: *\nAllow: /\n"


class YieldsAfterAdoption(ListSpider):
    """The restarted spider: it yields its start requests only once the copy that this
    run adopted from the stopped one has been crawled (its response reached ``parse``)."""

    async def start(self) -> AsyncIterator[Any]:
        deadline = time.monotonic() + 60
        while not self.responses:
            assert time.monotonic() < deadline, "the adopted copy was not crawled"
            await asyncio.sleep(0.05)
        async for request in super().start():
            yield request


@pytest.mark.slow
@pytest_twisted.ensureDeferred
async def test_a_dont_filter_request_adopted_before_the_spider_yields_it_is_crawled_once(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Path
) -> None:
    mockserver.configure(host, {"robots": {"status": 503}})
    page = mockserver.url(host, "/start")
    settings = {
        **REP,
        "REP_STORAGE": f"sqlite:{tmp_path / 'store.db'}",
        "REP_DURABLE_WAITING": True,
        "REP_IDLE_WAIT": 1,
        "REP_RETRY_BACKOFF": 0.5,
        "REP_MAX_RETRY_BACKOFF": 1,
    }
    # Run 1: robots.txt answers 503 until the run stops; the request is kept in the store.
    first = await run_crawl([Request(page, dont_filter=True)], settings=settings)
    assert first.stat("robotstxt/kept_in_store") == 1
    assert pages_of(mockserver, host) == []

    mockserver.configure(host, {"robots": {"body": ALLOW_ALL}})
    second = await run_crawl(
        [Request(page, dont_filter=True)], settings=settings, spider_cls=YieldsAfterAdoption
    )
    assert pages_of(mockserver, host) == ["/start"]  # once, not once per copy
    assert second.stat("robotstxt/ledger/adopted") == 1
    assert second.stat("robotstxt/ledger/adopted_duplicate") == 1
