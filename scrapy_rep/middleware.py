"""``RobotsTxtMiddleware``: the Scrapy glue around the policy, the store and the fetcher.

Two hooks gate a request:
- ``request_scheduled`` (scheduling time): a request whose origin's robots.txt is not yet
  known, or is unreachable, is held here instead of entering the scheduler. A held request
  holds no download concurrency, so other origins crawl at full speed (SCRAPY_NOTES:
  requests parked in ``process_request`` hold a global slot). It is put into the
  scheduler once the origin is decided, without a second ``request_scheduled``.
- ``process_request`` (download time): decides allow/drop from the rules. A request whose
  origin became undecided after it was scheduled is sent back through the scheduler.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider, IgnoreRequest, NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future

from scrapy_rep.crawl import compat
from scrapy_rep.crawl.coordinator import OriginCoordinator
from scrapy_rep.crawl.decide import Decider
from scrapy_rep.crawl.fetcher import FETCH_META_KEY, RobotsFetcher
from scrapy_rep.crawl.sitemap import SitemapRobotsCopy
from scrapy_rep.policy.config import Config, SettingError
from scrapy_rep.policy.origin import origin_of_memo
from scrapy_rep.policy.robots_policy import RobotsPolicy
from scrapy_rep.storage.factory import create_storage

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

    from scrapy_rep.policy.robots_policy import Evaluation

logger = logging.getLogger("scrapy_rep")

# Set on a request when it passes the scheduling gate: such a request can be sent back
# to the scheduler if its origin becomes undecided before it is downloaded.
SCHEDULED_META_KEY = "rep_scheduled"


class RobotsTxtMiddleware:
    """RFC 9309 robots.txt, with Google's error states. Drop-in for Scrapy's middleware."""

    def __init__(self, crawler: Crawler) -> None:
        try:
            self.config = config = Config.from_settings(crawler.settings)
            if not config.obey:
                raise NotConfigured
            self.clock = config.clock or time.time  # REP_CLOCK, validated by Config
            self.storage = create_storage(config, crawler.settings)
        except SettingError as exc:
            # One line that names the setting, before Scrapy's traceback of the failed
            # start (which ends with the same message, 30-odd lines further down).
            logger.error("scrapy-rep: the crawl cannot start: %s", exc)
            raise
        compat.check_configuration(crawler)  # stock middleware beside us, ROBOTSTXT_PARSER
        self.crawler = crawler
        assert crawler.stats is not None
        self.stats = crawler.stats
        self.policy = RobotsPolicy(config)
        self.fetcher = RobotsFetcher(crawler, config, self.clock)
        self.coordinator = OriginCoordinator(
            self.policy,
            self.storage,
            self.fetcher,
            self.clock,
            self._reinject,
            self._inc,
            releasable=self._may_proceed,
        )
        self.decider = Decider(crawler, config)
        self.sitemap_copy = SitemapRobotsCopy(crawler)
        from scrapy_rep.crawl.cluster_delay import LocalTimedHold, make_cluster_delay

        self.cluster_delay = make_cluster_delay(
            crawler,
            config,
            self.decider,
            hold_until=LocalTimedHold(crawler, self.clock),
            ready=lambda origin: self._may_proceed(self.coordinator.evaluate(origin)),
            origin_of=origin_of_memo,
            clock=self.clock,
        )
        # Requests released while the engine is closing (see _reinject).
        self._released_while_closing: list[Request] = []
        connect = crawler.signals.connect
        connect(self._on_request_scheduled, signal=signals.request_scheduled)
        connect(self._on_spider_idle, signal=signals.spider_idle)
        connect(self._on_spider_opened, signal=signals.spider_opened)
        connect(self._on_spider_closed, signal=signals.spider_closed)
        logger.info(
            "scrapy-rep: obeying robots.txt (%s), store: %s",
            "enforcing"
            if config.enforce
            else "audit mode (REP_ENFORCE = False): nothing is dropped; requests wait only "
            "for their origin's first robots.txt answer",
            self.storage.describe(),
        )

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def _inc(self, key: str) -> None:
        self.stats.inc_value(key)

    # -- which requests we look at -------------------------------------------------------

    @staticmethod
    def _origin_to_check(request: Request) -> str | None:
        meta = request.meta
        if meta.get("dont_obey_robotstxt") or FETCH_META_KEY in meta:
            return None
        return origin_of_memo(request.url)

    # -- scheduling-time gate ----------------------------------------------------------

    def _on_request_scheduled(self, request: Request, spider: Spider | None = None) -> None:
        origin = self._origin_to_check(request)
        if origin is None:
            return
        self.fetcher.trigger = (origin, request)  # for robots_parsed, if a fetch starts
        evaluation = self.coordinator.evaluate(origin)
        if self._may_proceed(evaluation):
            request.meta[SCHEDULED_META_KEY] = True
            return
        self.coordinator.hold(origin, request)
        logger.debug("Delayed until robots.txt of %s is known: %s", origin, request)
        # IgnoreRequest from a request_scheduled handler keeps the request out of the
        # scheduler (and the dupefilter) without a request_dropped signal.
        raise IgnoreRequest(f"held until robots.txt of {origin} is known")

    def _may_proceed(self, evaluation: Evaluation) -> bool:
        if evaluation.ready:
            return True
        # Audit mode delays nothing: once the first fetch has an answer, even an
        # unreachable one, requests go ahead and the would-be delay is recorded.
        record_known = evaluation.wake_at is not None
        return not self.config.enforce and record_known

    def _reinject(self, request: Request) -> None:
        engine = self.crawler.engine
        if engine is None or getattr(engine, "spider", None) is None:
            self._drop_unsent([request], "the engine stopped")
            return
        slot = getattr(engine, "_slot", None)
        if slot is None or getattr(slot, "closing", None) is not None:
            # The engine is closing: it waits for in-flight downloads (a robots.txt fetch
            # among them) but no longer takes requests from the scheduler. A request
            # re-injected now would sit in the scheduler unseen and vanish without a
            # stat or a log line. Keep it for the hand-back at scheduler close (JOBDIR)
            # or the dropped_at_close count instead.
            self._released_while_closing.append(request)
            return
        # Not engine.crawl(): the request was announced by request_scheduled once already.
        request.meta[SCHEDULED_META_KEY] = True
        compat.reschedule(engine, request)

    def _take_unsent(self) -> list[Request]:
        """Every request still waiting on robots.txt, or released too late to be sent."""
        late, self._released_while_closing = self._released_while_closing, []
        return self.coordinator.take_all_held() + late

    # -- download-time decision --------------------------------------------------------

    async def process_request(
        self, request: Request, spider: Spider | None = None
    ) -> Request | Response | None:
        origin = self._origin_to_check(request)
        if origin is None:
            return None
        self.fetcher.trigger = (origin, request)  # for robots_parsed, if a fetch starts
        evaluation = self.coordinator.evaluate(origin)
        if not self._may_proceed(evaluation):
            if request.meta.get(SCHEDULED_META_KEY):
                # The origin became undecided after this request was scheduled (e.g. a
                # refetch came back 503). Send it back through the scheduler, where it
                # waits without holding a download slot.
                self._inc("robotstxt/requeued")
                return request.replace(
                    dont_filter=True,
                    meta={
                        **request.meta,
                        SCHEDULED_META_KEY: False,
                    },
                )
            # Not from the scheduler (engine.download_async, e.g. media pipelines):
            # returning a request there would loop, so wait here instead.
            while not self._may_proceed(evaluation):
                await maybe_deferred_to_future(self.coordinator.wait(origin))
                evaluation = self.coordinator.evaluate(origin)
        rt = self.coordinator.runtime(origin)
        self.decider.decide(request, origin, evaluation, rt)
        if self.cluster_delay is not None and request.meta.get(SCHEDULED_META_KEY):
            # Crawl-delay kept by the whole cluster: a turn in the future is waited for
            # back in the scheduler's path, not here holding a download slot.
            later = await self.cluster_delay.turn(request, origin, evaluation)
            if later is not None:
                return later
        # SitemapSpider's own robots.txt request: answered from our copy (crawl/sitemap.py).
        return self.sitemap_copy.response_for(request, evaluation, rt.record)

    # -- lifecycle ---------------------------------------------------------------------

    def _on_spider_opened(self, spider: Spider) -> None:
        self.decider.spider = spider
        self._install_handback()

    def _on_spider_idle(self, spider: Spider) -> None:
        if self.coordinator.busy():
            raise DontCloseSpider

    def _install_handback(self) -> None:
        """On a graceful stop, give held requests back to the scheduler before it closes.

        Scrapy closes the scheduler before sending ``spider_closed``; with ``JOBDIR`` the
        scheduler persists what it holds, so held requests must be in it by then.
        """
        engine = self.crawler.engine
        slot = getattr(engine, "_slot", None)
        scheduler = getattr(slot, "scheduler", None)
        if scheduler is None or not hasattr(scheduler, "close"):
            return
        original_close = scheduler.close

        def close(reason: str) -> Any:
            self._hand_back(scheduler)
            return original_close(reason)

        scheduler.close = close

    def _hand_back(self, scheduler: Any) -> None:
        held = self._take_unsent()
        if not held:
            return
        if self.crawler.settings.get("JOBDIR"):
            for request in held:
                scheduler.enqueue_request(request)
            self.stats.inc_value("robotstxt/handed_back", len(held))
            logger.info(
                "scrapy-rep: %d request(s) waiting on robots.txt handed back to the "
                "scheduler (JOBDIR); a resumed crawl will have them",
                len(held),
            )
        else:
            self._drop_unsent(held, "the spider closed while they waited on robots.txt")

    def _drop_unsent(self, requests: list[Request], why: str) -> None:
        for request in requests:
            logger.info("Dropped, %s: %s", why, request)
        self.stats.inc_value("robotstxt/dropped_at_close", len(requests))

    def _on_spider_closed(self, spider: Spider, reason: str) -> None:
        self.coordinator.close()
        leftover = self._take_unsent()
        if leftover:
            self._drop_unsent(leftover, "the spider closed while they waited on robots.txt")
        from scrapy_rep.crawl.report import log_summary

        log_summary(list(self.coordinator.origins.values()), self.coordinator.evicted, self.stats)
        self.storage.close()
