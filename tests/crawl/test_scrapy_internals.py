"""Each Scrapy internal scrapy-rep depends on, checked against the Scrapy installed.

Every access scrapy-rep makes to a private Scrapy name or an undocumented behaviour is a
function of ``scrapy_rep/crawl/compat.py`` (``tests/test_layout.py`` keeps them there).
Each test below names the function, the Scrapy internal and the releases it was checked
against, so that a Scrapy release that changes one fails here with that message rather
than somewhere in a crawl. The engine's internals are checked in one real crawl against
the local mock server, with Scrapy alone (no scrapy-rep middleware), so that what is
checked is Scrapy's side of each door.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
import scrapy
from scrapy import Request, Spider, signals
from scrapy.core.engine import ExecutionEngine
from scrapy.downloadermiddlewares.offsite import OffsiteMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response, TextResponse
from scrapy.spiders import SitemapSpider
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler
from twisted.python.failure import Failure

from scrapy_rep.crawl import compat

CHECKED_AGAINST = "Scrapy 2.14.2 and 2.19.0"
SCRAPY_2_19 = scrapy.version_info >= (2, 19)


def changed(internal: str, function: str) -> str:
    return (
        f"Scrapy {scrapy.__version__} changed {internal}: scrapy_rep/crawl/compat.py "
        f"{function} must be updated; checked against {CHECKED_AGAINST}"
    )


# -- static checks: names, signatures, the code compat.py copies ----------------------


def test_schedule_request_is_what_reschedule_copies() -> None:
    why = changed("ExecutionEngine._schedule_request", "reschedule and not_scheduled")
    method = getattr(ExecutionEngine, "_schedule_request", None)
    assert method is not None, why
    assert list(inspect.signature(method).parameters) == ["self", "request"], why
    # reschedule does what follows the signal; not_scheduled relies on the check of
    # each receiver's result for a Failure of IgnoreRequest
    source = inspect.getsource(method)
    steps = [
        "request_scheduled",
        "isinstance(result, Failure)",
        "isinstance(result.value, IgnoreRequest)",
    ]
    steps += ["return"]
    steps += ["self._slot.scheduler.enqueue_request(request)", "request_dropped"]
    positions = [source.find(step) for step in steps]
    assert -1 not in positions and positions == sorted(positions), why
    crawl = inspect.getsource(ExecutionEngine.crawl)
    assert "self._schedule_request(request)" in crawl, why
    assert "self._slot.nextcall.schedule()" in crawl, why


def test_not_scheduled_is_a_failure_of_ignore_request() -> None:
    result = compat.not_scheduled("held")
    assert isinstance(result, Failure)
    assert isinstance(result.value, IgnoreRequest)


def test_the_stats_counter_writes_what_inc_value_writes() -> None:
    why = changed("StatsCollector._stats / inc_value", "counter_on_stats_dict")
    stats = MemoryStatsCollector(get_crawler(Spider))
    count = compat.counter_on_stats_dict(stats)
    assert count is not None, why
    stats.inc_value("a", 2)
    count("a")
    count("b", 3)
    assert stats.get_stats() == {"a": 3, "b": 3}, why
    stats.set_stats({"c": 1})  # a new dict: counted on it from now on
    count("c")
    assert stats.get_stats() == {"c": 2}, why

    class Forwarding(MemoryStatsCollector):
        def inc_value(self, key: str, count: int = 1, start: int = 0, spider: Any = None) -> None:
            super().inc_value(key, count, start)

    assert compat.counter_on_stats_dict(Forwarding(get_crawler(Spider))) is None


def test_request_field_readers_read_without_creating() -> None:
    why = changed("Request's lazy container fields", "request_field_readers")
    readers = compat.request_field_readers()
    fields = ("headers", "cookies", "meta", "flags", "cb_kwargs")
    assert set(readers) == set(fields), why
    # meta and cb_kwargs are made on first read in every supported Scrapy; headers,
    # cookies and flags too since 2.19
    lazy = {"meta", "cb_kwargs"} | ({"headers", "cookies", "flags"} if SCRAPY_2_19 else set())
    fresh = Request("http://a.test/")
    for name in lazy:
        assert getattr(fresh, "_" + name, "absent") is None, why
    for read in readers.values():
        assert not read(fresh), why
    for name in lazy:  # read, and still not made
        assert getattr(fresh, "_" + name, "absent") is None, why
    full = Request(
        "http://a.test/",
        headers={"X-A": "1"},
        cookies={"c": "1"},
        meta={"m": 1},
        flags=["f"],
        cb_kwargs={"k": 1},
    )
    for name, read in readers.items():
        assert read(full) == getattr(full, name), why


def test_has_receivers_sees_live_receivers_only() -> None:
    why = changed("pydispatch getAllReceivers/liveReceivers", "has_receivers")
    crawler = get_crawler(Spider)
    signal = object()
    assert not compat.has_receivers(crawler, signal), why

    def receiver(**_: Any) -> None:
        pass

    crawler.signals.connect(receiver, signal=signal)
    assert compat.has_receivers(crawler, signal), why
    crawler.signals.disconnect(receiver, signal=signal)
    assert not compat.has_receivers(crawler, signal), why


@pytest_twisted.ensureDeferred
async def test_sitemap_spider_requests_are_recognised() -> None:
    why = changed("SitemapSpider._parse_sitemap", "is_sitemap_spider_request")
    spider = SitemapSpider(name="sitemap", sitemap_urls=["http://a.test/robots.txt"])
    started = [request async for request in spider.start()]
    assert [compat.is_sitemap_spider_request(r) for r in started] == [True], why
    robots = TextResponse(
        "http://a.test/robots.txt",
        body=b"Sitemap: http://a.test/sitemap.xml\n",
        encoding="utf-8",
        request=started[0],
    )
    listed = list(started[0].callback(robots))  # type: ignore[misc]
    assert [r.url for r in listed] == ["http://a.test/sitemap.xml"], why
    assert all(compat.is_sitemap_spider_request(r) for r in listed), why
    assert not compat.is_sitemap_spider_request(Request("http://a.test/robots.txt")), why


def test_the_command_line_keeps_the_command_name() -> None:
    why = changed("scrapy.cmdline (the command popped from sys.argv)", "command_line")
    from scrapy import cmdline

    pop = getattr(cmdline, "_pop_command_name", None)
    assert pop is not None, why
    argv = ["scrapy", "fetch", "http://a.test/"]
    assert pop(argv) == "fetch" and argv == ["scrapy", "http://a.test/"], why
    assert compat.command_line() == [str(a) for a in sys.orig_argv]


def test_the_help_formatter_keeps_lines_and_makes_no_heading_of_an_option() -> None:
    why = changed("ScrapyHelpFormatter._join_parts", "CommandHelpFormatter")
    from scrapy.commands import ScrapyHelpFormatter

    for name in ("_join_parts", "_format_action", "_fill_text"):
        assert callable(getattr(ScrapyHelpFormatter, name, None)), why
    # A help line that wraps right after a colon: Scrapy's formatter makes it a heading
    # (title case, underlined); CommandHelpFormatter keeps it, and the description's
    # line breaks
    help_text = "one two three four five: six seven eight"
    texts = {}
    for formatter in (ScrapyHelpFormatter, compat.CommandHelpFormatter):
        parser = argparse.ArgumentParser(
            prog="scrapy robots",
            description="first line\nsecond line",
            formatter_class=lambda prog, formatter=formatter: formatter(prog, width=40),
        )
        parser.add_argument("--mode", help=help_text)
        texts[formatter] = parser.format_help()
    assert "One Two Three Four Five\n===" in texts[ScrapyHelpFormatter], why
    ours = texts[compat.CommandHelpFormatter]
    assert "one two three four five:\n" in ours and "first line\nsecond line" in ours, why


def test_scrapy_redis_says_whether_it_persists() -> None:
    scheduler_module = pytest.importorskip("scrapy_redis.scheduler")
    import scrapy_redis

    version = getattr(scrapy_redis, "__version__", "?")
    why = (
        f"scrapy-redis {version} changed Scheduler.persist: scrapy_rep/crawl/compat.py "
        "scheduler_persists and is_shared_scheduler must be updated; checked against "
        "scrapy-redis 0.9.1"
    )
    init = inspect.signature(scheduler_module.Scheduler.__init__)
    assert "persist" in init.parameters, why
    assert "persist = persist" in inspect.getsource(scheduler_module.Scheduler.__init__), why


# -- the engine, its scheduler and downloader, in one real crawl ----------------------

NEW_SLOT = "internals-new-slot"


class _CountingCall:
    def __init__(self, call: Any) -> None:
        self.call = call
        self.scheduled = 0

    def schedule(self, delay: float = 0) -> None:
        self.scheduled += 1
        self.call.schedule(delay)


PAGE_DELAY = 30.0  # long: the page slot's next turn is far off when it is measured


class InternalsSpider(Spider):
    """Asks each door of the running engine from its callbacks and keeps the answers in
    ``seen``; with one request held by ``not_scheduled`` and one put in with
    ``reschedule``."""

    name = "internals"

    def __init__(self, page: str, held: str, other: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.page, self.held, self.other = page, held, other
        self.seen: dict[str, Any] = {}
        self.scheduled: list[str] = []
        self.order: list[str] = []

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> InternalsSpider:
        spider: InternalsSpider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.on_opened, signal=signals.spider_opened)
        crawler.signals.connect(spider.on_scheduled, signal=signals.request_scheduled)
        crawler.signals.connect(spider.on_closed, signal=signals.spider_closed)
        return spider

    async def start(self) -> Any:
        yield Request(self.page, callback=self.parse)
        yield Request(self.held, callback=self.parse)

    def on_opened(self, spider: Spider) -> None:
        scheduler = compat.scheduler_of(self.crawler)
        self.seen["scheduler"] = scheduler

        def before_close() -> None:
            self.order.append("scheduler closing")
            self.seen["takes requests while closing"] = compat.engine_takes_requests(self.crawler)

        compat.run_before_scheduler_close(scheduler, before_close)

    def on_scheduled(self, request: Request, spider: Spider) -> Any:
        self.scheduled.append(request.url)
        if request.url == self.held:
            return compat.not_scheduled("held by the test")
        return None

    def on_closed(self, spider: Spider) -> None:
        self.order.append("spider_closed")

    def parse(self, response: Response) -> None:
        crawler = self.crawler
        seen = self.seen
        scheduler = compat.scheduler_of(crawler)
        seen["scheduler in parse"] = scheduler
        dupefilter = compat.dupefilter_of(scheduler)
        seen["dupefilter saw the page"] = bool(
            dupefilter is not None and dupefilter.request_seen(Request(self.page))
        )
        seen["takes requests"] = compat.engine_takes_requests(crawler)
        downloader = compat.downloader_of(crawler)
        page_slot = compat.download_slot(downloader, response.meta["download_slot"])
        seen["page slot ready in"] = compat.slot_ready_in(page_slot)
        seen["new slot default timing"] = compat.new_slot_timing(downloader, NEW_SLOT)
        compat.keep_new_slot_timing(downloader, NEW_SLOT, 40.0, 0.25)
        offsite = [
            mw for mw in compat.downloader_middlewares(crawler) if isinstance(mw, OffsiteMiddleware)
        ]
        seen["offsite middlewares"] = len(offsite)
        regex = compat.offsite_host_regex(offsite[0], self) if offsite else None
        seen["offsite regex"] = regex
        # wake_engine calls the engine's own wake-up, counted here
        engine_slot = crawler.engine._slot
        counting = _CountingCall(engine_slot.nextcall)
        engine_slot.nextcall = counting
        try:
            compat.wake_engine(crawler)
        finally:
            engine_slot.nextcall = counting.call
        seen["wakes"] = counting.scheduled
        other = Request(
            self.other,
            callback=self.parse_other,
            dont_filter=True,
            meta={"download_slot": NEW_SLOT},
        )
        compat.reschedule(crawler, other)

    def parse_other(self, response: Response) -> None:
        downloader = compat.downloader_of(self.crawler)
        slot = compat.download_slot(downloader, NEW_SLOT)
        seen = self.seen
        seen["new slot delay"] = slot.delay
        seen["new slot jitter"] = compat.slot_jitter(slot)
        seen["raised delay"] = compat.raise_slot_delay(slot, 50.0)
        compat.set_slot_jitter(slot, 0.0)
        seen["download delay, jitter off"] = slot.download_delay()
        seen["new slot timing kept"] = compat.new_slot_timing(downloader, NEW_SLOT)


@pytest_twisted.ensureDeferred
async def test_the_engine_doors_in_a_real_crawl(mockserver: Any, run_crawl: Any) -> None:
    host = mockserver.unique_host("internals")
    other_host = mockserver.unique_host("internals-other")
    page, held, other = (
        mockserver.url(host, "/page"),
        mockserver.url(host, "/held"),
        mockserver.url(other_host, "/other"),
    )
    crawler = await run_crawl(
        spider_cls=InternalsSpider,
        spider_kwargs={
            "page": page,
            "held": held,
            "other": other,
            "allowed_domains": [host, other_host],
        },
        settings={"ROBOTSTXT_OBEY": False, "DOWNLOAD_DELAY": PAGE_DELAY},
    )
    spider: InternalsSpider = crawler.spider
    seen = spider.seen

    # engine._slot: the scheduler, the closing state, the wake-up
    assert seen["scheduler"] is not None, changed("ExecutionEngine._slot", "scheduler_of")
    assert seen["scheduler in parse"] is seen["scheduler"], changed(
        "ExecutionEngine._slot", "scheduler_of"
    )
    assert seen["takes requests"] is True, changed("_Slot.closing", "engine_takes_requests")
    assert seen["takes requests while closing"] is False, changed(
        "_Slot.closing", "engine_takes_requests"
    )
    assert seen["wakes"] == 1, changed("_Slot.nextcall", "wake_engine")
    # Scheduler.df: the dupefilter the scheduler used
    assert seen["dupefilter saw the page"], changed("Scheduler.df", "dupefilter_of")
    # request_scheduled: a receiver's IgnoreRequest Failure keeps the request out
    assert mockserver.count(host, "/held") == 0, changed(
        "ExecutionEngine._schedule_request", "not_scheduled"
    )
    # reschedule: crawled, without a second request_scheduled
    assert mockserver.count(other_host, "/other") == 1, changed(
        "ExecutionEngine._schedule_request", "reschedule"
    )
    assert other not in spider.scheduled and spider.scheduled.count(page) == 1, changed(
        "ExecutionEngine._schedule_request", "reschedule"
    )
    # scheduler.close, wrapped: runs before spider_closed
    assert spider.order == ["scheduler closing", "spider_closed"], changed(
        "the order of Scheduler.close and spider_closed", "run_before_scheduler_close"
    )
    # OffsiteMiddleware
    assert seen["offsite middlewares"] == 1, changed(
        "DownloaderMiddlewareManager.middlewares", "downloader_middlewares"
    )
    regex = seen["offsite regex"]
    why = changed("OffsiteMiddleware.host_regex / _update_host_regex", "offsite_host_regex")
    assert regex is not None and regex.search(host) and regex.search(f"www.{other_host}"), why
    assert not regex.search("elsewhere.test"), why
    # Downloader: slots, per_slot_settings, the defaults of new slots, Slot fields
    why = changed("Slot.lastseen (its clock), delay or jitter", "slot_ready_in")
    assert 0 < seen["page slot ready in"] <= PAGE_DELAY * 1.5, why
    why = changed("Downloader._delay / _jitter / randomize_delay", "new_slot_timing")
    assert seen["new slot default timing"] == (PAGE_DELAY, 0.5), why
    why = changed("Downloader.per_slot_settings (read by new slots)", "keep_new_slot_timing")
    assert seen["new slot delay"] == 40.0, why
    assert seen["new slot jitter"] == (0.25 if SCRAPY_2_19 else 0.0), why
    assert seen["new slot timing kept"] == (40.0, 0.25 if SCRAPY_2_19 else 0.0), why
    why = changed("Slot.delay / jitter (written)", "raise_slot_delay and set_slot_jitter")
    assert seen["raised delay"] == 50.0, why
    assert seen["download delay, jitter off"] == 50.0, why


def test_cached_selector_is_the_one_response_selector_built() -> None:
    from scrapy.http import HtmlResponse

    response = HtmlResponse("http://a.test/", body=b"<html><head></head></html>")
    assert compat.cached_selector(response) is None, changed(
        "TextResponse._cached_selector", "cached_selector"
    )
    selector = response.selector
    assert compat.cached_selector(response) is selector, changed(
        "TextResponse._cached_selector", "cached_selector"
    )


# -- the list in docs/architecture.md -------------------------------------------------


def test_the_architecture_page_lists_every_door() -> None:
    """docs/architecture.md ("Scrapy internals we depend on") names every public function
    of compat.py's internals part, and nothing else."""
    root = Path(__file__).resolve().parents[2]
    source = (root / "scrapy_rep" / "crawl" / "compat.py").read_text()
    internals = source.split("# == Scrapy internals", 1)[1].split("# == What the stock", 1)[0]
    doors = set(re.findall(r"^(?:def|class) ([a-zA-Z]\w*)", internals, re.MULTILINE))
    page = (root / "docs" / "architecture.md").read_text()
    section = page.split("## Scrapy internals we depend on", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    listed = {name for row in rows[1:] for name in re.findall(r"`(\w+)`", row.split("|")[-2])}
    assert listed == doors, (
        f"only in compat.py: {doors - listed}; only in the page: {listed - doors}"
    )
