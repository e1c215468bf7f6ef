"""Scrapy's internals behind one door, and what Scrapy's own RobotsTxtMiddleware promises.

Each access past Scrapy's documented API is one function with its why (listed in
docs/architecture.md, checked by tests/crawl/test_scrapy_internals.py); then
``robots_parsed`` as the stock middleware sends it, and the start-up configuration checks.
"""

from __future__ import annotations

import argparse
import logging
import operator
import sys
import time
from typing import TYPE_CHECKING, Any

from pydispatch.dispatcher import (  # type: ignore[import-untyped]  # (Scrapy's own dependency)
    getAllReceivers,
    liveReceivers,
)
from scrapy import Request, signals
from scrapy.commands import ScrapyHelpFormatter
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware as StockMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.settings import SETTINGS_PRIORITIES
from scrapy.statscollectors import StatsCollector
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object
from twisted.python.failure import Failure

from scrapy_rep.crawl.parser_plugin import RobotParser, max_size_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable

    from scrapy.crawler import Crawler

    from scrapy_rep.robotstxt._robotstxt import RobotsTxt

logger = logging.getLogger(__name__)

STOCK_PATH = "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware"


# == Scrapy internals ==================================================================
# Each function says "why:" (the reason no public API serves).


def _engine_slot(crawler: Crawler) -> Any:
    # why: the engine keeps its scheduler, wake-up and closing state only on ``_slot``
    return getattr(crawler.engine, "_slot", None)


def scheduler_of(crawler: Crawler) -> Any:
    """The running crawl's scheduler, or None before the engine opened the spider."""
    # why: the engine has no public accessor for its scheduler (``engine._slot.scheduler``)
    return getattr(_engine_slot(crawler), "scheduler", None)


def engine_takes_requests(crawler: Crawler) -> bool:
    """Whether a request scheduled now will be crawled (a spider open, the engine not closing)."""
    # why: ``engine._slot.closing`` is the only sign that the engine has begun closing
    slot = _engine_slot(crawler)  # (None without an engine)
    if slot is None or getattr(crawler.engine, "spider", None) is None:
        return False
    return getattr(slot, "closing", None) is None


def wake_engine(crawler: Crawler) -> None:
    """Have the engine pull from the scheduler now, not at its next heartbeat (5 s)."""
    # why: ``engine._slot.nextcall``: no public call wakes it without scheduling a request
    nextcall = getattr(_engine_slot(crawler), "nextcall", None)
    if nextcall is not None:
        nextcall.schedule()


def reschedule(crawler: Crawler, request: Request) -> None:
    """Schedule a released request without a second ``request_scheduled`` (its receivers
    saw it when it was held); the caller checks ``engine_takes_requests``."""
    # why: no call schedules without announcing: ``_schedule_request`` after its signal
    engine: Any = crawler.engine
    slot = engine._slot
    if not slot.scheduler.enqueue_request(request):
        engine.signals.send_catch_log(
            signals.request_dropped, request=request, spider=engine.spider
        )
    slot.nextcall.schedule()


def not_scheduled(reason: str) -> Failure:
    """A ``request_scheduled`` receiver's answer that keeps a request out of the scheduler
    without a traceback (whose frames would form a cycle around the request)."""
    # why: ``_schedule_request`` drops on a Failure of IgnoreRequest; only raising is documented
    return Failure(IgnoreRequest(reason))  # type: ignore[no-untyped-call]


def dupefilter_of(scheduler: Any) -> Any:
    # why: Scrapy's Scheduler (and scrapy-redis's) keeps it on ``df``, with no accessor
    return getattr(scheduler, "df", None)


def scheduler_persists(scheduler: Any) -> bool:
    """Whether scrapy-redis's scheduler keeps its queue past this run (SCHEDULER_PERSIST)."""
    # why: scrapy-redis's scheduler says so only on its ``persist`` attribute
    return getattr(scheduler, "persist", False) is True


def is_shared_scheduler(scheduler: Any) -> bool:
    """scrapy-redis's scheduler (its dupefilter lives in Redis, shared by its processes)."""
    # why: scrapy-redis's scheduler is recognised by its ``persist`` attribute
    return hasattr(scheduler, "persist")


def run_before_scheduler_close(scheduler: Any, before: Callable[[], None]) -> None:
    """Call ``before()`` when the engine closes ``scheduler``, just before it closes."""
    # why: Scrapy closes the scheduler before ``spider_closed``, with no signal between
    if not hasattr(scheduler, "close"):  # (None before the engine opened the spider)
        return
    original_close = scheduler.close

    def close(reason: str) -> Any:
        before()
        return original_close(reason)

    scheduler.close = close


def downloader_middlewares(crawler: Crawler) -> list[Any]:
    # why: reachable only through ``engine.downloader.middleware.middlewares``
    manager = getattr(downloader_of(crawler), "middleware", None)
    return list(getattr(manager, "middlewares", ()))


def is_plain_offsite_middleware(mw: Any, offsite_class: type) -> bool:
    """Scrapy's OffsiteMiddleware itself, its documented extension points not replaced."""
    # why: its Scrapy 2.19 ``_update_host_regex`` is part of that policy too
    replaced = {"should_follow", "get_host_regex", "_update_host_regex"} & vars(mw).keys()
    return type(mw) is offsite_class and not replaced


def offsite_host_regex(mw: Any, spider: Any) -> Any:
    """The host pattern ``OffsiteMiddleware.should_follow`` matches now, or None."""
    # why: ``host_regex`` and (2.19) ``_update_host_regex`` are the middleware's own
    update = getattr(mw, "_update_host_regex", None)
    if update is not None:  # Scrapy 2.19: allowed_domains may change during the crawl
        update(spider)
    return getattr(mw, "host_regex", None)


def downloader_of(crawler: Crawler) -> Any:
    # why: ``engine.downloader`` holds the download slots Crawl-delay is kept on
    return getattr(crawler.engine, "downloader", None)


def download_slot(downloader: Any, key: Any) -> Any:
    """The live download slot for ``key``, or None (never made, or collected idle)."""
    # why: ``Downloader.slots``, undocumented
    return downloader.slots.get(key)


def new_slot_timing(downloader: Any, key: str) -> tuple[float, float]:
    """(delay, jitter) Scrapy gives a slot it makes for ``key``."""
    # why: ``Downloader.per_slot_settings`` is what a new slot reads; the defaults are
    # ``Downloader._delay`` (AutoThrottle's start delay included) and ``_jitter`` (2.19+),
    # or read per new slot before (the spider's download_delay or DOWNLOAD_DELAY)
    if hasattr(downloader, "_delay"):
        default = downloader._delay
    else:
        default = getattr(getattr(downloader.crawler, "spider", None), "download_delay", None)
        if default is None:
            default = downloader.settings.getfloat("DOWNLOAD_DELAY")
    settings = downloader.per_slot_settings.get(key, {})
    delay = float(settings.get("delay", default or 0.0))
    if hasattr(downloader, "_jitter"):  # Scrapy 2.19+
        return delay, float(settings.get("jitter", downloader._jitter))
    randomize = bool(settings.get("randomize_delay", downloader.randomize_delay))
    return delay, 0.5 if randomize else 0.0


def keep_new_slot_timing(downloader: Any, key: str, delay: float, jitter: float) -> None:
    """Make every slot Scrapy makes for ``key`` from now on start with this timing."""
    # why: ``Downloader.per_slot_settings`` is what a new slot reads
    settings = downloader.per_slot_settings.setdefault(key, {})
    settings["delay"] = delay
    if hasattr(downloader, "_jitter"):  # Scrapy 2.19+
        settings["jitter"] = jitter
    else:
        settings["randomize_delay"] = jitter >= 0.5


def slot_jitter(slot: Any) -> float:
    """The jitter fraction a live slot's delay is varied by (+/-)."""
    # why: ``Slot.jitter`` (2.19+), or ``Slot.randomize_delay`` before it: +/-50 % or none
    if hasattr(slot, "jitter"):
        return float(slot.jitter or 0.0)
    return 0.5 if getattr(slot, "randomize_delay", False) else 0.0


def set_slot_jitter(slot: Any, jitter: float) -> None:
    """Vary a live slot's delay by ``jitter`` from now on."""
    # why: Scrapy has no API to retime a live slot; its fields are written directly
    if hasattr(slot, "jitter"):
        slot.jitter = jitter
    else:
        slot.randomize_delay = jitter >= 0.5


def raise_slot_delay(slot: Any, delay: float) -> float:
    """Raise a live slot's delay to at least ``delay``; returns the slot's delay."""
    # why: Scrapy has no API to retime a live slot (AutoThrottle writes ``Slot.delay`` too)
    if slot.delay < delay:
        slot.delay = delay
    return float(slot.delay)


_EPOCH_2001 = 978_307_200.0  # a wall-clock stamp is larger; a monotonic one (uptime) is not


def slot_ready_in(slot: Any) -> float:
    """Seconds until a live slot lets its next download go, its longest jitter counted."""
    # why: ``Slot.lastseen`` is time.monotonic() since Scrapy 2.19, time.time() before
    if not slot.lastseen:
        return 0.0
    longest = float(slot.delay) * (1 + slot_jitter(slot))
    lastseen = float(slot.lastseen)
    now = time.monotonic() if lastseen < _EPOCH_2001 else time.time()
    return max(lastseen + longest - now, 0.0)


def counter_on_stats_dict(stats: Any) -> Callable[..., None] | None:
    """``count(key, n)``: Scrapy's own ``inc_value`` without Scrapy 2.19's per-access
    wrapper; None for a collector that overrides ``inc_value``."""
    # why: the counts live in ``_stats``, read past the collector's own __getattribute__
    if getattr(type(stats), "inc_value", None) is not StatsCollector.inc_value:
        return None
    get_attribute = object.__getattribute__

    def count(key: str, n: int = 1) -> None:
        # on the dict it holds now (set_stats may have replaced it)
        values = get_attribute(stats, "_stats")
        values[key] = values.get(key, 0) + n

    return count


def request_field_readers() -> dict[str, Callable[[Request], Any]]:
    """A reader per Request container field that does not create it (None if not yet made)."""
    # why: those properties create an empty container on first read; the private field
    # behind one (``_meta``, ...) is None until then (found by probing: 2.14, 2.19 differ)
    probe = Request("http://a.invalid/")
    readers: dict[str, Callable[[Request], Any]] = {}
    for name in ("headers", "cookies", "meta", "flags", "cb_kwargs"):
        private = "_" + name
        lazy = isinstance(getattr(Request, name, None), property) and (
            getattr(probe, private, probe) is None
        )
        readers[name] = operator.attrgetter(private if lazy else name)
    return readers


def has_receivers(crawler: Crawler, signal: object) -> bool:
    # why: SignalManager has no such query; scrapy.utils.signal asks pydispatch this way
    receivers = getAllReceivers(crawler.signals.sender, signal)
    return any(True for _ in liveReceivers(receivers))


def is_sitemap_spider_request(request: Request) -> bool:
    """Whether SitemapSpider made ``request`` to read a sitemap or a robots.txt."""
    # why: SitemapSpider marks its requests only by its private callback ``_parse_sitemap``
    return getattr(request.callback, "__name__", None) == "_parse_sitemap"


def command_line() -> list[str]:
    # why: ``scrapy.cmdline`` pops the command name from ``sys.argv``; ``sys.orig_argv`` keeps it
    return [str(arg) for arg in getattr(sys, "orig_argv", sys.argv)]


class CommandHelpFormatter(ScrapyHelpFormatter):
    """Scrapy's command help formatter, but the description keeps its line breaks and an
    option's help line ending in a colon is not made a heading."""

    # why: Scrapy makes a heading of every line ending in a colon in ``_join_parts``, over
    # argparse's ``_format_action`` and ``_fill_text``, with no documented way around

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "".join(indent + line for line in text.splitlines(keepends=True))

    _in_action = 0

    def _format_action(self, action: argparse.Action) -> str:
        self._in_action += 1
        try:
            return super()._format_action(action)
        finally:
            self._in_action -= 1

    def _join_parts(self, part_strings: Iterable[str]) -> str:
        if self._in_action:  # the lines of one option's help: no headings in there
            return argparse.HelpFormatter._join_parts(self, part_strings)
        return super()._join_parts(part_strings)


def cached_selector(response: object) -> Any:
    """The Selector that ``response.selector`` already built, or None."""
    # why: no public way to ask whether it exists; ``response.selector`` would build one
    # (a full lxml parse of the page, the cost docs/page.md promises not to add)
    return getattr(response, "_cached_selector", None)


# == What the stock middleware promises ================================================


async def send_robots_parsed(
    crawler: Crawler,
    body: bytes,
    request: Request,
    parsed: Callable[[bytes, Request], Awaitable[RobotsTxt]] | None = None,
) -> None:
    """Send ``robots_parsed`` (Scrapy 2.18+) as Scrapy's own middleware does, with the body
    applied (empty for a 4xx) and, when someone listens, the crawl's parsed copy (*parsed*)
    rather than a second parse on the reactor at the first query."""
    signal = getattr(signals, "robots_parsed", None)
    if signal is None:  # Scrapy before 2.18 has no such signal
        return
    robots = None
    if parsed is not None and has_receivers(crawler, signal):
        try:
            robots = await parsed(body, request)
        except Exception:  # never lose the origin's requests over it: parse on use
            logger.exception("could not prepare robots.txt for robots_parsed")
    parser = RobotParser(body, max_size_of(crawler), robots)
    await crawler.signals.send_catch_log_async(signal=signal, robotparser=parser, request=request)


def _load(key: object) -> object:
    try:
        return load_object(key) if isinstance(key, str) else key
    except Exception:  # Scrapy itself reports a path it cannot load
        return None


def is_stock_middleware(key: object) -> bool:
    """Whether a component key names Scrapy's RobotsTxtMiddleware or a subclass of it."""
    component = _load(key)
    return isinstance(component, type) and issubclass(component, StockMiddleware)


def _name(key: object) -> str:
    return f"{key.__module__}.{key.__qualname__}" if isinstance(key, type) else str(key)


def check_configuration(crawler: Crawler) -> None:
    """Log one WARNING per configuration mistake, once, at start-up."""
    settings = crawler.settings
    enabled = build_component_list(settings.getwithbase("DOWNLOADER_MIDDLEWARES"))
    stock = " and ".join(_name(key) for key in enabled if is_stock_middleware(key))
    if stock:
        logger.warning(
            "%s is enabled beside scrapy_rep.RobotsTxtMiddleware: robots.txt "
            "is fetched twice and Scrapy's middleware drops requests by its own rules. "
            "Enable scrapy-rep with ADDONS = {'scrapy_rep.Addon': 0} (it disables the "
            "stock middleware and its subclasses), or set %s to None in "
            "DOWNLOADER_MIDDLEWARES.",
            stock,
            stock,
        )
    parser = settings.get("ROBOTSTXT_PARSER")
    # Scrapy's default (Protego) is not a choice of the project
    chosen = settings.getpriority("ROBOTSTXT_PARSER") not in (None, SETTINGS_PRIORITIES["default"])
    if chosen and parser and _load(parser) is not RobotParser:
        logger.warning(
            "ROBOTSTXT_PARSER = %r is ignored: scrapy-rep matches with its own "
            "RFC 9309 engine (explain(), Crawl-delay, the stored copy and 'scrapy robots' "
            "all need it). Remove the setting, or set it to 'scrapy_rep.RobotParser'.",
            _name(parser),
        )
