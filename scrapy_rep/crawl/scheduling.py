"""How held requests meet Scrapy's scheduler: offsite, deduplication, re-injection and
hand-back, each done as Scrapy itself does it."""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from scrapy import signals

from scrapy_rep.crawl import compat

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from scrapy import Request
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

# Set when a request passes the scheduling gate or is handed back: it can be sent back
# through the scheduler (holding no download slot) if its origin is undecided again.
SCHEDULED_META_KEY = "rep_scheduled"
ONE_SHOT_COMMANDS = frozenset({"fetch", "shell", "view"})

# What the scheduling gate returns for a request it keeps out (compat.not_scheduled).
NOT_SCHEDULED = compat.not_scheduled("kept out of the scheduler until robots.txt decides")


class SchedulerBridge:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        # Each OffsiteMiddleware, with a memo of its answers when it is Scrapy's own.
        self._offsite: list[tuple[Any, _HostMemo | None]] = []
        # Released while the engine was closing (see reinject).
        self.late: list[Request] = []

    # -- the scheduler -----------------------------------------------------------------

    def scheduler(self) -> Any:
        return compat.scheduler_of(self.crawler)

    def persists(self) -> bool:
        """Whether the scheduler keeps what it holds past this run: JOBDIR, or a shared
        scheduler that says so (scrapy-redis: ``persist`` from SCHEDULER_PERSIST)."""
        if self.crawler.settings.get("JOBDIR"):
            return True
        return compat.scheduler_persists(self.scheduler())

    # -- offsite -----------------------------------------------------------------------

    def on_spider_opened(self) -> None:
        from scrapy.downloadermiddlewares.offsite import OffsiteMiddleware

        self._offsite = [
            (mw, _HostMemo() if compat.is_plain_offsite_middleware(mw, OffsiteMiddleware) else None)
            for mw in compat.downloader_middlewares(self.crawler)
            if isinstance(mw, OffsiteMiddleware)
        ]

    def offsite_drops(self, request: Request) -> bool:
        """Whether Scrapy's OffsiteMiddleware drops ``request``: its request_scheduled
        receiver raising does not stop send_catch_log calling ours, so it is asked again."""
        if not self._offsite or request.dont_filter or request.meta.get("allow_offsite"):
            return False
        spider = self.crawler.spider
        for mw, memo in self._offsite:
            if memo is None:
                follows = mw.should_follow(request, spider)
            else:
                follows = memo.should_follow(mw, request, spider)
            if not follows:
                return True
        return False

    # -- deduplication -----------------------------------------------------------------

    def seen_before(self, request: Request) -> bool:
        """The scheduler's dupefilter decides, as at enqueue time (a duplicate is logged and
        counted by it, and ``request_dropped`` sent); a new request is now seen, so its
        copies are filtered while it waits."""
        if request.dont_filter:
            return False
        df = compat.dupefilter_of(self.scheduler())
        if df is None or not df.request_seen(request):
            return False
        df.log(request, self.crawler.spider)
        self.crawler.signals.send_catch_log(
            signals.request_dropped, request=request, spider=self.crawler.spider
        )
        return True

    def adopted_seen_before(self, request: Request) -> bool:
        """``seen_before`` for an adopted request: a dupefilter that outlives the run or is
        shared (``JOBDIR``'s, scrapy-redis') saw it when it was first held, so there it is
        recorded again but never dropped; one of this run alone decides as for any."""
        scheduler = self.scheduler()
        # scrapy-redis keeps its dupefilter in Redis, shared by its processes.
        outlives_run = self.crawler.settings.get("JOBDIR") or compat.is_shared_scheduler(scheduler)
        if request.dont_filter or not outlives_run:
            return self.seen_before(request)
        df = compat.dupefilter_of(scheduler)
        if df is not None:
            df.request_seen(request)
        return False

    # -- re-injection and hand-back ----------------------------------------------------

    def reinject(self, request: Request) -> None:
        """Schedule a released request without a second ``request_scheduled`` (every receiver
        saw it when it was held) nor the dupefilter; raises if the scheduler refuses it."""
        if not compat.engine_takes_requests(self.crawler):
            # The engine takes no more requests from the scheduler: one scheduled now
            # would vanish unseen. Kept for the hand-back (or the dropped-at-close count).
            self.late.append(request)
            return
        request.meta[SCHEDULED_META_KEY] = True
        with _unfiltered(request):
            compat.reschedule(self.crawler, request)

    def hand_back(self, requests: Sequence[Request]) -> int:
        """Enqueue ``requests`` in the persistent scheduler; returns how many it took.
        Each is its own try; failures are counted and the first is logged in full."""
        scheduler = self.scheduler()
        stats = self.crawler.stats
        assert stats is not None
        taken = failed = 0
        for request in requests:
            request.meta[SCHEDULED_META_KEY] = True
            try:
                with _unfiltered(request):
                    accepted = scheduler.enqueue_request(request)
            except Exception:
                failed += 1
                if failed == 1:
                    logger.error(
                        "the scheduler refused a handed-back request: %s", request, exc_info=True
                    )
                continue
            taken += 1 if accepted or accepted is None else 0
        if failed:
            stats.inc_value("robotstxt/handback_failed", failed)
        return taken


class _HostMemo:
    """Scrapy's own ``OffsiteMiddleware.should_follow`` answers from the host alone (against
    ``compat.offsite_host_regex``), so one answer holds per host while that pattern stays (a
    new one, ``allowed_domains`` changed in Scrapy 2.19, clears the memo). Keyed by the URL up
    to the first ``/`` after ``://`` (the netloc, unparsed): held requests come in runs."""

    MAX_HOSTS = 4096

    def __init__(self) -> None:
        self.regex: Any = None
        self.answers: dict[str, bool] = {}

    def should_follow(self, mw: Any, request: Request, spider: Any) -> bool:
        regex = compat.offsite_host_regex(mw, spider)
        url = request.url
        start = url.find("://")
        end = url.find("/", start + 3) if start >= 0 else -1
        if regex is None or end < 0:
            return bool(mw.should_follow(request, spider))
        if regex is not self.regex:
            self.regex = regex
            self.answers.clear()
        key = url[:end]
        follows = self.answers.get(key)
        if follows is None:
            if len(self.answers) >= self.MAX_HOSTS:
                self.answers.clear()
            follows = self.answers[key] = bool(mw.should_follow(request, spider))
        return follows


@contextmanager
def _unfiltered(request: Request) -> Iterator[None]:
    """``request.dont_filter`` is True for the duration of the block only."""
    saved, request.dont_filter = request.dont_filter, True
    try:
        yield
    finally:
        request.dont_filter = saved


def one_shot_command() -> str | None:
    """``fetch``, ``shell`` or ``view`` when this process runs that ``scrapy`` command
    (Scrapy pops the name from ``sys.argv``, so the original command line is read)."""
    argv = compat.command_line()
    for index, arg in enumerate(argv):
        # the ``scrapy`` script (any path), ``python -m scrapy`` or ``-m scrapy.cmdline``
        is_module = arg == "scrapy.cmdline" and index and argv[index - 1] == "-m"
        if os.path.basename(arg) in ("scrapy", "scrapy.exe") or is_module:
            rest = [a for a in argv[index + 1 :] if not a.startswith("-")]
            return rest[0] if rest and rest[0] in ONE_SHOT_COMMANDS else None
    return None
