"""Per-origin runtime: one fetch in flight, held requests, timers, and their release.

This is the part of the middleware that has to live in the reactor. What an origin's
state *means* is decided by ``RobotsPolicy``; what is remembered lives in the store;
held requests live in the ``WaitingRoom``; this class sequences fetches (bounded by
the ``FetchQueue``) and wakes waiting requests.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred

from scrapy_rep.crawl.fetch_queue import FetchQueue
from scrapy_rep.crawl.leases import LeaseKeeper
from scrapy_rep.crawl.registry import RuntimeRegistry
from scrapy_rep.crawl.runtime import WAITED_META_KEY, OriginRuntime
from scrapy_rep.crawl.store_calls import StoreCalls
from scrapy_rep.crawl.visibility import unreachable_line
from scrapy_rep.policy.records import UNREACHABLE, OriginRecord
from scrapy_rep.policy.robots_policy import (
    FALLBACK,
    FRESH,
    STALE,
    Evaluation,
    FetchOutcome,
    RobotsPolicy,
)
from scrapy_rep.storage.base import acquire_and_read, new_holder, put_and_release

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request

    from scrapy_rep.crawl.fetcher import RobotsFetcher
    from scrapy_rep.crawl.waiting_room import WaitingRoom
    from scrapy_rep.storage.base import RobotsStorage

logger = logging.getLogger("scrapy_rep")

# How often a process that lost the fetch lease to another process looks at the shared
# store for the result. Short, so waiting workers see the result promptly.
SHARED_POLL_INTERVAL = 0.25
# What an origin whose first store read is in flight evaluates to: undecided.
_UNDECIDED = Evaluation(ready=False)
# Timers never sleep longer than this, so a clock change or a lease expiry is noticed.
MAX_TIMER = 60.0


class OriginCoordinator:
    """Sequences fetches per origin and holds/releases requests around them."""

    def __init__(
        self,
        policy: RobotsPolicy,
        storage: RobotsStorage,
        fetcher: RobotsFetcher,
        clock: Callable[[], float],
        room: WaitingRoom,
        release: Callable[[Request], None],
        inc_stat: Callable[[str], None],
        releasable: Callable[[Evaluation], bool] | None = None,
    ) -> None:
        self.policy = policy
        self.storage = storage
        self.fetcher = fetcher
        self.clock = clock
        self.room = room
        self._release = release
        self._inc = inc_stat
        # When held requests may go: normally once the origin is decided; audit mode
        # also lets them go once the origin is known to be unreachable.
        self.releasable: Callable[[Evaluation], bool] = releasable or (lambda ev: ev.ready)
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
        # Fetches in flight renew their lease (SPEC section 3 "leases").
        self.leases = LeaseKeeper(storage, self.holder, config, self.calls, clock)
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

    def cached(self, origin: str) -> Evaluation | None:
        """The evaluation a fresh copy gives, without touching the store or timers
        (the per-request fast path), else None."""
        rt = self.registry.lookup(origin)
        if rt is None:
            return None
        fresh = rt.fresh
        if fresh is not None and rt.record is fresh[1] and self.clock() < fresh[0]:
            self.registry.get(origin)  # LRU touch
            return fresh[2]
        return None

    def evaluate(self, origin: str, *, reread: bool = False) -> Evaluation:
        """The origin's state now; starts a fetch or a timer when one is due.

        Touches only memory: the store is read (off the reactor thread) on an origin's
        first evaluation, when a fetch starts and when a timer polls a shared store.
        ``reread`` skips the per-request caches.
        """
        rt = self.runtime(origin)
        now = self.clock()
        if not reread:
            fresh = rt.fresh
            if fresh is not None and rt.record is fresh[1] and now < fresh[0]:
                return fresh[2]  # the per-request fast path: same record, not expired
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
        if evaluation.source == FRESH and record is not None and not evaluation.fetch_due:
            rt.fresh = (record.expires_at, record, evaluation)
        return evaluation

    def _load(self, rt: OriginRuntime) -> None:
        rt.loading = True
        self._reads_pending += 1
        deferred = self.calls.call(self.storage.get, rt.origin)
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
        rt = self.runtime(origin)
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

    # -- fetching ----------------------------------------------------------------------

    def _start_fetch(self, rt: OriginRuntime) -> None:
        if self.closed:
            return
        rt.fetching = True
        self._fetches_pending += 1
        self.fetches.submit(rt.origin, lambda: self._begin_fetch(rt))

    def _fetch_not_started(self, rt: OriginRuntime) -> None:
        rt.fetching = False
        self._fetches_pending -= 1

    def _begin_fetch(self, rt: OriginRuntime) -> bool:
        """Start a queued fetch now; the lease is taken here, when it really starts."""
        if self.closed:
            self._fetch_not_started(rt)
            return False
        # The previous holder may have stored its result and released the lease
        # between our last read and our lease (a poll that read just before its
        # write): a shared store is read once more, so one fetch serves every process.
        deferred = self.calls.call(
            acquire_and_read, self.storage, rt.origin, self.holder, self._lease_ttl()
        )
        deferred.addCallbacks(
            self._leased, self._lease_failed, callbackArgs=(rt,), errbackArgs=(rt,)
        )
        return True

    def _lease_failed(self, failure: Any, rt: OriginRuntime) -> None:
        logger.error("scrapy-rep: fetch lease of %s failed: %s", rt.origin, failure)
        self._fetch_ended(rt)
        self._arm_timer(rt, self.clock() + self.policy.config.retry_backoff)

    def _leased(self, result: tuple[bool, OriginRecord | None], rt: OriginRuntime) -> None:
        held, stored = result
        if self.closed:
            if held:
                self.calls.call(self.storage.release_lease, rt.origin, self.holder)
            self._fetch_ended(rt)
            return
        if not held:
            # Another process is fetching this robots.txt; watch the store for its result.
            self._fetch_ended(rt)
            self.leases.note_wait(rt.origin)
            self._arm_timer(rt, self.clock() + SHARED_POLL_INTERVAL)
            return
        self.leases.waited(rt.origin)
        if (
            self.storage.shared
            and stored is not None
            and not self.policy.evaluate(stored, self.clock()).fetch_due
        ):
            self.calls.call(self.storage.release_lease, rt.origin, self.holder)
            self._fetch_ended(rt)
            rt.record = stored
            self.registry.note_record(rt)
            _reactor().callLater(0, self.wake, rt.origin, reread=False)
            return
        self._cancel_timer(rt)
        rt.fetches += 1
        if rt.record is not None and not rt.record.unreachable:
            self._inc("robotstxt/refetch")
        from scrapy.utils.defer import deferred_from_coro

        self.leases.start_renewing(rt.origin)
        deferred = deferred_from_coro(self._fetch(rt))
        deferred.addErrback(self._fetch_failed, rt)

    def _lease_ttl(self) -> float:
        return self.policy.config.lease_ttl

    def _fetch_ended(self, rt: OriginRuntime) -> None:
        if rt.fetching:
            self._fetch_not_started(rt)
            self.fetches.done()

    async def _fetch(self, rt: OriginRuntime) -> None:
        try:
            outcome = await self.fetcher.fetch(rt.origin)
        finally:
            self.leases.stop_renewing(rt.origin)
        self._record_outcome(rt, outcome)

    def _fetch_failed(self, failure: object, rt: OriginRuntime) -> None:
        # A bug in our own fetch path must not strand the origin's requests: count it
        # as unreachable so the normal retry/backoff path takes over.
        logger.error("scrapy-rep: robots.txt fetch of %s failed: %s", rt.origin, failure)
        self.leases.stop_renewing(rt.origin)
        self._record_outcome(rt, FetchOutcome(UNREACHABLE, "internal error"))

    def _record_outcome(self, rt: OriginRuntime, outcome: FetchOutcome) -> None:
        """Store the outcome (off the reactor thread); the fetch ends once it is stored,
        so no second fetch of the origin starts in between."""
        now = self.clock()
        previous = rt.record
        storage, policy, holder = self.storage, self.policy, self.holder

        def write() -> OriginRecord:
            stored = storage.get(rt.origin) if storage.shared else None
            record = policy.after_fetch(stored or previous, outcome, now)
            put_and_release(storage, rt.origin, record, holder)
            return record

        def failed(failure: Any) -> OriginRecord:
            logger.error("scrapy-rep: storing robots.txt of %s failed: %s", rt.origin, failure)
            return policy.after_fetch(previous, outcome, now)

        deferred = self.calls.call(write)
        deferred.addErrback(failed)
        deferred.addCallback(self._recorded, rt, outcome, previous, now)

    def _recorded(
        self,
        record: OriginRecord,
        rt: OriginRuntime,
        outcome: FetchOutcome,
        previous: OriginRecord | None,
        now: float,
    ) -> None:
        self._fetch_ended(rt)
        was_unreachable = previous is not None and previous.unreachable
        rt.record = record
        rt.loaded = True
        rt.undecided = None
        self.registry.note_record(rt)
        if record.unreachable and not was_unreachable:
            rt.unreachable_spells += 1
            self._inc("robotstxt/unreachable")
            waiting = self.room.count(rt.origin) + len(rt.waiters)
            if self.give_up is not None and not self.closed:
                self._give_up(rt, outcome.detail)
                return
            # WARNING, with the error's text (Scrapy's middleware: ERROR)
            logger.warning(unreachable_line(rt.origin, outcome, record, waiting, now, self.policy))
        elif record.unreachable:
            logger.debug(
                "robots.txt of %s still unreachable (%s); next try in %.0f s",
                rt.origin,
                outcome.detail,
                (record.next_retry_at or now) - now,
            )
        elif was_unreachable:
            self._inc("robotstxt/recovered")
            logger.info("robots.txt of %s is reachable again (%s)", rt.origin, outcome.detail)
        if self.closed:
            return
        self.wake(rt.origin, reread=False)

    def _give_up(self, rt: OriginRuntime, detail: str) -> None:
        assert self.give_up is not None
        requests = [request for request, _ in self.room.take(rt.origin)]
        waiters, rt.waiters = rt.waiters, []
        self._waiter_count -= len(waiters)
        self.give_up(rt.origin, requests, detail)
        for deferred in waiters:
            from scrapy.exceptions import IgnoreRequest

            deferred.errback(IgnoreRequest(f"robots.txt of {rt.origin} is unreachable"))
        self.registry.settle(rt)

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
            self.calls.call(self.storage.get, origin).addBoth(self._reread, rt)
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
        failed = 0
        for request, since in held:
            waited = now - since
            rt.longest_wait = max(rt.longest_wait, waited)
            # Shown in the request's robotstxt_decision meta (seconds held back).
            request.meta[WAITED_META_KEY] = request.meta.get(WAITED_META_KEY, 0.0) + waited
            rt.released += 1
            self._inc("robotstxt/released")
            # Each re-injection is its own try: one request the scheduler cannot take
            # (e.g. scrapy-redis cannot serialise its callback) must not lose the rest,
            # nor be mistaken for a robots.txt failure.
            try:
                self._release(request)
            except Exception:
                failed += 1
                self._inc("robotstxt/release_failed")
                logger.error(
                    "scrapy-rep: could not re-inject %s after robots.txt of %s was decided; "
                    "the request is lost",
                    request,
                    rt.origin,
                    exc_info=True,
                )
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
        self.leases.close()
        self.fetches.clear()
        for rt in self.registry.runtimes():
            self._cancel_timer(rt)
            if rt.fetching:
                self.storage.release_lease(rt.origin, self.holder)
        self.calls.close()


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor
