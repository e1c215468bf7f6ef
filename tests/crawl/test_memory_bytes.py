"""RAM per origin is bounded in bytes (issue 16): idle origins beyond
``REP_MEMORY_MAX_BYTES`` drop their robots.txt copy (body and parsed rules) and read
it from the store again on their next request, without fetching robots.txt again.
Memory is counted with the registry's own accounting and by counting the objects that
hold a copy, never by timing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import pytest_twisted
from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.http import Response

from scrapy_rep.crawl.origins import Origins, ParsedCopy, parsed_bytes, record_bytes
from scrapy_rep.middleware import RobotsTxtMiddleware
from scrapy_rep.policy.config import Config, SettingError
from scrapy_rep.policy.records import RULES, OriginRecord
from scrapy_rep.robotstxt._robotstxt import RobotsTxt
from tests.support.crawl import REP, ListSpider, pages_of

ORIGINS = 30
# About 2 KB of rules each, so a few copies fill the budget below.
PADDING = "".join(f"Disallow: /section-{i}/archive/\n" for i in range(60))
ROBOTS = f"User-agent: *\n{PADDING}Disallow: /private\n"
ONE_COPY = record_bytes(ROBOTS.encode()) + parsed_bytes(ROBOTS.encode())
BUDGET = 4 * ONE_COPY


def _middleware(crawler: Crawler) -> RobotsTxtMiddleware:
    engine = crawler.engine
    assert engine is not None
    return next(
        mw for mw in engine.downloader.middleware.middlewares if isinstance(mw, RobotsTxtMiddleware)
    )


class SamplingSpider(ListSpider):
    """Records, at every response, what the origins hold: their byte count, the
    runtimes holding a robots.txt body, and those holding the Decider's parsed copy."""

    name = "sampling"

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        middleware = _middleware(self.crawler)
        registry = middleware.origins
        samples: list[tuple[int, int, int]] = self.__dict__.setdefault("samples", [])
        with_body = sum(1 for rt in registry.runtimes() if rt.record is not None and rt.record.body)
        parsed = sum(1 for rt in registry.runtimes() if rt.parsed is not None)
        samples.append((registry.resident_bytes, with_body, parsed))
        yield from super().parse(response, **kwargs)


@pytest.mark.parametrize("store", ["sqlite", "memory"])
@pytest_twisted.ensureDeferred
async def test_idle_origins_unload_and_reload_from_the_store_without_refetching(
    mockserver: Any, run_crawl: Any, tmp_path: Any, store: str
) -> None:
    """30 origins visited twice, far apart, with room for about 4 copies: the copies
    in RAM stay within the budget throughout; on the second visit each origin reads
    its record from the store and decides as before (its /private is still dropped),
    and no robots.txt is fetched twice."""
    hosts = [mockserver.unique_host(f"bytes-{store}") for _ in range(ORIGINS)]
    mockserver.configure_many({h: {"robots": {"body": ROBOTS}} for h in hosts})
    first = [mockserver.url(h, "/a") for h in hosts]
    second = [mockserver.url(h, p) for h in hosts for p in ("/b", "/private")]
    storage = f"sqlite:{tmp_path / 'robots.db'}" if store == "sqlite" else "memory"
    settings = {
        **REP,
        "REP_STORAGE": storage,
        "REP_MEMORY_MAX_BYTES": BUDGET,
        "CONCURRENT_REQUESTS": 2,
    }
    crawler = await run_crawl(first + second, settings=settings, spider_cls=SamplingSpider)
    for h in hosts:
        assert sorted(pages_of(mockserver, h)) == ["/a", "/b"], h
        assert mockserver.count(h, "/robots.txt") == 1, h
    assert crawler.stat("robotstxt/forbidden") == ORIGINS
    assert crawler.stat("robotstxt/request_count") == ORIGINS
    # A read back from the store is waited for in place: never a trip back through
    # the scheduler (robotstxt/requeued), never a robots.txt fetch.
    assert not crawler.stat("robotstxt/requeued")
    # Most origins were unloaded after their first visit and read back for the second.
    assert crawler.stat("robotstxt/unloaded") >= ORIGINS - 4
    assert crawler.stat("robotstxt/resident_bytes_peak") <= BUDGET
    samples = crawler.spider.samples
    assert len(samples) == 2 * ORIGINS
    assert max(b for b, _, _ in samples) <= BUDGET
    assert max(n for _, n, _ in samples) <= BUDGET // record_bytes(ROBOTS.encode())
    assert max(n for _, _, n in samples) <= BUDGET // ONE_COPY


class CountedCopiesSpider(SamplingSpider):
    """A ``robots_parsed`` receiver (which makes the Decider parse each robots.txt
    before the origin's record lands), checking at the signal and at every response
    that each parsed copy the Decider keeps is one the origins count."""

    name = "counted-copies"

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> CountedCopiesSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.on_robots_parsed, signal=signals.robots_parsed)
        spider.uncounted = []
        spider.checked_at_signal = 0
        return spider

    def on_robots_parsed(self, robotparser: Any, request: Request) -> None:
        self.check_copies()
        self.checked_at_signal += 1

    def check_copies(self) -> None:
        for rt in _middleware(self.crawler).origins.runtimes():
            if rt.parsed is not None and rt.parsed_bytes != parsed_bytes(rt.parsed.body):
                self.uncounted.append(rt.origin)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        self.check_copies()
        yield from super().parse(response, **kwargs)


@pytest.mark.skipif(
    not hasattr(signals, "robots_parsed"),
    reason="needs Scrapy 2.18+: the robots_parsed signal is new there",
)
@pytest_twisted.ensureDeferred
async def test_a_copy_made_before_the_record_lands_is_counted(
    mockserver: Any, run_crawl: Any
) -> None:
    """A robots_parsed receiver gets the crawl's parsed copy before the origin's record
    lands: the copy is kept on the origin and counted within REP_MEMORY_MAX_BYTES from
    then on (it was once kept, uncounted, outside the budget). The first request of
    the origin uses that copy; every request is decided as before and the bound
    holds."""
    hosts = [mockserver.unique_host("bytes-uncounted") for _ in range(12)]
    mockserver.configure_many({h: {"robots": {"body": ROBOTS}} for h in hosts})
    urls = [mockserver.url(h, p) for h in hosts for p in ("/a", "/private")]
    settings = {**REP, "REP_MEMORY_MAX_BYTES": 3 * ONE_COPY, "CONCURRENT_REQUESTS": 2}
    crawler = await run_crawl(urls, settings=settings, spider_cls=CountedCopiesSpider)
    spider = crawler.spider
    for h in hosts:
        assert pages_of(mockserver, h) == ["/a"], h
        assert mockserver.count(h, "/robots.txt") == 1, h
    assert crawler.stat("robotstxt/forbidden") == len(hosts)
    assert spider.checked_at_signal == len(hosts)
    assert spider.uncounted == []
    assert len(spider.samples) == len(hosts)
    assert max(b for b, _, _ in spider.samples) <= 3 * ONE_COPY
    assert max(n for _, _, n in spider.samples) <= 3
    assert crawler.stat("robotstxt/resident_bytes_peak") <= 3 * ONE_COPY


@pytest_twisted.ensureDeferred
async def test_without_a_tight_budget_nothing_is_unloaded(mockserver: Any, run_crawl: Any) -> None:
    hosts = [mockserver.unique_host("bytes-default") for _ in range(5)]
    mockserver.configure_many({h: {"robots": {"body": ROBOTS}} for h in hosts})
    urls = [mockserver.url(h, p) for p in ("/a", "/private") for h in hosts]
    crawler = await run_crawl(urls, settings=REP)
    assert crawler.stat("robotstxt/forbidden") == 5
    assert not crawler.stat("robotstxt/unloaded")
    assert 5 * ONE_COPY <= crawler.stat("robotstxt/resident_bytes_peak") <= 6 * ONE_COPY


def _record(body: bytes) -> OriginRecord:
    return OriginRecord(kind=RULES, body=body, fetched_at=0.0, expires_at=1e12)


def test_a_busy_origin_keeps_its_copy_whatever_the_budget() -> None:
    """Held requests, waiters, a fetch or a timer: the copy stays (and the runtime)."""
    registry = Origins(1000, max_bytes=1)  # (a runtime that is fetching is busy)
    busy = registry.get("http://busy.test")
    busy.record, busy.loaded, busy.fetching = _record(b"x" * 500), True, True
    registry.note_record(busy)
    for i in range(50):
        rt = registry.get(f"http://o{i}.test")
        rt.record, rt.loaded = _record(b"y" * 500), True
        registry.note_record(rt)
        body = rt.record.body
        registry.note_parsed(rt, ParsedCopy(body, RobotsTxt.parse(body)))
        assert rt.parsed_bytes == parsed_bytes(body)
    forgotten = [rt.origin for rt in registry.runtimes() if not rt.loaded]
    assert all(rt.parsed is None for rt in registry.runtimes() if not rt.loaded)
    assert busy.loaded and busy.record is not None and len(busy.record.body) == 500
    assert "http://busy.test" not in forgotten
    # Each idle one was unloaded when the next arrived; its summary state stays.
    assert registry.unloaded == 49 and len(forgotten) == 49
    idle = registry.lookup("http://o0.test")
    assert idle is not None and not idle.loaded and idle.record is not None
    assert idle.record.body == b"" and idle.record.kind == RULES
    assert registry.resident_bytes == busy.copy_bytes + registry.get("http://o49.test").copy_bytes


def test_an_evicted_runtime_gives_its_bytes_back() -> None:
    registry = Origins(3)
    runtimes = []
    for i in range(10):
        rt = registry.get(f"http://o{i}.test")
        rt.record, rt.loaded = _record(b"z" * 100), True
        registry.note_record(rt)
        runtimes.append(rt)
    assert len(registry) == 3
    assert registry.resident_bytes == 3 * record_bytes(b"z" * 100)
    forgotten = [rt for rt in runtimes if rt.copy_bytes == 0]
    assert len(forgotten) == 7


@pytest.mark.parametrize("value", [-1, "lots", 1.5, True])
def test_rep_memory_max_bytes_is_validated(value: Any) -> None:
    with pytest.raises(SettingError, match="REP_MEMORY_MAX_BYTES"):
        Config.from_settings({"REP_MEMORY_MAX_BYTES": value})


def test_rep_memory_max_bytes_default() -> None:
    assert Config.from_settings({}).memory_max_bytes == 64 * 2**20
    assert Config.from_settings({"REP_MEMORY_MAX_BYTES": "1000"}).memory_max_bytes == 1000
