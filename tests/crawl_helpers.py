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
#: delayed so and the next not shortens that gap *at the server* (seen: 1 s sent as
#: 0.85 s in CI, 0.52 s at a load average of 20 on 2 cores).
TRANSIT_TOLERANCE = 0.5


def assert_spaced(times: list[float], delay: float, tolerance: float = TRANSIT_TOLERANCE) -> None:
    """Arrival ``times`` (at the server) of requests sent at least ``delay`` apart.

    Two checks, each robust to one arrival being up to ``tolerance`` s late:
    * the whole span ``last - first >= (n - 1) * delay - tolerance``: lateness cannot
      accumulate over it (a late arrival shortens one gap and lengthens the one
      before), only the first arrival's lateness shortens it; so the requests were
      spaced by the delay on average, where an unspaced burst spans milliseconds;
    * every gap ``>= delay / 2``: no two requests were sent together (a burst's gaps
      are milliseconds), while one request up to ``delay / 2`` late still passes.
    """
    assert len(times) >= 2, times
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert times[-1] - times[0] >= (len(times) - 1) * delay - tolerance, gaps
    assert min(gaps) >= delay / 2, gaps


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
