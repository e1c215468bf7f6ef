"""A real crawl for the WARNING that names the origins whose unreachable robots.txt keeps
the spider open (docs/waiting.md): when an origin's own wait (REP_UNREACHABLE_WAIT) ends
before the spider would close, the line says until when; past five origins, it counts
the rest."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_twisted
from scrapy.utils.defer import deferred_from_coro

from scrapy_rep.crawl.closing import MAX_LISTED
from tests.support.crawl import REP, ListSpider, pages_of
from tests.support.waits import installed_reactor

DEAD_ORIGINS = MAX_LISTED + 2
WARNING_START = "the spider stays open only for requests waiting on robots.txt: "


class StopOnWaitingWarning(ListSpider):
    """Stops the crawl (gracefully) once the waiting WARNING has been logged: it comes
    at the first idle, and the crawl would otherwise wait for REP_IDLE_WAIT."""

    name = "stop-on-waiting-warning"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stopper = _StopOnMessage(self)
        logging.getLogger("scrapy_rep.crawl.closing").addHandler(self.stopper)

    async def start(self) -> AsyncIterator[Any]:
        async for request in super().start():
            yield request
        # Scrapy calls no spider idle before the start requests are done: held here until
        # every origin's record is read from the store, the first WARNING names them all.
        while (self.crawler.stats.get_value("robotstxt/cache_hit") or 0) < DEAD_ORIGINS:
            await asyncio.sleep(0.05)

    def closed(self, reason: str) -> None:
        logging.getLogger("scrapy_rep.crawl.closing").removeHandler(self.stopper)


class _StopOnMessage(logging.Handler):
    def __init__(self, spider: ListSpider) -> None:
        super().__init__(logging.WARNING)
        self.spider = spider
        self.stopping = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.stopping and record.getMessage().startswith(WARNING_START):
            self.stopping = True
            # (not from inside the spider_idle handler that logs it)
            stop = self.spider.crawler.stop_async
            installed_reactor().callLater(0, lambda: deferred_from_coro(stop()))


@pytest_twisted.ensureDeferred
async def test_waiting_warning_says_until_when_and_counts_the_origins_past_five(
    mockserver: Any, run_crawl: Any, tmp_path: Path
) -> None:
    """Run 1 finds seven origins' robots.txt unreachable (503) in a SQLite store and
    closes on REP_IDLE_WAIT. Run 2 meets them unreachable in the store, with an hour of
    REP_UNREACHABLE_WAIT left and two hours of REP_IDLE_WAIT: its WARNING names five
    origins, each with the end of its own wait, and says "and 2 more origin(s)"."""
    hosts = [mockserver.unique_host("gone") for _ in range(DEAD_ORIGINS)]
    for host in hosts:
        mockserver.configure(host, {"robots": {"status": 503}})
    urls = [mockserver.url(host, "/page") for host in hosts]
    store = {**REP, "REP_STORAGE": f"sqlite:{tmp_path / 'rep.sqlite'}"}
    store["REP_UNREACHABLE_WAIT"] = 3600

    first = await run_crawl(urls, settings={**store, "REP_IDLE_WAIT": 1}, timeout=60)
    assert first.stat("robotstxt/unreachable") == DEAD_ORIGINS
    assert first.stat("robotstxt/dropped_at_close") == DEAD_ORIGINS

    second = await run_crawl(
        urls,
        settings={**store, "REP_IDLE_WAIT": 7200},
        spider_cls=StopOnWaitingWarning,
        timeout=120,
    )
    warnings = [m for m in second.messages(logging.WARNING) if m.startswith(WARNING_START)]
    assert len(warnings) == 1, second.messages(logging.WARNING)
    line = warnings[0]
    named = re.findall(
        r"(http://[^ ]+) \(1 request\(s\), robots.txt unreachable: 503, until "
        r"(\d\d:\d\d:\d\d UTC|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC) at the latest "
        r"\(REP_UNREACHABLE_WAIT\)\)",
        line,
    )
    origins = sorted(mockserver.origin(host) for host in hosts)
    assert [origin for origin, _ in named] == origins[:MAX_LISTED], line
    assert f"and {DEAD_ORIGINS - MAX_LISTED} more origin(s). With nothing else" in line, line
    assert all(pages_of(mockserver, host) == [] for host in hosts)
