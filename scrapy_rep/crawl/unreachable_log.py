"""The WARNINGs for origins whose robots.txt turns unreachable, bounded at broad-crawl scale.

The first few origins get their own WARNING (what waits, the next try, when the wait
ends: crawl/visibility.py). After them, a broad crawl with many dead origins would log a
line per origin (thousands in a 100,000-domain crawl), so each further origin's line
goes to DEBUG and one WARNING per ``LOGSTATS_INTERVAL`` names the origins that turned
unreachable since the last one. Nothing is lost: every origin is named at WARNING, each
counted in ``robotstxt/unreachable``, and its full line is at DEBUG.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

logger = logging.getLogger("scrapy_rep")

# Origins with a WARNING of their own before the summary lines take over.
FIRST_WARNINGS = 5
# A summary line names at most this many origins; the rest are counted.
MAX_NAMED = 20
# The summary's period when LOGSTATS_INTERVAL is 0 (Scrapy's "no periodic stats"): the
# lines still come, or the origins after the first few would be named only at close.
DEFAULT_INTERVAL = 60.0


def summary_line(origins: list[str]) -> str:
    named = ", ".join(origins[:MAX_NAMED])
    more = f" and {len(origins) - MAX_NAMED} more" if len(origins) > MAX_NAMED else ""
    return (
        f"scrapy-rep: {len(origins)} more origin(s) unreachable: {named}{more}; their "
        "requests wait and robots.txt is retried as the WARNINGs above say (each origin's "
        "line is at DEBUG; stats: robotstxt/unreachable)"
    )


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
        """``line``: the origin's own WARNING text."""
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
            logger.warning(summary_line(origins))

    def close(self) -> None:
        """The last summary now: a timer would not fire once the crawl has ended."""
        self._closed = True
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._flush()
