"""Released requests into the scheduler: a scheduler whose backend is down is waited out.

Re-injecting a released request (``SchedulerBridge.reinject``) fails because the
scheduler's *backend* does not answer, or because it refuses *the request itself*
(docs/cluster.md, "When the scheduler cannot take a released request"). The first waits in
the room and one request probes per try, with a doubling backoff; the second cannot succeed
on a retry: dropped with an ERROR. Any other error is taken for the backend's.
"""

from __future__ import annotations

import logging
import pickle
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request

logger = logging.getLogger(__name__)

#: What the waiting room's periodic INFO line says about such a request.
BACKEND_DOWN = "the scheduler's backend does not answer; released again when it does"
#: The first retry after a failure, and the most the doubling backoff waits.
FIRST_RETRY = 1.0
MAX_RETRY = 30.0

# What serialising a request raises when the request is at fault (Scrapy's
# request_to_dict, pickle, a JSON serializer). RecursionError: meta nested too deep.
_REQUEST_AT_FAULT = (ValueError, TypeError, AttributeError, pickle.PickleError, RecursionError)


def refused_for_itself(exc: BaseException) -> bool:
    """Whether a failed enqueue is the request's own fault (see the module docstring)."""
    if isinstance(exc, OSError) or type(exc).__module__.startswith("redis"):
        # A socket error, or anything redis-py raises (a ConnectionError, a TimeoutError,
        # BUSY/LOADING/READONLY/OOM answers): the backend, whatever the request.
        return False
    return isinstance(exc, _REQUEST_AT_FAULT)


class ReleaseRetry:
    """Re-injects released requests; never raises. ``hold_until`` keeps one in the room
    until a time, after which it comes back to ``release`` (through the middleware's gate)."""

    def __init__(
        self,
        reinject: Callable[[Request], None],
        hold_until: Callable[[str, Request, float, str], None],
        clock: Callable[[], float],
        inc_stat: Callable[[str], None],
        log_every: float,
    ) -> None:
        self.reinject = reinject
        self.hold_until = hold_until
        self.clock = clock
        self._inc = inc_stat
        self.log_every = log_every
        #: While the backend is down: the time of the next try, else None.
        self.retry_at: float | None = None
        self._backoff = 0.0
        self._down_since = 0.0
        self._last_line = 0.0
        # id() of the requests waiting for the backend (alive in the room), for the log.
        self._waiting: set[int] = set()

    def release(self, origin: str, request: Request) -> None:
        self._waiting.discard(id(request))
        now = self.clock()
        if self.retry_at is not None and now < self.retry_at:
            # Known down: one request per try asks the backend, the others wait for it.
            self._wait(origin, request)
            return
        try:
            self.reinject(request)
        except Exception as exc:
            if not refused_for_itself(exc):
                self._backend_failed(exc, now)
                self._wait(origin, request)
                return
            self._inc("robotstxt/release_failed")
            logger.error(
                "could not re-inject %s after robots.txt of %s was decided: the "
                "scheduler refuses the request itself (%s: %s); the request is dropped",
                request,
                origin,
                type(exc).__name__,
                exc,
                exc_info=exc,
            )
            return
        if self.retry_at is not None:
            logger.info(
                "the scheduler takes released requests again after %.0f s; "
                "%d request(s) that waited for it follow",
                now - self._down_since,
                len(self._waiting),
            )
            self.retry_at = None

    def _wait(self, origin: str, request: Request) -> None:
        assert self.retry_at is not None
        self._waiting.add(id(request))
        self._inc("robotstxt/release_retried")
        self.hold_until(origin, request, self.retry_at, BACKEND_DOWN)

    def _backend_failed(self, exc: Exception, now: float) -> None:
        first = self.retry_at is None
        self._backoff = FIRST_RETRY if first else min(self._backoff * 2, MAX_RETRY)
        self.retry_at = now + self._backoff
        if first:
            self._down_since = now
            self._last_line = now
            self._inc("robotstxt/release_backend_down")
            logger.info(
                "the scheduler cannot take released requests (%s: %s); its "
                "backend looks down: they wait and are released again when it answers "
                "(next try in %.0f s, backing off to %.0f s)",
                type(exc).__name__,
                exc,
                self._backoff,
                MAX_RETRY,
            )
        elif now - self._last_line >= self.log_every:
            self._last_line = now
            logger.info(
                "the scheduler's backend still does not answer after %.0f s "
                "(%s: %s): %d released request(s) wait for it (next try in %.0f s)",
                now - self._down_since,
                type(exc).__name__,
                exc,
                len(self._waiting) + 1,
                self._backoff,
            )
