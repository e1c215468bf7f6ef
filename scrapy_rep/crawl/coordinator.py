"""Per-origin runtime: one fetch in flight, held requests, timers, and their release.

This is the part of the middleware that has to live in the reactor. What an origin's
state *means* is decided by ``RobotsPolicy``; what is remembered lives in the store;
held requests live in the ``WaitingRoom``; this class sequences fetches (bounded by
the ``FetchQueue``; the steps of one fetch are ``FetchSteps``, crawl/fetch_steps.py)
and wakes waiting requests.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred

from scrapy_rep.crawl.fetch_queue import FetchQueue
from scrapy_rep.crawl.fetch_steps import FetchSteps, _reactor
from scrapy_rep.crawl.leases import LeaseKeeper
from scrapy_rep.crawl.record import NullRecorder
from scrapy_rep.crawl.registry import RuntimeRegistry
from scrapy_rep.crawl.runtime import WAITED_META_KEY, OriginRuntime
from scrapy_rep.crawl.store_calls import StoreCalls
from scrapy_rep.crawl.unreachable_log import UnreachableWarnings
from scrapy_rep.policy.records import OriginRecord
from scrapy_rep.policy.robots_policy import (
    FALLBACK,
    FRESH,
    STALE,
    Evaluation,
    RobotsPolicy,
    refresh_ahead_at,
)
from scrapy_rep.storage.base import new_holder

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request

    from scrapy_rep.crawl.fetcher import RobotsFetcher
    from scrapy_rep.crawl.waiting_room import WaitingRoom
    from scrapy_rep.storage.base import RobotsStorage

logger = logging.getLogger("scrapy_rep")

# What an origin whose first store read is in flight evaluates to: undecided.
_UNDECIDED = Evaluation(ready=False)
# Timers never sleep longer than this, so a clock change or a lease expiry is noticed.
MAX_TIMER = 60.0


__all__ = ["MAX_TIMER", "OriginCoordinator", "_reactor"]


class OriginCoordinator(FetchSteps):
    """Sequences fetches per origin (``FetchSteps``) and holds/releases requests around
    them."""

    def __init__(
        self,
        policy: RobotsPolicy,
        storage: RobotsStorage,
        fetcher: RobotsFetcher,
        clock: Callable[[], float],
        room: WaitingRoom,
        release: Callable[[str, Request], None],
        inc_stat: Callable[[str], None],
        releasable: Callable[[Evaluation], bool] | None = None,
        recorder: NullRecorder | None = None,
        waiting_fate: Callable[[], str] | None = None,
    ) -> None:
        self.policy = policy
        # What becomes of waiting requests if the crawl stops now (closing.fate_of), said
        # in the unreachable WARNING beside "Ctrl-C stops the crawl now".
        self.waiting_fate = waiting_fate
        self.storage = storage
        self.fetcher = fetcher
        self.clock = clock
        self.room = room
        self._release = release
        self._inc = inc_stat
        # When held requests may go: normally once the origin is decided; audit mode
        # also lets them go once the origin is known to be unreachable.
        self.releasable: Callable[[Evaluation], bool] = releasable or (lambda ev: ev.ready)
        self.recorder = recorder or NullRecorder()  # the compliance record (crawl/record.py)
        # One-shot commands: called instead of waiting when an origin turns unreachable.
        self.give_up: Callable[[str, list[Request], str], None] | None = None
        config = policy.config
        self.registry = RuntimeRegistry(
            config.memory_max_origins, self._runtime_busy, max_bytes=config.memory_max_bytes
        )
        self.fetches = FetchQueue(config.fetch_concurrency)
        self._fetches_pending = 0  # queued or running
        self._waiter_count = 0
        self._reads_pending = 0
        self.calls = StoreCalls(storage)
        # host:pid:start:nonce, so that a later process on this machine can tell that
        # a lease left behind by this one is dead (storage.base.holder_is_dead)
        self.holder = new_holder()
        # Fetches in flight renew their lease (docs/cluster.md).
        self.leases = LeaseKeeper(storage, self.holder, config, self.calls, clock)
        self.unreachable_warnings = UnreachableWarnings(
            config.logstats_interval, lambda delay, flush: _reactor().callLater(delay, flush)
        )
        self.closed = False

    # -- queries -----------------------------------------------------------------------

    def runtime(self, origin: str) -> OriginRuntime:
        return self.registry.get(origin)

    def _runtime_busy(self, rt: OriginRuntime) -> bool:
        return bool(
            rt.fetching
            or rt.waiters
            or self.room.count(rt.origin)
            or (rt.timer is not None and rt.timer.active())
        )

    def busy(self) -> bool:
        """True while anything could still produce or release a request: O(1)."""
        return bool(
            self._fetches_pending or self._reads_pending or self._waiter_count or len(self.room)
        )

    def fetching_now(self) -> int:
        return self._fetches_pending

    def evaluate(self, origin: str, *, reread: bool = False) -> Evaluation:
        """The origin's state now; starts a fetch or a timer when one is due.

        Touches only memory: the store is read (off the reactor thread) on an origin's
        first evaluation, when a fetch starts and when a timer polls a shared store.
        ``reread`` skips the per-request caches.
        """
        rt = self.runtime(origin)
        now = self.clock()
        if not reread:
            fresh = rt.fresh_evaluation(now)
            if fresh is not None:
                return fresh  # the per-request fast path: same record, not expired
            undecided = rt.undecided
            if undecided is not None and rt.record is undecided[1] and now < undecided[0]:
                return undecided[2]  # held origin: nothing changes before its next wake
        if not rt.loaded:
            if not rt.loading:
                self._load(rt)
            if not rt.loaded:
                # The first read is in flight: the origin is undecided until it lands.
                return _UNDECIDED
        evaluation = self.policy.evaluate(rt.record, now)
        rt.undecided = None
        if evaluation.fetch_due and not rt.fetching:
            self._start_fetch(rt)
        elif not evaluation.ready and not rt.fetching:
            self._arm_timer(rt, evaluation.wake_at)
            if evaluation.wake_at is not None and not self.storage.shared:
                rt.undecided = (evaluation.wake_at, rt.record, evaluation)
        self._note_source(rt, evaluation)
        record = rt.record
        if evaluation.source == FRESH and record is not None:
            # The per-request fast path reuses this until the refresh-ahead time; once
            # the refetch runs, until the copy expires (its answer replaces the record,
            # which ends the reuse sooner). Past expiry the policy holds requests.
            until = record.expires_at if rt.fetching else refresh_ahead_at(record)
            rt.fresh = (until, record, evaluation)
        return evaluation

    def _load(self, rt: OriginRuntime) -> None:
        rt.loading = True
        self._reads_pending += 1
        deferred = self.calls.call(self.storage.get, rt.origin, key=rt.origin)
        deferred.addBoth(self._loaded, rt)
        if not rt.loaded:  # a real store answers later: wake the origin then
            deferred.addCallback(lambda _: self.wake(rt.origin, reread=False))

    def _loaded(self, record: Any, rt: OriginRuntime) -> None:
        rt.loading = False
        self._reads_pending -= 1
        if not isinstance(record, OriginRecord):
            record = None  # a failed read is a miss (the backend logged it)
        rt.record = record
        rt.loaded = True
        self.registry.note_record(rt)  # RAM per origin is bounded in bytes (registry)
        if record is not None:
            self._inc("robotstxt/cache_hit")

    # -- holding -----------------------------------------------------------------------

    def hold(self, origin: str, request: Request) -> None:
        # (every caller has just evaluated the origin, which created and touched its
        # runtime: a plain lookup finds it)
        rt = self.registry.lookup(origin) or self.runtime(origin)
        self.room.hold(origin, request)
        rt.delayed += 1
        self._inc("robotstxt/delayed")

    def wait(self, origin: str) -> Deferred[None]:
        """For requests that reached the downloader without passing the scheduler."""
        deferred: Deferred[None] = Deferred()
        rt = self.runtime(origin)
        rt.waiters.append(deferred)
        self._waiter_count += 1
        rt.delayed += 1
        self._inc("robotstxt/delayed")
        return deferred

    # -- waking ------------------------------------------------------------------------

    def wake(self, origin: str, *, reread: bool = True) -> None:
        """Re-evaluate an origin; release its requests if it is ready. ``reread``: a
        shared store is read first (another process may have fetched it)."""
        rt = self.runtime(origin)
        rt.timer = None
        rt.undecided = None
        if self.closed:
            return
        if reread and self.storage.shared and rt.loaded and not rt.fetching:
            self._reads_pending += 1
            self.calls.call(self.storage.get, origin, key=origin).addBoth(self._reread, rt)
            return
        self._wake_now(rt)

    def _reread(self, record: Any, rt: OriginRuntime) -> None:
        self._reads_pending -= 1
        if isinstance(record, OriginRecord) and rt.loaded:
            rt.record = record
            self.registry.note_record(rt)
        if not self.closed:
            self._wake_now(rt)

    def _wake_now(self, rt: OriginRuntime) -> None:
        evaluation = self.evaluate(rt.origin, reread=True)
        if self.releasable(evaluation):
            self.leases.waited(rt.origin)
            self._release_all(rt)
        self.registry.settle(rt)

    def _release_all(self, rt: OriginRuntime) -> None:
        now = self.clock()
        held = self.room.take(rt.origin)
        waiters, rt.waiters = rt.waiters, []
        self._waiter_count -= len(waiters)
        for request, since in held:
            waited = now - since
            rt.longest_wait = max(rt.longest_wait, waited)
            # Shown in the request's robotstxt_decision meta (seconds held back).
            request.meta[WAITED_META_KEY] = request.meta.get(WAITED_META_KEY, 0.0) + waited
            rt.released += 1
            self._inc("robotstxt/released")
            self.recorder.released(request, waited)
            # Never raises: one request the scheduler cannot take must not lose the rest,
            # nor be mistaken for a robots.txt failure. A scheduler whose backend is down
            # keeps it waiting; one that refuses the request itself drops it, logged and
            # counted (crawl/release_retry.py).
            self._release(rt.origin, request)
        for deferred in waiters:
            rt.released += 1
            self._inc("robotstxt/released")
            deferred.callback(None)

    def _note_source(self, rt: OriginRuntime, evaluation: Evaluation) -> None:
        if not evaluation.ready or evaluation.source == rt.last_source:
            return
        if evaluation.source == STALE:
            rt.stale_used = True
            self._inc("robotstxt/stale_used")
            logger.info(
                "robots.txt of %s unreachable for longer than REP_UNREACHABLE_WAIT: "
                "using the last good copy",
                rt.origin,
            )
        elif evaluation.source == FALLBACK:
            rt.fallback_applied = evaluation.kind or ""
            self._inc(f"robotstxt/fallback/{evaluation.kind}")
            logger.info(
                "robots.txt of %s unreachable for longer than REP_UNREACHABLE_WAIT and no "
                "usable copy: REP_UNREACHABLE_FALLBACK applies (%s)",
                rt.origin,
                evaluation.kind,
            )
        rt.last_source = evaluation.source

    def _arm_timer(self, rt: OriginRuntime, when: float | None) -> None:
        """One timer per origin, moved only when its deadline moves earlier."""
        if when is None or self.closed:
            return
        reactor = _reactor()
        delay = min(max(when - self.clock(), 0.0), MAX_TIMER)
        fire_at = reactor.seconds() + delay
        timer = rt.timer
        if timer is not None and timer.active():
            if rt.timer_at <= fire_at + 0.001:
                return
            timer.reset(delay)
        else:
            rt.timer = reactor.callLater(delay, self.wake, rt.origin)
        rt.timer_at = fire_at

    def _cancel_timer(self, rt: OriginRuntime) -> None:
        if rt.timer is not None and rt.timer.active():
            rt.timer.cancel()
        rt.timer = None

    def close(self) -> None:
        self.closed = True
        self.unreachable_warnings.close()
        self.leases.close()
        self.fetches.clear()
        for rt in self.registry.runtimes():
            self._cancel_timer(rt)
            if rt.fetching:
                # In the store's worker thread like every other store call: a stalled
                # store must not stall the reactor here either. calls.close() lets the
                # queued calls run before the thread ends.
                released = self.calls.call(
                    self.storage.release_lease, rt.origin, self.holder, key=rt.origin
                )
                released.addErrback(_release_failed, rt.origin)
        self.calls.close()


def _release_failed(failure: Any, origin: str) -> None:
    # The lease expires on its own (REP_LEASE_TTL): another process waits that long.
    logger.warning("scrapy-rep: releasing the fetch lease of %s failed: %s", origin, failure)
