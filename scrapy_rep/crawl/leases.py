"""Fetch leases in a shared store while a fetch runs (docs/cluster.md): renewed off the
reactor thread, and a long wait on another holder's lease said once per origin."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from twisted.internet.task import LoopingCall

from scrapy_rep.storage.base import describe_holder

if TYPE_CHECKING:
    from collections.abc import Callable

    from twisted.internet.defer import Deferred

    from scrapy_rep.crawl.store_calls import StoreCalls
    from scrapy_rep.policy.config import Config
    from scrapy_rep.storage.base import RobotsStorage

logger = logging.getLogger("scrapy_rep")

# Waiting on another process's fetch lease for longer than this is logged (INFO, once
# per origin): a few seconds is a normal fetch; more may be a stuck or dead holder.
LEASE_WAIT_LOG_AFTER = 5.0


class LeaseKeeper:
    def __init__(
        self,
        storage: RobotsStorage,
        holder: str,
        config: Config,
        calls: StoreCalls,
        clock: Callable[[], float],
    ) -> None:
        self.storage = storage
        self.holder = holder
        self.config = config
        self.calls = calls
        self.clock = clock
        self._renewers: dict[str, LoopingCall] = {}
        # Since when this process waits on another holder's lease, per origin.
        self._lease_waits: dict[str, float] = {}
        self._lease_wait_logged: set[str] = set()

    def waited(self, origin: str) -> None:
        """The wait on another holder (if any) is over."""
        self._lease_waits.pop(origin, None)

    def start_renewing(self, origin: str) -> None:
        """Renew the fetch lease while the fetch runs: the lease stays short, so a
        holder that dies blocks the origin for at most REP_LEASE_TTL."""
        self.stop_renewing(origin)
        renewer = LoopingCall(self._renew, origin)
        renewer.clock = _reactor()
        self._renewers[origin] = renewer
        renewer.start(self.config.lease_renew_every, now=False)

    def stop_renewing(self, origin: str) -> None:
        renewer = self._renewers.pop(origin, None)
        if renewer is not None and renewer.running:
            renewer.stop()

    def _renew(self, origin: str) -> Deferred[Any]:
        # Through the store's calls like every other store call: a slow store must not
        # stall the reactor, and the crawl's stop waits for it only within a bound
        # (store_calls.CLOSE_WAIT). LoopingCall waits for the Deferred before the next
        # renewal.
        renewing = self.calls.call(
            self.storage.renew_lease, origin, self.holder, self.config.lease_ttl, key=origin
        )
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
        # The bound that holds is not REP_LEASE_TTL: a live holder renews its lease for
        # as long as its fetch runs, and the fetch is one request per redirect hop
        # (RFC 9309 2.3.1.2), each bounded by REP_FETCH_TIMEOUT. Only a holder that is
        # gone stops renewing, and its lease then runs out within REP_LEASE_TTL. (The
        # holder's own settings apply; ours are the best guess of them.)
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


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor
