"""What INFO says while requests wait on robots.txt (docs/waiting.md).

A crawl waiting on an unreachable robots.txt must not look hung (the line listing the
waiting origins is closing.py's).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy_rep.policy.records import OriginRecord
    from scrapy_rep.policy.robots_policy import FetchOutcome, RobotsPolicy


def duration(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 10:
        return f"{round(seconds, 1):g} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def clock_time(epoch: float, now: float | None = None) -> str:
    """``epoch`` as a UTC time of day, with its date when that is not ``now``'s date
    (a 12-hour wait ends tomorrow as often as not)."""
    moment = time.gmtime(epoch)
    if now is not None and moment[:3] != time.gmtime(now)[:3]:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", moment)
    return time.strftime("%H:%M:%S UTC", moment)


def unreachable_line(
    origin: str,
    outcome: FetchOutcome,
    record: OriginRecord,
    waiting: int,
    now: float,
    policy: RobotsPolicy,
    fate: str | None = None,
) -> str:
    """The WARNING for an origin turning unreachable; ``fate``: what becomes of its
    waiting requests if the crawl stops now (dropped, kept, handed back)."""
    config = policy.config
    retry_at = record.next_retry_at or now
    retry_setting = "Retry-After" if outcome.retry_after is not None else "REP_RETRY_BACKOFF"
    ends = (record.unreachable_since or now) + config.unreachable_wait
    has_copy = record.kind is not None and record.fetched_at is not None
    then = (
        "the last good copy applies (REP_STALE_MAX_AGE permitting)"
        if has_copy
        else f"REP_UNREACHABLE_FALLBACK ({config.unreachable_fallback}) applies"
    )
    return (
        f"robots.txt of {origin} is unreachable ({outcome.detail.rstrip('.')}): "
        + (f"{waiting} request(s) wait for it" if waiting else "its requests will wait for it")
        + f"; next try in {duration(retry_at - now)} ({retry_setting}); "
        f"the wait ends at {clock_time(ends, now)} at the latest (REP_UNREACHABLE_WAIT = "
        f"{duration(config.unreachable_wait)}), then {then}; a spider with nothing else "
        f"to do waits at most REP_IDLE_WAIT = {duration(config.idle_wait)}; Ctrl-C stops "
        "the crawl now"
        + (
            " (the start-up line says what becomes of waiting requests)"
            if fate is None
            else f", and the waiting requests are {fate}"
        )
    )


class IdleWatch:
    """How long the spider has had nothing to do but wait on robots.txt: ``spider_idle``
    fires only while the engine is idle; a spell ends when ``progress`` changes."""

    def __init__(self, idle_wait: float, interval: float) -> None:
        self.idle_wait = idle_wait
        self.interval = interval
        self._since: float | None = None
        self._progress: object = None
        self._last_line = 0.0

    def idle_for(self, progress: object) -> float:
        now = time.monotonic()
        if self._since is None or progress != self._progress:
            self._since = now
            self._progress = progress
            self._last_line = now  # the first line comes one interval into the spell
        return now - self._since

    def expired(self, idle_for: float) -> bool:
        return idle_for >= self.idle_wait

    def line_due(self) -> bool:
        now = time.monotonic()
        if self.interval <= 0 or now - self._last_line < self.interval:
            return False
        self._last_line = now
        return True
