"""``RobotsTxtMiddleware``: the Scrapy glue around the policy, the store and the fetcher.

Two hooks gate a request (docs/architecture.md follows one through): ``request_scheduled``
keeps a request of an undecided origin in the ``WaitingRoom``, holding no download
concurrency, until the origin is decided; ``process_request`` allows or drops it by the
rules, and sends one whose origin became undecided after scheduling back to the scheduler.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider, IgnoreRequest, NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.task import LoopingCall

from scrapy_rep.crawl import compat
from scrapy_rep.crawl.closing import WaitingAtClose, fate_of
from scrapy_rep.crawl.cluster_delay import make_cluster_delay
from scrapy_rep.crawl.coordinator import OriginCoordinator
from scrapy_rep.crawl.decide import Decider, stat_counter
from scrapy_rep.crawl.durable_waiting import (
    make_durable_waiting,
    scrapy_redis_idle_expired,
    waiting_fate_line,
)
from scrapy_rep.crawl.fetcher import FETCH_META_KEY, RobotsFetcher
from scrapy_rep.crawl.origins import Origins
from scrapy_rep.crawl.record import recorder_for
from scrapy_rep.crawl.release_retry import ReleaseRetry
from scrapy_rep.crawl.report import log_summary
from scrapy_rep.crawl.request_codec import RequestCodec
from scrapy_rep.crawl.scheduling import (
    NOT_SCHEDULED,
    SCHEDULED_META_KEY,
    SchedulerBridge,
    one_shot_command,
)
from scrapy_rep.crawl.sitemap import copy_response, is_sitemap_spider
from scrapy_rep.crawl.store_calls import installed_reactor
from scrapy_rep.crawl.usage import UsageKeeper
from scrapy_rep.crawl.visibility import IdleWatch, duration
from scrapy_rep.crawl.waiting_room import Spill, WaitingRoom, spill_root
from scrapy_rep.policy.config import Config, SettingError, unknown_settings
from scrapy_rep.policy.origin import origin_of_memo
from scrapy_rep.policy.robots_policy import RobotsPolicy
from scrapy_rep.storage.factory import START_REACH_WAIT, create_storage

if TYPE_CHECKING:
    from collections.abc import Sequence

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.python.failure import Failure
    from typing_extensions import Self

    from scrapy_rep.policy.robots_policy import Evaluation

__all__ = ["SCHEDULED_META_KEY", "RobotsTxtMiddleware"]

logger = logging.getLogger(__name__)

# How often durable waiting is asked for requests orphaned by dead processes.
ADOPT_INTERVAL = 5.0


class RobotsTxtMiddleware:
    """RFC 9309 robots.txt, with Google's error states. Drop-in for Scrapy's middleware."""

    def __init__(self, crawler: Crawler) -> None:
        for name, close in unknown_settings(crawler.settings):  # typos, most of them
            hint = f"; did you mean {close}?" if close else ""
            logger.warning("unknown setting %s is ignored%s", name, hint)
        try:
            self.config = config = Config.from_settings(crawler.settings)
            if not config.obey:  # (Scrapy says nothing of a middleware that is off)
                logger.info(
                    "scrapy-rep is off: ROBOTSTXT_OBEY is False, so robots.txt is not "
                    "fetched or obeyed (set ROBOTSTXT_OBEY = True to obey it)"
                )
                raise NotConfigured
            self.clock = config.clock or time.time  # REP_CLOCK, validated by Config
            self.storage = create_storage(config, crawler.settings, reach_within=START_REACH_WAIT)
            self.recorder = recorder_for(crawler, config, self.clock)
        except SettingError as exc:
            # one line that names the setting, before Scrapy's 30-line traceback
            logger.error("the crawl cannot start: %s", exc)
            raise
        compat.check_configuration(crawler)  # stock middleware beside us, ROBOTSTXT_PARSER
        self.crawler = crawler
        assert crawler.stats is not None
        self.stats = crawler.stats
        self._inc = stat_counter(self.stats)
        codec = RequestCodec(crawler)  # held requests as bytes
        self.keeper = make_durable_waiting(crawler, config, self.storage, codec)
        self.bridge = SchedulerBridge(crawler)
        self.room = WaitingRoom(
            self.keeper,
            self.clock,
            lambda *a: installed_reactor().callLater(*a),
            self._admit,
            memory_bound=config.memory_max_held,
            make_spill=lambda: Spill(spill_root(crawler.settings)),
            on_unserialisable=lambda _: self._inc("robotstxt/held_unserialisable"),
            codec=codec,
        )
        self.release = ReleaseRetry(
            self.bridge.reinject,
            self.room.hold_until,
            self.clock,
            self._inc,
            config.logstats_interval,
        )
        self.origins = origins = Origins(
            config.memory_max_origins, max_bytes=config.memory_max_bytes, held=self.room.count
        )
        self.decider = Decider(crawler, config, origins, self.recorder)
        self.fetcher = RobotsFetcher(crawler, config, self.clock, self.decider.parsed_for)
        self.one_shot = one_shot_command()
        self.coordinator = OriginCoordinator(
            RobotsPolicy(config),
            self.storage,
            self.fetcher,
            self.clock,
            self.room,
            self.release.release,
            self._inc,
            releasable=self._may_proceed,
            recorder=self.recorder,
            waiting_fate=lambda: fate_of(self.bridge, self.keeper),
            give_up=self._give_up if self.one_shot else None,
            origins=origins,
        )
        self.closing = WaitingAtClose(
            crawler, self.room, self.bridge, self.keeper, origins, self.clock, self.recorder
        )
        # False once the spider is known not to be a SitemapSpider (nothing to ask then)
        self._sitemap_spider = True
        self.usage = UsageKeeper(crawler, config, self.decider, self.recorder)
        self.idle = IdleWatch(config.idle_wait, config.logstats_interval)
        self._adopting: LoopingCall | None = None
        self.cluster_delay = make_cluster_delay(
            crawler,
            config,
            self.decider,
            self.storage,
            hold_until=self.hold_until,
            ready=lambda origin: self._may_proceed(self.coordinator.evaluate(origin)),
            origin_of=origin_of_memo,
            clock=self.clock,
        )
        connect = crawler.signals.connect
        connect(self._on_request_scheduled, signal=signals.request_scheduled)
        connect(self._on_spider_idle, signal=signals.spider_idle)
        connect(self._on_spider_opened, signal=signals.spider_opened)
        connect(self._on_spider_closed, signal=signals.spider_closed)
        logger.info(
            "obeying robots.txt (%s), store: %s",
            "enforcing"
            if config.enforce
            else "audit mode (REP_ENFORCE = False): nothing is dropped; requests wait only "
            "for their origin's first robots.txt answer",
            self.storage.describe(),
        )
        if not self.one_shot:
            # Said once, before any stop: whether waiting requests outlive the run.
            logger.info("%s", waiting_fate_line(config, crawler.settings, self.keeper))

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    @staticmethod
    def _origin_to_check(request: Request) -> str | None:
        meta = request.meta
        if meta.get("dont_obey_robotstxt") or FETCH_META_KEY in meta:
            return None
        return origin_of_memo(request.url)

    # -- scheduling-time gate ----------------------------------------------------------

    def _on_request_scheduled(
        self, request: Request, spider: Spider | None = None, **_: Any
    ) -> Failure | None:
        # (**_: pydispatch then passes the signal's arguments without filtering them)
        origin = self._origin_to_check(request)
        if origin is None:
            return None
        if request.dont_filter and self.keeper.passed(request):
            logger.debug("Dropped: a copy parked by an earlier run was adopted: %s", request)
            return NOT_SCHEDULED
        fresh = self.origins.fresh(origin, self.clock())
        if fresh is None or not self._may_proceed(fresh[1]):
            # Offsite drops it anyway: neither hold it nor let it cause a robots.txt fetch.
            if self.bridge.offsite_drops(request):
                return None
            evaluation = self.coordinator.evaluate(origin, request)
            # (an unloaded origin's store read is waited for by process_request)
            if not (self._may_proceed(evaluation) or self.origins.reloading(origin)):
                if self.one_shot and evaluation.wake_at is not None:
                    self._give_up(origin, [], "unreachable")
                    raise IgnoreRequest(f"robots.txt of {origin} is unreachable")
                # A Failure of IgnoreRequest keeps it out of the scheduler, with no
                # request_dropped; a duplicate is dropped (and counted) as the scheduler would.
                if not self.bridge.seen_before(request):
                    self.coordinator.hold(origin, request)
                    logger.debug("Delayed until robots.txt of %s is known: %s", origin, request)
                return NOT_SCHEDULED
        request.meta[SCHEDULED_META_KEY] = True
        return None

    def _may_proceed(self, evaluation: Evaluation) -> bool:
        if evaluation.ready:
            return True
        # Audit mode delays nothing once the first fetch has an answer, even unreachable.
        return not self.config.enforce and evaluation.wake_at is not None

    def hold_until(self, origin: str, request: Request, when: float, reason: str) -> None:
        """Hold ``request`` until ``when`` (clock seconds), then gate it again."""
        self.room.hold_until(origin, request, when, reason)

    def _admit(self, origin: str, request: Request, since: float = 0.0) -> None:
        """A request already deduplicated (timed, adopted) enters again."""
        evaluation = self.coordinator.evaluate(origin, request)
        if not self._may_proceed(evaluation):
            self.coordinator.hold(origin, request)
            return
        self.release.release(origin, request)  # never raises (crawl/release_retry.py)

    # -- download-time decision --------------------------------------------------------

    async def process_request(
        self, request: Request, spider: Spider | None = None
    ) -> Request | Response | None:
        origin = self._origin_to_check(request)
        if origin is None:
            return None
        # The per-request path: a fresh copy with its rules ready, nothing awaited.
        fresh = self.origins.fresh(origin, self.clock())
        if fresh is not None and self.cluster_delay is None:
            rt, evaluation = fresh
            if evaluation.ready and self.decider.decide_now(request, evaluation, rt):
                self.usage.on_request(request, rt, evaluation)
                if self._sitemap_spider:
                    return copy_response(self.crawler, request, evaluation, rt.record)
                return None
        evaluation = self.coordinator.evaluate(origin, request)
        if not self._may_proceed(evaluation) and self.origins.reloading(origin):
            # An origin unloaded from RAM (REP_MEMORY_MAX_BYTES): a store read, waited for.
            await maybe_deferred_to_future(self.origins.reloaded(origin))
            evaluation = self.coordinator.evaluate(origin, request)
        if not self._may_proceed(evaluation):
            if request.meta.get(SCHEDULED_META_KEY):
                # Undecided again (a 503 refetch): it waits in the scheduler, holding no slot.
                self._inc("robotstxt/requeued")
                return request.replace(
                    dont_filter=True, meta={**request.meta, SCHEDULED_META_KEY: False}
                )
            # Not from the scheduler (engine.download_async, e.g. media pipelines):
            # returning a request there would loop, so wait here instead.
            while not self._may_proceed(evaluation):
                await maybe_deferred_to_future(self.coordinator.wait(origin))
                evaluation = self.coordinator.evaluate(origin, request)
        rt = self.coordinator.runtime(origin)
        record = rt.record  # (decide may await; the origins may unload rt meanwhile)
        await self.decider.decide(request, evaluation, rt)
        self.usage.on_request(request, rt, evaluation)
        if self.cluster_delay is not None and request.meta.get(SCHEDULED_META_KEY):
            # A cluster-wide Crawl-delay turn is waited for in the scheduler's path.
            later = await self.cluster_delay.turn(request, origin, evaluation)
            if later is not None:
                return later
        # SitemapSpider's own robots.txt request: answered from our copy (crawl/sitemap.py).
        return copy_response(self.crawler, request, evaluation, record)

    async def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response:
        # (async: Scrapy awaits a coroutine as it is, and wraps a plain value in one)
        return self.usage.on_response(request, response)

    def _give_up(self, origin: str, requests: Sequence[Request], detail: str) -> None:
        """``scrapy fetch`` / ``scrapy shell`` do not wait for an unreachable robots.txt."""
        self.stats.inc_value("robotstxt/one_shot_gave_up", max(len(requests), 1))
        logger.error(
            "robots.txt of %s is unreachable (%s); `scrapy %s` does not wait for "
            "it (a crawl would wait up to REP_UNREACHABLE_WAIT). To fetch anyway, set "
            "ROBOTSTXT_OBEY=False, or REP_ENFORCE=False to record what robots.txt would do "
            "without obeying it (e.g. scrapy %s -s REP_ENFORCE=False ...)",
            origin,
            detail,
            self.one_shot,
            self.one_shot,
        )

    # -- lifecycle ---------------------------------------------------------------------

    def _on_spider_opened(self, spider: Spider) -> None:
        self._sitemap_spider = is_sitemap_spider(spider)
        self.bridge.on_spider_opened()
        self.closing.install_handback()
        if self.keeper.durable:
            self._adopting = LoopingCall(self._adopt)
            self._adopting.start(ADOPT_INTERVAL, now=False)

    def _adopt(self) -> None:
        try:
            adopted = list(self.keeper.adopt())
        except Exception:
            logger.error("adopting orphaned held requests failed", exc_info=True)
            return
        for origin, request in adopted:
            self._inc("robotstxt/adopted")
            # As any scheduled request: a URL this run has also found is crawled once.
            if self.bridge.adopted_seen_before(request):
                self._inc("robotstxt/adopted_filtered")
                continue
            self._admit(origin, request)

    def _on_spider_idle(self, spider: Spider) -> None:
        if not self.coordinator.busy():
            # Before closing, durable waiting looks for requests parked by a dead process.
            if self.keeper.look_when_idle(self._adopt):
                raise DontCloseSpider
            return
        idle_for = self.idle.idle_for(self.stats.get_value("scheduler/dequeued", 0))
        if not self.coordinator.fetching_now():
            if scrapy_redis_idle_expired(spider) and self.closing.fate() != "dropped":
                # scrapy-redis's idle close is honoured when the waiting requests outlive it.
                logger.info(
                    "the spider closes on MAX_IDLE_TIME_BEFORE_CLOSE (scrapy-redis) "
                    "with %d request(s) waiting on robots.txt; they are %s",
                    len(self.room),
                    self.closing.fate(),
                )
                return
            if self.idle.expired(idle_for):
                self.stats.set_value("robotstxt/idle_closed", 1)
                logger.info(
                    "nothing but %d request(s) waiting on robots.txt for %s "
                    "(REP_IDLE_WAIT): the spider closes; they are %s",
                    len(self.room),
                    duration(idle_for),
                    self.closing.fate(),
                )
                return
        self.closing.warn_waiting(idle_for, self.config.idle_wait, self.config.unreachable_wait)
        if self.idle.line_due():
            logger.info(self.closing.waiting_line(idle_for, self.config.idle_wait))
        raise DontCloseSpider

    def _on_spider_closed(self, spider: Spider, reason: str) -> None:
        if self._adopting is not None and self._adopting.running:
            self._adopting.stop()
        handed_back = self.bridge.persists()
        if self.coordinator.fetches.peak:
            self.stats.set_value("robotstxt/fetch_peak_in_flight", self.coordinator.fetches.peak)
        if self.room.spilled_total:
            self.stats.set_value("robotstxt/spilled", self.room.spilled_total)
        origins = self.origins
        if origins.unloaded:  # (REP_MEMORY_MAX_BYTES)
            self.stats.set_value("robotstxt/unloaded", origins.unloaded)
        self.stats.set_value("robotstxt/resident_bytes_peak", origins.peak_resident_bytes)
        self.coordinator.close()
        self.room.close()
        # Requests released after the scheduler closed (robots.txt answered late).
        self.closing.empty_room(handing_back=False)
        self.closing.finish(handed_back)
        audit = None
        if not self.config.enforce:
            get = self.stats.get_value
            audit = (get("robotstxt/audit/would_forbid", 0), get("robotstxt/audit/would_delay", 0))
        log_summary(list(origins.runtimes()), origins.evicted, self.stats, audit=audit)
        self.storage.close()
        # (the record closes itself at spider_closed, after this: crawl/record.py)
