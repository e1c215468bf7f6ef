"""Real crawls for the graceful stop (docs/waiting.md): waiting requests
are handed back to any scheduler that persists (JOBDIR, or a shared scheduler such as
scrapy-redis's, which says so with ``persist``), and requests popped again while their
origin is still undecided wait without holding download slots."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import pytest
import pytest_twisted
from scrapy.core.scheduler import Scheduler

from tests.support.crawl import DISALLOW_PRIVATE, REP, pages_of


class PersistingScheduler(Scheduler):
    """A scheduler that persists without JOBDIR, as scrapy-redis's does with
    SCHEDULER_PERSIST: at close it reports what it still holds."""

    persist = True
    kept: ClassVar[list[str]] = []

    def close(self, reason: str) -> Any:
        while (request := self.next_request()) is not None:
            PersistingScheduler.kept.append(request.url)
        return super().close(reason)


@pytest.mark.parametrize("memory_bound", [10_000, 5], ids=["in-memory", "spilled"])
@pytest_twisted.ensureDeferred
async def test_stop_hands_back_to_a_persistent_scheduler_without_jobdir(
    mockserver: Any, run_crawl: Any, host: str, memory_bound: int
) -> None:
    mockserver.configure(host, {"robots": {"status": 503}})
    urls = [mockserver.url(host, f"/w{i}") for i in range(25)]
    PersistingScheduler.kept.clear()
    crawler = await run_crawl(
        urls,
        settings={
            **REP,
            "SCHEDULER": f"{__name__}.PersistingScheduler",
            "REP_MEMORY_MAX_HELD": memory_bound,
        },
        timeout=1.5,
        allow_timeout=True,
    )
    assert crawler.timed_out
    assert sorted(PersistingScheduler.kept) == sorted(urls)
    assert crawler.stat("robotstxt/handed_back") == 25
    assert not crawler.stat("robotstxt/dropped_at_close")
    # (the close's line; the unreachable WARNING also says they would be handed back)
    lines = [m for m in crawler.messages(logging.INFO) if "robots.txt handed back to the" in m]
    assert len(lines) == 1 and "persistent scheduler" in lines[0]


@pytest.mark.slow
@pytest_twisted.ensureDeferred
async def test_resumed_jobdir_with_a_still_unreachable_origin_does_not_deadlock(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Any
) -> None:
    """Run 1 hands back 20 requests of an origin answering 503. Run 2 resumes while it
    still answers 503, with 4 download slots and 24 healthy pages: the popped requests
    wait outside the downloader, the healthy pages are all crawled, and the spider
    closes on CLOSESPIDER_TIMEOUT, handing the 20 back again."""
    mockserver.configure(host, {"robots": {"status": 503}})
    jobdir = str(tmp_path / "job")
    down = [mockserver.url(host, f"/w{i}") for i in range(20)]
    settings = {**REP, "JOBDIR": jobdir, "CONCURRENT_REQUESTS": 4}
    first = await run_crawl(down, settings=settings, timeout=1.5, allow_timeout=True)
    assert first.stat("robotstxt/handed_back") == 20

    healthy = [mockserver.unique_host("healthy") for _ in range(6)]
    mockserver.configure_many({h: {"robots": {"body": DISALLOW_PRIVATE}} for h in healthy})
    pages = [mockserver.url(h, f"/p{i}") for h in healthy for i in range(4)]
    # A generous robots.txt timeout and window: on a loaded machine, REP's 1 s fetch timeout
    # or a 4 s window could end the run before the healthy pages are crawled (no deadlock).
    slack = {"CLOSESPIDER_TIMEOUT": 8, "REP_FETCH_TIMEOUT": 5}
    second = await run_crawl(pages, settings={**settings, **slack}, timeout=40)
    assert second.stats.get_value("finish_reason") == "closespider_timeout"
    for h in healthy:
        assert sorted(pages_of(mockserver, h)) == [f"/p{i}" for i in range(4)], h
    assert pages_of(mockserver, host) == []
    assert second.stat("robotstxt/requeued") == 20
    assert second.stat("robotstxt/handed_back") == 20
    assert not second.stat("robotstxt/dropped_at_close")
