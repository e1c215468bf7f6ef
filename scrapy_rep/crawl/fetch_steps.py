"""The steps of one robots.txt fetch, for ``OriginCoordinator``.

Queued (``FetchQueue``: at most ``CONCURRENT_REQUESTS`` in flight), then the fetch lease
is taken in the store together with a fresh read (a shared store: another process may
have just stored the answer), the file is fetched while the lease is renewed, and the
outcome is stored before the fetch counts as ended, so no second fetch of the origin
starts in between. Store calls run through ``StoreCalls`` (off the reactor thread).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy_rep.crawl.visibility import unreachable_line
from scrapy_rep.policy.records import UNREACHABLE, OriginRecord
from scrapy_rep.policy.robots_policy import FetchOutcome

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request

    from scrapy_rep.crawl.fetch_queue import FetchQueue
    from scrapy_rep.crawl.fetcher import RobotsFetcher
    from scrapy_rep.crawl.leases import LeaseKeeper
    from scrapy_rep.crawl.registry import RuntimeRegistry
    from scrapy_rep.crawl.runtime import OriginRuntime
    from scrapy_rep.crawl.store_calls import StoreCalls
    from scrapy_rep.crawl.unreachable_log import UnreachableWarnings
    from scrapy_rep.crawl.waiting_room import WaitingRoom
    from scrapy_rep.policy.robots_policy import RobotsPolicy
    from scrapy_rep.storage.base import RobotsStorage

logger = logging.getLogger("scrapy_rep")

# How often a process that lost the fetch lease to another process looks at the shared
# store for the result. Short, so waiting workers see the result promptly.
SHARED_POLL_INTERVAL = 0.25


class FetchSteps:
    """Mixed into ``OriginCoordinator``, which sets these attributes and methods."""

    policy: RobotsPolicy
    storage: RobotsStorage
    fetcher: RobotsFetcher
    clock: Callable[[], float]
    room: WaitingRoom
    registry: RuntimeRegistry
    fetches: FetchQueue
    calls: StoreCalls
    leases: LeaseKeeper
    holder: str
    closed: bool
    give_up: Callable[[str, list[Request], str], None] | None
    unreachable_warnings: UnreachableWarnings
    waiting_fate: Callable[[], str] | None
    _inc: Callable[[str], None]
    _fetches_pending: int
    _waiter_count: int

    def wake(self, origin: str, *, reread: bool = True) -> None:
        raise NotImplementedError

    def _arm_timer(self, rt: OriginRuntime, when: float | None) -> None:
        raise NotImplementedError

    def _cancel_timer(self, rt: OriginRuntime) -> None:
        raise NotImplementedError

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
            self.storage.acquire_lease_and_get,
            rt.origin,
            self.holder,
            self._lease_ttl(),
            key=rt.origin,
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
            storage.put_and_release_lease(rt.origin, record, holder)
            return record

        def failed(failure: Any) -> OriginRecord:
            logger.error("scrapy-rep: storing robots.txt of %s failed: %s", rt.origin, failure)
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
        self.registry.note_record(rt)
        if record.unreachable and not was_unreachable:
            rt.unreachable_spells += 1
            self._inc("robotstxt/unreachable")
            waiting = self.room.count(rt.origin) + len(rt.waiters)
            if self.give_up is not None and not self.closed:
                self._give_up(rt, outcome.detail)
                return
            # WARNING, with the error's text (Scrapy's middleware: ERROR); after the
            # first few origins, one summary line per LOGSTATS_INTERVAL
            self.unreachable_warnings.warn(
                rt.origin,
                unreachable_line(
                    rt.origin,
                    outcome,
                    record,
                    waiting,
                    now,
                    self.policy,
                    None if self.waiting_fate is None else self.waiting_fate(),
                ),
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


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor
