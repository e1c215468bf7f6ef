"""The crawl's calls to the store (``StoreCalls``) and the fetch leases they keep
(``LeaseKeeper``).

A slow store answer (Redis's socket, SQLite's file lock) on the reactor thread stalls every
download, so ``StoreCalls.call`` runs calls in one dedicated worker thread: in the order
made, and a backend needs no more thread safety than one extra thread. A store that
``answers_without_waiting`` (``MemoryStorage`` always, SQLite mostly) is first asked
on the reactor thread unless a call of the same origin (``key``) is queued in the worker (so
each origin's calls keep their order): it answers at once, or raises ``WouldBlock`` and goes
to the worker. A hop to the worker and back took 0.1-0.5 s on a busy crawler, an answer at
once tens of microseconds; per origin, so one call that waits sends no other origin there.

``close`` waits at most ``CLOSE_WAIT`` seconds for the calls already made: a hung store must
not hang the stop, nor interpreter exit (the worker is a daemon thread).
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import TYPE_CHECKING, Any, TypeVar

from twisted.internet import defer
from twisted.internet.task import LoopingCall
from twisted.python.failure import Failure

from scrapy_rep.storage.base import WouldBlock, describe_holder

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy_rep.policy.config import Config
    from scrapy_rep.storage.base import RobotsStorage

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

#: How long closing waits for the calls already made (seconds): each call is bounded by the
#: store itself (SQLite's busy timeout, Redis's socket timeout), so only a hung store hits it.
CLOSE_WAIT = 10.0

_Job = tuple["defer.Deferred[Any]", "Callable[..., Any]", tuple[Any, ...]]


def installed_reactor() -> Any:
    """The reactor Scrapy installed, looked up when used, never at import time."""
    from twisted.internet import reactor

    return reactor


class StoreCalls:
    def __init__(self, storage: RobotsStorage) -> None:
        self.storage = storage
        self.answers_now = storage.answers_without_waiting
        # The worker: one daemon thread, started on first use, that runs calls in the order
        # given and hands each answer to the reactor thread.
        self._worker: threading.Thread | None = None
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._reactor: Any = None
        # key -> calls of that key given to the worker and not yet answered
        self._queued: dict[str | None, int] = {}
        self.answered_now = 0  # (for tests and benchmarks)
        self.answered_in_worker = 0

    def call(
        self, function: Callable[..., _T], *args: Any, key: str | None = None
    ) -> defer.Deferred[_T]:
        """``function(*args)``; ``key``: the origin the call is about (calls of one key
        run in the order they were made)."""
        if self.answers_now and key not in self._queued:
            try:
                with self.storage.without_waiting():
                    result = function(*args)
            except WouldBlock:
                pass  # to the worker, which may wait
            except Exception:
                return defer.fail()
            else:
                self.answered_now += 1
                # In the worker, ordered with no origin's calls (it waits for nothing: PASSIVE).
                if self.storage.housekeeping_due():
                    self._in_worker(self.storage.housekeeping).addErrback(lambda _: None)
                return defer.succeed(result)
        self._queued[key] = self._queued.get(key, 0) + 1
        return self._in_worker(function, *args).addBoth(self._answered, key)

    def _in_worker(self, function: Callable[..., _T], *args: Any) -> defer.Deferred[_T]:
        if self._worker is None:
            self._reactor = installed_reactor()
            self._jobs = queue.SimpleQueue()  # (a worker left hung by a close keeps its own)
            self._worker = threading.Thread(
                target=self._work, args=(self._jobs,), name="scrapy-rep-store", daemon=True
            )
            self._worker.start()
            self._reactor.addSystemEventTrigger("during", "shutdown", self.close)
        deferred: defer.Deferred[_T] = defer.Deferred()
        self._jobs.put((deferred, function, args))
        return deferred

    def _work(self, jobs: queue.SimpleQueue[_Job | None]) -> None:
        while (job := jobs.get()) is not None:
            deferred, function, args = job
            try:
                result = function(*args)
            except BaseException:
                failure = Failure()  # type: ignore[no-untyped-call]
                self._reactor.callFromThread(deferred.errback, failure)
            else:
                self._reactor.callFromThread(deferred.callback, result)

    def _answered(self, result: _T, key: str | None) -> _T:
        self.answered_in_worker += 1
        self._queued[key] -= 1
        if not self._queued[key]:
            del self._queued[key]
        return result

    def close(self) -> None:
        worker, self._worker = self._worker, None
        if worker is None:
            return
        self._jobs.put(None)
        worker.join(CLOSE_WAIT)
        if worker.is_alive():
            left = max(self._jobs.qsize(), 1)  # (the stop marker is counted for the running one)
            logger.warning(
                "the robots.txt store (%s) did not answer %d call(s) within "
                "%g s of the close; not waiting for them (a fetch lease left behind ends "
                "within REP_LEASE_TTL; an unwritten robots.txt copy is fetched again)",
                self.storage.describe(),
                left,
                CLOSE_WAIT,
            )


# A wait on another process's lease longer than this is logged (INFO, once per origin).
LEASE_WAIT_LOG_AFTER = 5.0


class LeaseKeeper:
    """Fetch leases in a shared store while a fetch runs (docs/cluster.md): renewed off
    the reactor thread, and a long wait on another holder's lease said once per origin."""

    def __init__(
        self,
        storage: RobotsStorage,
        holder: str,
        config: Config,
        calls: StoreCalls,
        clock: Callable[[], float],
        reactor: Any = None,
    ) -> None:
        self.storage = storage
        self.reactor = reactor  # (the installed one unless given)
        self.holder = holder
        self.config = config
        self.calls = calls
        self.clock = clock
        self._renewers: dict[str, LoopingCall] = {}
        # Since when this process waits on another holder's lease, per origin.
        self._lease_waits: dict[str, float] = {}
        self._lease_wait_logged: set[str] = set()

    def waited(self, origin: str) -> None:
        """The wait on another holder's lease (if any) is over."""
        self._lease_waits.pop(origin, None)

    def start_renewing(self, origin: str) -> None:
        """Renew the fetch lease while the fetch runs: the lease stays short, so a
        holder that dies blocks the origin for at most REP_LEASE_TTL."""
        self.stop_renewing(origin)
        renewer = LoopingCall(self._renew, origin)
        renewer.clock = self.reactor or installed_reactor()
        self._renewers[origin] = renewer
        renewer.start(self.config.lease_renew_every, now=False)

    def stop_renewing(self, origin: str) -> None:
        renewer = self._renewers.pop(origin, None)
        if renewer is not None and renewer.running:
            renewer.stop()

    def _renew(self, origin: str) -> defer.Deferred[Any]:
        # Off the reactor like every store call (a slow store must not stall it);
        # LoopingCall waits for the Deferred before the next renewal.
        renewing = self.calls.call(
            self.storage.renew_lease, origin, self.holder, self.config.lease_ttl, key=origin
        )
        renewing.addCallback(self._renewed, origin)
        return renewing.addErrback(self._renew_failed, origin)

    def _renew_failed(self, failure: Any, origin: str) -> None:
        # A store must not raise, but the renewal loop must never die of it.
        logger.error("renewing the fetch lease of %s failed: %s", origin, failure)

    def _renewed(self, kept: bool, origin: str) -> None:
        if not kept and origin in self._renewers:
            logger.info(
                "this process lost the fetch lease of %s (not renewed "
                "within REP_LEASE_TTL, or taken over); its robots.txt may be fetched "
                "twice",
                origin,
            )
            self.stop_renewing(origin)

    def note_wait(self, origin: str) -> None:
        """Say once per origin when another holder's lease keeps us waiting."""
        now = self.clock()
        since = self._lease_waits.setdefault(origin, now)
        if now - since < LEASE_WAIT_LOG_AFTER or origin in self._lease_wait_logged:
            return
        self._lease_wait_logged.add(origin)
        asking = self.calls.call(self.storage.lease_holder, origin, key=origin)
        asking.addCallback(self._log_lease_wait, origin, now - since)
        asking.addErrback(lambda failure: self._log_lease_wait(None, origin, now - since))

    def _log_lease_wait(self, holder: str | None, origin: str, waited: float) -> None:
        # Not bounded by REP_LEASE_TTL: a live holder renews its lease while its fetch runs,
        # one request per redirect hop (RFC 9309 2.3.1.2), each within REP_FETCH_TIMEOUT;
        # only a dead holder's lease runs out (our settings guess the holder's).
        config = self.config
        requests = config.max_redirects + 1
        logger.info(
            "robots.txt of %s: waiting %.0f s so far for another process (%s) that holds "
            "its fetch lease. A live holder renews it while its fetch runs, so the wait "
            "can last about %.0f s from the holder's start: up to REP_FETCH_TIMEOUT (%g s) "
            "for each of up to %d request(s) (REP_MAX_REDIRECTS = %d), plus REP_LEASE_TTL "
            "(%g s) if the holder dies meanwhile",
            origin,
            waited,
            "unknown" if holder is None else describe_holder(holder),
            config.fetch_timeout * requests + config.lease_ttl,
            config.fetch_timeout,
            requests,
            config.max_redirects,
            config.lease_ttl,
        )

    def close(self) -> None:
        for origin in list(self._renewers):
            self.stop_renewing(origin)
