"""A robots.txt fetcher that records every fetch and lets the test answer it.

``OriginCoordinator`` awaits ``fetcher.fetch(origin, trigger)`` for a ``FetchOutcome``. Here
each call waits until the test answers it with a status (classified by the package's
own ``classify_status``, as the real fetcher classifies a response) or a timeout.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from scrapy import Request
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from scrapy_rep.policy.records import UNREACHABLE
from scrapy_rep.policy.robots_policy import FetchOutcome, classify_status

ALLOW_NOTHING_UNDER_PRIVATE = b"User-agent: *\nDisallow: /private\n"


@dataclass
class FetchCall:
    origin: str
    trigger: Request | None = None  # the page request whose evaluation started it
    answer: Deferred[FetchOutcome] = field(default_factory=Deferred)

    @property
    def answered(self) -> bool:
        return self.answer.called


class FakeFetcher:
    """``calls``: every fetch in the order it started, answered or not."""

    def __init__(self, now: Callable[[], float]) -> None:
        # ``now``: the test's clock (a callable), for Retry-After dates as the real
        # fetcher reads them.
        self._now = now
        self.calls: list[FetchCall] = []

    async def fetch(self, origin: str, trigger: Request | None = None) -> FetchOutcome:
        call = FetchCall(origin, trigger)
        self.calls.append(call)
        return await maybe_deferred_to_future(call.answer)

    # -- what the test looks at ----------------------------------------------------------

    def origins(self) -> list[str]:
        return [call.origin for call in self.calls]

    def count(self, origin: str) -> int:
        return sum(1 for call in self.calls if call.origin == origin)

    def pending(self, origin: str | None = None) -> list[FetchCall]:
        return [
            call
            for call in self.calls
            if not call.answered and (origin is None or call.origin == origin)
        ]

    # -- answers ---------------------------------------------------------------------------

    def _open_call(self, origin: str) -> FetchCall:
        pending = self.pending(origin)
        if len(pending) != 1:
            raise AssertionError(f"{len(pending)} fetch(es) of {origin} waiting, expected 1")
        return pending[0]

    def answer(
        self,
        origin: str,
        status: int,
        body: bytes = ALLOW_NOTHING_UNDER_PRIVATE,
        headers: Mapping[str, str] | None = None,
    ) -> FetchOutcome:
        """Answer the origin's one open fetch as a response with ``status`` would be."""
        now = self._now()
        lowered = {name.lower(): value for name, value in (headers or {}).items()}
        outcome = classify_status(status, lowered, body, now)
        self._open_call(origin).answer.callback(outcome)
        return outcome

    def time_out(self, origin: str) -> FetchOutcome:
        """Answer the origin's open fetch as a download timeout (no response)."""
        outcome = FetchOutcome(UNREACHABLE, "TimeoutError: Getting robots.txt took too long")
        self._open_call(origin).answer.callback(outcome)
        return outcome
