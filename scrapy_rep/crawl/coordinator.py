"""Sequencing per origin: one robots.txt fetch in flight, held requests, timers, and
their release (what a state means is ``RobotsPolicy``'s).

The steps of one fetch are docs/architecture.md's ("The path of one request"); its outcome
is stored before the fetch ends, so no second fetch of the origin starts in between.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest
from scrapy.utils.defer import deferred_from_coro
from twisted.internet.defer import Deferred

from scrapy_rep.crawl.fetcher import FetchQueue
from scrapy_rep.crawl.origins import WAITED_META_KEY, Origins
from scrapy_rep.crawl.record import NullRecorder
from scrapy_rep.crawl.store_calls import LeaseKeeper, StoreCalls, installed_reactor
from scrapy_rep.crawl.visibility import unreachable_line
from scrapy_rep.policy.records import UNREACHABLE, OriginRecord
from scrapy_rep.policy.robots_policy import (
    FALLBACK,
    FRESH,
    STALE,
    Evaluation,
    FetchOutcome,
    RobotsPolicy,
    refresh_ahead_at,
)
from scrapy_rep.storage.base import new_holder

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request

    from scrapy_rep.crawl.fetcher import RobotsFetcher
    from scrapy_rep.crawl.origins import OriginRuntime
    from scrapy_rep.crawl.waiting_room import WaitingRoom
    from scrapy_rep.storage.base import RobotsStorage

logger = logging.getLogger(__name__)

# What an origin whose first store read is in flight evaluates to: undecided.
_UNDECIDED = Evaluation(ready=False)
# Timers never sleep longer than this, so a clock change or a lease expiry is noticed.
MAX_TIMER = 60.0
# How often a process that lost the fetch lease polls the shared store for the result.
SHARED_POLL_INTERVAL = 0.25
# Origins with a WARNING of their own before the summary lines take over.
FIRST_WARNINGS = 5
# A summary line names at most this many origins; the rest are counted.
MAX_NAMED = 20
# The summary's period when LOGSTATS_INTERVAL is 0 (else later origins wait for the close).
DEFAULT_INTERVAL = 60.0


class OriginCoordinator:
    """Sequences fetches per origin and holds/releases requests around them (a test passes
    a ``twisted.internet.task.Clock`` as ``reactor`` and a fake fetcher)."""

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
        give_up: Callable[[str, list[Request], str], None] | None = None,
        *,
        origins: Origins | None = None,
        reactor: Any = None,
    ) -> None:
        self.policy = policy
        # What becomes of waiting requests if the crawl stops now (the unreachable WARNING).
        self.waiting_fate = waiting_fate
        self.storage = storage
        self.fetcher = fetcher
        self.clock = clock
        self.room = room
        self._release = release
        self._inc = inc_stat
        # When held requests may go: once decided (audit mode: also once unreachable).
        self.releasable: Callable[[Evaluation], bool] = releasable or (lambda ev: ev.ready)
        self.recorder = recorder or NullRecorder()  # the compliance record (crawl/record.py)
        # One-shot commands: called instead of waiting when an origin turns unreachable.
        self.give_up = give_up
        # The timers' reactor: the installed one unless given.
        self._reactor = reactor
        config = policy.config
        if origins is None:
            origins = Origins(
                config.memory_max_origins, max_bytes=config.memory_max_bytes, held=room.count
            )
        self.origins = origins
        self.fetches = FetchQueue(config.fetch_concurrency)
        self._fetches_pending = 0  # queued or running
        self._waiter_count = 0
        self._reads_pending = 0
        self.calls = StoreCalls(storage)
        # host:pid:start:nonce, so that a later process on this machine can tell that
        # a lease left behind by this one is dead (storage.base.holder_is_dead)
        self.holder = new_holder()
        # Fetches in flight renew their lease (docs/cluster.md).
        self.leases = LeaseKeeper(storage, self.holder, config, self.calls, clock, reactor)
        self.unreachable_warnings = UnreachableWarnings(config.logstats_interval, self._call_later)
        self.closed = False

    # -- queries -----------------------------------------------------------------------

    def runtime(self, origin: str) -> OriginRuntime:
        return self.origins.get(origin)

    def _call_later(self, delay: float, function: Callable[..., Any], *args: Any) -> Any:
        return (self._reactor or installed_reactor()).callLater(delay, function, *args)

    def busy(self) -> bool:
        """True while anything could still produce or release a request: O(1)."""
        return bool(
            self._fetches_pending or self._reads_pending or self._waiter_count or len(self.room)
        )

    def fetching_now(self) -> int:
        return self._fetches_pending

    def evaluate(
        self, origin: str, trigger: Request | None = None, *, reread: bool = False
    ) -> Evaluation:
        """The origin's state now, from memory (store reads run off the reactor thread);
        starts a fetch or a timer when one is due, handing a fetch ``trigger``, the page
        request asking (for ``robots_parsed``). ``reread`` skips the per-request caches."""
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
                return _UNDECIDED
        evaluation = self.policy.evaluate(rt.record, now)
        rt.undecided = None
        if evaluation.fetch_due and not rt.fetching:
            if not self.closed:
                rt.fetching = True
                self._fetches_pending += 1
                self.fetches.submit(rt.origin, lambda: self._begin_fetch(rt, trigger))
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
        self.origins.note_record(rt)  # RAM per origin is bounded in bytes (origins)
        if record is not None:
            self._inc("robotstxt/cache_hit")

    # -- holding -----------------------------------------------------------------------

    def hold(self, origin: str, request: Request) -> None:
        # (every caller has just evaluated the origin, which made its runtime)
        rt = self.origins.lookup(origin) or self.runtime(origin)
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
        """Re-evaluate an origin and release its requests if ready; ``reread``: read a shared
        store first (another process may have fetched it)."""
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
            self.origins.note_record(rt)
        if not self.closed:
            self._wake_now(rt)

    def _wake_now(self, rt: OriginRuntime) -> None:
        evaluation = self.evaluate(rt.origin, reread=True)
        if self.releasable(evaluation):
            self.leases.waited(rt.origin)
            self._release_all(rt)
        self.origins.settle(rt)

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
            self._inc("robotstxt/released")
            self.recorder.released(request, waited)
            # Never raises: one request the scheduler cannot take must not lose the rest,
            # nor look like a robots.txt failure (crawl/release_retry.py).
            self._release(rt.origin, request)
        for deferred in waiters:
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
        reactor = self._reactor or installed_reactor()
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

    # -- the steps of one fetch --------------------------------------------------------

    def _fetch_not_started(self, rt: OriginRuntime) -> None:
        rt.fetching = False
        self._fetches_pending -= 1

    def _begin_fetch(self, rt: OriginRuntime, trigger: Request | None) -> bool:
        """Start a queued fetch now; the lease is taken here, when it really starts."""
        if self.closed:
            self._fetch_not_started(rt)
            return False
        # The previous holder may have stored its result and released the lease since our
        # last read: a shared store is read once more, so one fetch serves every process.
        deferred = self.calls.call(
            self.storage.acquire_lease_and_get,
            rt.origin,
            self.holder,
            self.policy.config.lease_ttl,
            key=rt.origin,
        )
        deferred.addCallbacks(
            self._leased, self._lease_failed, callbackArgs=(rt, trigger), errbackArgs=(rt,)
        )
        return True

    def _lease_failed(self, failure: Any, rt: OriginRuntime) -> None:
        logger.error("fetch lease of %s failed: %s", rt.origin, failure)
        self._fetch_ended(rt)
        self._arm_timer(rt, self.clock() + self.policy.config.retry_backoff)

    def _leased(
        self, result: tuple[bool, OriginRecord | None], rt: OriginRuntime, trigger: Request | None
    ) -> None:
        held, stored = result
        if self.closed:
            if held:
                self.calls.call(self.storage.release_lease, rt.origin, self.holder, key=rt.origin)
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
            self.calls.call(self.storage.release_lease, rt.origin, self.holder, key=rt.origin)
            self._fetch_ended(rt)
            rt.record = stored
            self.origins.note_record(rt)
            self._call_later(0, lambda: self.wake(rt.origin, reread=False))
            return
        self._cancel_timer(rt)
        rt.fetches += 1
        if rt.record is not None and not rt.record.unreachable:
            self._inc("robotstxt/refetch")
        self.leases.start_renewing(rt.origin)
        deferred = deferred_from_coro(self._fetch(rt, trigger))
        deferred.addErrback(self._fetch_failed, rt)

    def _fetch_ended(self, rt: OriginRuntime) -> None:
        if rt.fetching:
            self._fetch_not_started(rt)
            self.fetches.done()

    async def _fetch(self, rt: OriginRuntime, trigger: Request | None) -> None:
        try:
            outcome = await self.fetcher.fetch(rt.origin, trigger)
        finally:
            self.leases.stop_renewing(rt.origin)
        self._record_outcome(rt, outcome)

    def _fetch_failed(self, failure: object, rt: OriginRuntime) -> None:
        # A bug in our own fetch path must not strand the origin's requests: count it
        # as unreachable so the normal retry/backoff path takes over.
        logger.error("robots.txt fetch of %s failed: %s", rt.origin, failure)
        self.leases.stop_renewing(rt.origin)
        self._record_outcome(rt, FetchOutcome(UNREACHABLE, "internal error"))

    def _record_outcome(self, rt: OriginRuntime, outcome: FetchOutcome) -> None:
        """Store the outcome (off the reactor thread); the fetch ends once it is stored."""
        now = self.clock()
        previous = rt.record
        storage, policy, holder = self.storage, self.policy, self.holder

        def write() -> OriginRecord:
            stored = storage.get(rt.origin) if storage.shared else None
            record = policy.after_fetch(stored or previous, outcome, now)
            storage.put_and_release_lease(rt.origin, record, holder)
            return record

        def failed(failure: Any) -> OriginRecord:
            logger.error("storing robots.txt of %s failed: %s", rt.origin, failure)
            return policy.after_fetch(previous, outcome, now)

        deferred = self.calls.call(write, key=rt.origin)
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
        self.origins.note_record(rt)
        if record.unreachable and not was_unreachable:
            rt.unreachable_spells += 1
            self._inc("robotstxt/unreachable")
            if self.give_up is not None and not self.closed:
                self._give_up(rt, outcome.detail)
                return
            # WARNING with the error's text (Scrapy's middleware: ERROR)
            waiting = self.room.count(rt.origin) + len(rt.waiters)
            fate = None if self.waiting_fate is None else self.waiting_fate()
            line = unreachable_line(rt.origin, outcome, record, waiting, now, self.policy, fate)
            self.unreachable_warnings.warn(rt.origin, line)
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
        self.wake(rt.origin, reread=False)  # (nothing once closed)

    def _give_up(self, rt: OriginRuntime, detail: str) -> None:
        assert self.give_up is not None
        requests = [request for request, _ in self.room.take(rt.origin)]
        waiters, rt.waiters = rt.waiters, []
        self._waiter_count -= len(waiters)
        self.give_up(rt.origin, requests, detail)
        for deferred in waiters:
            deferred.errback(IgnoreRequest(f"robots.txt of {rt.origin} is unreachable"))
        self.origins.settle(rt)

    def close(self) -> None:
        self.closed = True
        self.unreachable_warnings.close()
        self.leases.close()
        self.fetches.clear()
        for rt in self.origins.runtimes():
            self._cancel_timer(rt)
            if rt.fetching:
                # Off the reactor like every store call; calls.close() lets the queued
                # calls run before the thread ends.
                released = self.calls.call(
                    self.storage.release_lease, rt.origin, self.holder, key=rt.origin
                )
                released.addErrback(_release_failed, rt.origin)
        self.calls.close()


def _release_failed(failure: Any, origin: str) -> None:
    # The lease expires on its own (REP_LEASE_TTL): another process waits that long.
    logger.warning("releasing the fetch lease of %s failed: %s", origin, failure)


class UnreachableWarnings:
    """Logs "robots.txt of X is unreachable": each of the first ``FIRST_WARNINGS``
    origins at WARNING, the later ones in one summary WARNING per ``interval``."""

    def __init__(
        self, interval: float, call_later: Callable[[float, Callable[[], None]], Any]
    ) -> None:
        self.interval = interval if interval > 0 else DEFAULT_INTERVAL
        self._call_later = call_later
        self._warned = 0
        self._pending: list[str] = []
        self._timer: Any = None
        self._closed = False

    def warn(self, origin: str, line: str) -> None:
        if self._warned < FIRST_WARNINGS or self._closed:
            self._warned += 1
            logger.warning(line)
            return
        logger.debug(line)
        self._pending.append(origin)
        if self._timer is None:
            self._timer = self._call_later(self.interval, self._flush)

    def _flush(self) -> None:
        self._timer = None
        if self._pending:
            origins, self._pending = self._pending, []
            named = ", ".join(origins[:MAX_NAMED])
            more = f" and {len(origins) - MAX_NAMED} more" if len(origins) > MAX_NAMED else ""
            logger.warning(
                f"{len(origins)} more origin(s) unreachable: {named}{more}; their "
                "requests wait and robots.txt is retried as the WARNINGs above say (each "
                "origin's line is at DEBUG; stats: robotstxt/unreachable)"
            )

    def close(self) -> None:
        """The last summary now: a timer would not fire once the crawl has ended."""
        self._closed = True
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._flush()
