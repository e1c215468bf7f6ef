"""What the real-crawl test modules share: scrapy-rep settings and server-log helpers."""

from __future__ import annotations

import itertools
from typing import Any

from scrapy.utils.defer import deferred_from_coro

from tests.conftest import ListSpider

#: scrapy-rep enabled, a process-local store, and budgets small enough for fast tests.
REP: dict[str, Any] = {
    "ADDONS": {"scrapy_rep.Addon": 0},
    "REP_STORAGE": "memory",
    "RETRY_ENABLED": False,
    "REP_RETRY_BACKOFF": 0.2,
    "REP_FETCH_TIMEOUT": 1,
}
DISALLOW_PRIVATE = "User-agent: *\nDisallow: /private\n"


def pages_of(mockserver: Any, host: str) -> list[str]:
    """Paths the server received for ``host``, robots.txt fetches left out."""
    return [p for p in mockserver.paths(host) if p != "/robots.txt"]


def times_of(mockserver: Any, host: str, path: str) -> list[float]:
    """Server-side arrival times of ``path`` on ``host``."""
    return [e["t"] for e in mockserver.log(host) if e["path"] == path]


#: How much later than Scrapy sent it a request may reach the mock server on a loaded
#: machine (CI runs 4 xdist workers on 2 cores): the client's reactor or the server
#: process can be descheduled between the send and the server's read. One request
#: delayed so and the next not shortens the gap *at the server* by up to this much.
TRANSIT_TOLERANCE = 0.3


def assert_spaced(times: list[float], delay: float, tolerance: float = TRANSIT_TOLERANCE) -> None:
    """Server arrival ``times`` show requests sent at least ``delay`` apart, allowing each
    arrival up to ``tolerance`` s of transit on a loaded machine. Two checks: every gap
    (a burst, i.e. no spacing, shows gaps of a few ms), and the whole span, where
    transit cannot accumulate: only the first arrival's lateness shortens it, so it
    must be at least ``(n - 1) * delay - tolerance``."""
    assert len(times) >= 2, times
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert min(gaps) >= delay - tolerance, gaps
    assert times[-1] - times[0] >= (len(times) - 1) * delay - tolerance, gaps


class StopWhenSettledSpider(ListSpider):
    """Stops the crawl (a graceful stop, as a timeout or Ctrl-C does) as soon as
    ``settled`` of its requests have an outcome: a response or a failure (a forbidden
    request reaches the errback as IgnoreRequest)."""

    name = "stop-when-settled"

    def __init__(self, settled: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settled = settled
        self.stopped_early = False

    def parse(self, response: Any, **kwargs: Any) -> Any:
        yield from super().parse(response, **kwargs)
        self._stop_when_settled()

    def on_error(self, failure: Any) -> None:
        super().on_error(failure)
        self._stop_when_settled()

    def _stop_when_settled(self) -> None:
        if not self.stopped_early and len(self.responses) + len(self.failures) >= self.settled:
            self.stopped_early = True
            deferred_from_coro(self.crawler.stop_async())
