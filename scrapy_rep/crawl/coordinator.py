"""Per-origin runtime: one fetch in flight, held requests, timers, and their release.

This is the part of the middleware that has to live in the reactor. What an origin's
state *means* is decided by ``RobotsPolicy``; what is remembered lives in the store;
this class only sequences fetches and wakes waiting requests.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall

from scrapy_rep.crawl.report import SummaryTotals
from scrapy_rep.crawl.runtime import WAITED_META_KEY, OriginRuntime
from scrapy_rep.policy.records import UNREACHABLE
from scrapy_rep.policy.robots_policy import (
    FALLBACK,
    FRESH,
    STALE,
    Evaluation,
    FetchOutcome,
    RobotsPolicy,
)
from scrapy_rep.storage.base import (
    acquire_and_read,
    describe_holder,
    lease_holder,
    new_holder,
    put_and_release,
    renew_lease,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request

    from scrapy_rep.crawl.fetcher import RobotsFetcher
    from scrapy_rep.storage.base import RobotsStorage

logger = logging.getLogger("scrapy_rep")

# How often a process that lost the fetch lease to another process looks at the shared
# store for the result. Short, so waiting workers see the result promptly.
SHARED_POLL_INTERVAL = 0.25
# Timers never sleep longer than this, so a clock change or a lease expiry is noticed.
MAX_TIMER = 60.0
# Waiting on another process's fetch lease for longer than this is logged (INFO, once
# per origin): a few seconds is a normal fetch; more may be a stuck or dead holder.
LEASE_WAIT_LOG_AFTER = 5.0


class OriginCoordinator:
    """Sequences fetches per origin and holds/releases requests around them."""

    def __init__(
        self,
        policy: RobotsPolicy,
        storage: RobotsStorage,
        fetcher: RobotsFetcher,
        clock: Callable[[], float],
        release: Callable[[Request], None],
        inc_stat: Callable[[str], None],
        releasable: Callable[[Evaluation], bool] | None = None,
    ) -> None:
        self.policy = policy
        self.storage = storage
        self.fetcher = fetcher
        self.clock = clock
        self._release = release
        self._inc = inc_stat
        # When held requests may go: normally once the origin is decided; audit mode
        # also lets them go once the origin is known to be unreachable.
        self.releasable: Callable[[Evaluation], bool] = releasable or (lambda ev: ev.ready)
        # Runtimes of idle origins beyond this bound are folded into ``evicted`` (their
        # record stays in the store), so a broad crawl's memory stays bounded.
        self.max_runtimes = max(policy.config.memory_max_origins, 1)
        self.origins: OrderedDict[str, OriginRuntime] = OrderedDict()
        self.evicted = SummaryTotals()
        # host:pid:start:nonce, so that a later process on this machine can tell that
        # a lease left behind by this one is dead (storage.base.holder_is_dead)
        self.holder = new_holder()
        # Fetches in flight renew their lease (SPEC section 3 "leases").
        self._renewers: dict[str, LoopingCall] = {}
        # Since when this process waits on another holder's lease, per origin.
        self._lease_waits: dict[str, float] = {}
        self._lease_wait_logged: set[str] = set()
        self.closed = False

    # -- queries -----------------------------------------------------------------------

    def runtime(self, origin: str) -> OriginRuntime:
        rt = self.origins.get(origin)
        if rt is None:
            rt = self.origins[origin] = OriginRuntime(origin)
            if len(self.origins) > self.max_runtimes:
                self._evict_idle()
        else:
            self.origins.move_to_end(origin)
        return rt

    def _evict_idle(self) -> None:
        """Forget the least recently used idle origins (down to 90 % of the bound)."""
        target = int(self.max_runtimes * 0.9)
        for origin in list(self.origins):
            if len(self.origins) <= target:
                break
            rt = self.origins[origin]
            if rt.fetching or rt.held or rt.waiters or (rt.timer is not None and rt.timer.active()):
                continue
            self.evicted.add(rt)
            del self.origins[origin]

    def busy(self) -> bool:
        """True while anything could still produce or release a request."""
        return any(rt.fetching or rt.held or rt.waiters for rt in self.origins.values())

    def evaluate(self, origin: str, *, reread: bool = False) -> Evaluation:
        """The origin's state now; starts a fetch or a timer when one is due.

        ``reread`` refreshes the record from a shared store first (timer polls). Each
        store read costs a round trip (Redis) or a query (SQLite), so a record read in
        this call is never read again in it.
        """
        rt = self.runtime(origin)
        fresh = rt.fresh
        if fresh is not None and not reread and rt.record is fresh[1] and self.clock() < fresh[0]:
            return fresh[2]  # the per-request fast path: same record, not expired
        just_read = False
        if not rt.loaded:
            rt.record = self.storage.get(origin)
            rt.loaded = just_read = True
            if rt.record is not None:
                self._inc("robotstxt/cache_hit")
        elif reread and self.storage.shared and not rt.fetching:
            just_read = self._refresh(rt)
        evaluation = self.policy.evaluate(rt.record, self.clock())
        if evaluation.fetch_due and not rt.fetching and self.storage.shared and not just_read:
            # Another process may already have refreshed it.
            just_read = self._refresh(rt)
            evaluation = self.policy.evaluate(rt.record, self.clock())
        if evaluation.fetch_due and not rt.fetching:
            self._start_fetch(rt)
        elif not evaluation.ready and not rt.fetching:
            self._arm_timer(rt, evaluation.wake_at)
        self._note_source(rt, evaluation)
        record = rt.record
        if evaluation.source == FRESH and record is not None and not evaluation.fetch_due:
            rt.fresh = (record.expires_at, record, evaluation)
        return evaluation

    def _refresh(self, rt: OriginRuntime) -> bool:
        stored = self.storage.get(rt.origin)
        if stored is not None:
            rt.record = stored
        return True

    # -- holding -----------------------------------------------------------------------

    def hold(self, origin: str, request: Request) -> None:
        rt = self.runtime(origin)
        rt.held.append((request, self.clock()))
        rt.delayed += 1
        self._inc("robotstxt/delayed")

    def wait(self, origin: str) -> Deferred[None]:
        """For requests that reached the downloader without passing the scheduler."""
        deferred: Deferred[None] = Deferred()
        rt = self.runtime(origin)
        rt.waiters.append(deferred)
        rt.delayed += 1
        self._inc("robotstxt/delayed")
        return deferred

    def take_all_held(self) -> list[Request]:
        """Remove and return every held request (at close)."""
        requests: list[Request] = []
        for rt in self.origins.values():
            requests.extend(request for request, _ in rt.held)
            rt.held.clear()
        return requests

    # -- fetching ----------------------------------------------------------------------

    def _start_fetch(self, rt: OriginRuntime) -> None:
        if self.closed:
            return
        # The previous holder may have stored its result and released the lease
        # between our last read and our lease (a poll that read just before its
        # write): a shared store is read once more, so one fetch serves every process.
        held, stored = acquire_and_read(self.storage, rt.origin, self.holder, self._lease_ttl())
        if not held:
            # Another process is fetching this robots.txt; watch the store for its result.
            self._note_lease_wait(rt.origin)
            self._arm_timer(rt, self.clock() + SHARED_POLL_INTERVAL)
            return
        self._lease_waits.pop(rt.origin, None)
        if (
            self.storage.shared
            and stored is not None
            and not self.policy.evaluate(stored, self.clock()).fetch_due
        ):
            self.storage.release_lease(rt.origin, self.holder)
            rt.record = stored
            _reactor().callLater(0, self.wake, rt.origin)
            return
        self._cancel_timer(rt)
        rt.fetching = True
        rt.fetches += 1
        if rt.record is not None and not rt.record.unreachable:
            self._inc("robotstxt/refetch")
        from scrapy.utils.defer import deferred_from_coro

        self._start_renewing(rt.origin)
        deferred = deferred_from_coro(self._fetch(rt))
        deferred.addErrback(self._fetch_failed, rt)

    def _lease_ttl(self) -> float:
        return self.policy.config.lease_ttl

    # -- leases ------------------------------------------------------------------------

    def _start_renewing(self, origin: str) -> None:
        """Renew the fetch lease while the fetch runs: the lease stays short, so a
        holder that dies blocks the origin for at most REP_LEASE_TTL."""
        self._stop_renewing(origin)
        renewer = LoopingCall(self._renew, origin)
        renewer.clock = _reactor()
        self._renewers[origin] = renewer
        renewer.start(self.policy.config.lease_renew_every, now=False)

    def _stop_renewing(self, origin: str) -> None:
        renewer = self._renewers.pop(origin, None)
        if renewer is not None and renewer.running:
            renewer.stop()

    def _renew(self, origin: str) -> Deferred[Any]:
        # In a worker thread (every store is thread-safe): a slow store must not stall
        # the reactor. LoopingCall waits for the Deferred before the next renewal.
        from twisted.internet.threads import deferToThread

        renewing = deferToThread(renew_lease, self.storage, origin, self.holder, self._lease_ttl())
        renewing.addCallback(self._renewed, origin)
        return renewing.addErrback(self._renew_failed, origin)

    def _renew_failed(self, failure: Any, origin: str) -> None:
        # A store must not raise, but the renewal loop must never die of it.
        logger.error("scrapy-rep: renewing the fetch lease of %s failed: %s", origin, failure)

    def _renewed(self, kept: bool, origin: str) -> None:
        if not kept and origin in self._renewers:
            logger.info(
                "scrapy-rep: this process lost the fetch lease of %s (not renewed "
                "within REP_LEASE_TTL, or taken over); its robots.txt may be fetched "
                "twice",
                origin,
            )
            self._stop_renewing(origin)

    def _note_lease_wait(self, origin: str) -> None:
        """Say once per origin when another holder's lease keeps us waiting."""
        now = self.clock()
        since = self._lease_waits.setdefault(origin, now)
        if now - since < LEASE_WAIT_LOG_AFTER or origin in self._lease_wait_logged:
            return
        self._lease_wait_logged.add(origin)
        from twisted.internet.threads import deferToThread

        asking = deferToThread(lease_holder, self.storage, origin)
        asking.addCallback(self._log_lease_wait, origin, now - since)
        asking.addErrback(lambda failure: self._log_lease_wait(None, origin, now - since))

    def _log_lease_wait(self, holder: str | None, origin: str, waited: float) -> None:
        logger.info(
            "robots.txt of %s: waiting %.0f s so far for another process (%s) that holds "
            "its fetch lease; if that holder is gone, the lease ends within "
            "REP_LEASE_TTL (%g s)",
            origin,
            waited,
            "unknown" if holder is None else describe_holder(holder),
            self._lease_ttl(),
        )

    async def _fetch(self, rt: OriginRuntime) -> None:
        try:
            outcome = await self.fetcher.fetch(rt.origin)
        finally:
            rt.fetching = False
            self._stop_renewing(rt.origin)
        self._record_outcome(rt, outcome)

    def _fetch_failed(self, failure: object, rt: OriginRuntime) -> None:
        # A bug in our own fetch path must not strand the origin's requests: count it
        # as unreachable so the normal retry/backoff path takes over.
        logger.error("scrapy-rep: robots.txt fetch of %s failed: %s", rt.origin, failure)
        rt.fetching = False
        self._stop_renewing(rt.origin)
        self._record_outcome(rt, FetchOutcome(UNREACHABLE, "internal error"))

    def _record_outcome(self, rt: OriginRuntime, outcome: FetchOutcome) -> None:
        now = self.clock()
        was_unreachable = rt.record is not None and rt.record.unreachable
        stored = self.storage.get(rt.origin) if self.storage.shared else rt.record
        record = self.policy.after_fetch(stored or rt.record, outcome, now)
        put_and_release(self.storage, rt.origin, record, self.holder)
        rt.record = record
        rt.loaded = True
        if record.unreachable and not was_unreachable:
            rt.unreachable_spells += 1
            self._inc("robotstxt/unreachable")
            waiting = len(rt.held) + len(rt.waiters)
            logger.warning(  # WARNING, with the error's text (Scrapy's middleware: ERROR)
                "robots.txt of %s is unreachable (%s): %s; next try in %.0f s",
                rt.origin,
                outcome.detail.rstrip("."),
                f"{waiting} request(s) wait for it" if waiting else "its requests will wait for it",
                (record.next_retry_at or now) - now,
            )
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

    # -- waking ------------------------------------------------------------------------

    def wake(self, origin: str, *, reread: bool = True) -> None:
        """Re-evaluate an origin; release its requests if it is ready."""
        rt = self.runtime(origin)
        rt.timer = None
        if self.closed:
            return
        evaluation = self.evaluate(origin, reread=reread)
        if not self.releasable(evaluation):
            return
        self._lease_waits.pop(origin, None)
        now = self.clock()
        held, rt.held = rt.held, []
        waiters, rt.waiters = rt.waiters, []
        for request, since in held:
            waited = now - since
            rt.longest_wait = max(rt.longest_wait, waited)
            # Shown in the request's robotstxt_decision meta (seconds held back).
            request.meta[WAITED_META_KEY] = request.meta.get(WAITED_META_KEY, 0.0) + waited
            rt.released += 1
            self._inc("robotstxt/released")
            self._release(request)
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
            self._inc(f"robotstxt/fallback/{evaluation.kind}")
            logger.info(
                "robots.txt of %s unreachable for longer than REP_UNREACHABLE_WAIT and no "
                "usable copy: REP_UNREACHABLE_FALLBACK applies (%s)",
                rt.origin,
                evaluation.kind,
            )
        rt.last_source = evaluation.source

    def _arm_timer(self, rt: OriginRuntime, when: float | None) -> None:
        if when is None or self.closed:
            return
        delay = min(max(when - self.clock(), 0.0), MAX_TIMER)
        if rt.timer is not None and rt.timer.active():
            if rt.timer.getTime() - _reactor().seconds() <= delay:
                return
            rt.timer.cancel()
        rt.timer = _reactor().callLater(delay, self.wake, rt.origin)

    def _cancel_timer(self, rt: OriginRuntime) -> None:
        if rt.timer is not None and rt.timer.active():
            rt.timer.cancel()
        rt.timer = None

    def close(self) -> None:
        self.closed = True
        for origin in list(self._renewers):
            self._stop_renewing(origin)
        for rt in self.origins.values():
            self._cancel_timer(rt)
            if rt.fetching:
                self.storage.release_lease(rt.origin, self.holder)


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor
