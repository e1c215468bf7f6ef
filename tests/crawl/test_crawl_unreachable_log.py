"""Real crawls for the "robots.txt is unreachable" WARNINGs at broad-crawl scale.

The first few origins get a WARNING each; after them, one summary WARNING per
``LOGSTATS_INTERVAL`` names the origins that turned unreachable meanwhile, and each
origin's own line goes to DEBUG: many dead origins cost a few lines, none goes unnamed.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest_twisted

from scrapy_rep.crawl.coordinator import FIRST_WARNINGS, UnreachableWarnings
from tests.support.crawl import REP

DEAD_ORIGINS = 12
SUMMARY = re.compile(r"(\d+) more origin\(s\) unreachable: (.*?)(?: and (\d+) more)?;")


@pytest_twisted.ensureDeferred
async def test_many_unreachable_origins_log_a_summary_per_interval(
    mockserver: Any, run_crawl: Any, refused_port: int
) -> None:
    origins = [
        f"http://{mockserver.unique_host('dead')}:{refused_port}" for _ in range(DEAD_ORIGINS)
    ]
    settings = {
        **REP,
        "LOGSTATS_INTERVAL": 1.0,
        # then REP_UNREACHABLE_FALLBACK (allow) lets the pages go, and they fail too
        "REP_UNREACHABLE_WAIT": 2,
    }
    crawler = await run_crawl([o + "/page" for o in origins], settings=settings)
    warnings = [
        record
        for record in crawler.log_records
        if record.name.startswith("scrapy_rep") and record.levelno == logging.WARNING
    ]
    own = [r.getMessage() for r in warnings if " is unreachable (" in r.getMessage()]
    summaries = [r for r in warnings if SUMMARY.match(r.getMessage())]
    assert len(own) == FIRST_WARNINGS, own
    assert summaries, [r.getMessage() for r in warnings]
    named_alone = {o for o in origins if any(f"robots.txt of {o} is unreachable" in m for m in own)}
    named_in_summaries: list[str] = []
    for record in summaries:
        match = SUMMARY.match(record.getMessage())
        assert match is not None
        names = match.group(2).split(", ")
        assert int(match.group(1)) == len(names)  # 7 fit in one line: none "and N more"
        named_in_summaries += names
    # every origin named once at WARNING: alone or in a summary
    assert sorted(named_in_summaries) == sorted(set(origins) - named_alone)
    assert len(named_alone) == FIRST_WARNINGS
    # at most one summary per interval (the last may come early, at close)
    span = summaries[-1].created - warnings[0].created
    assert len(summaries) <= span / 1.0 + 2
    # each origin's own line is still there, at DEBUG
    for origin in set(origins) - named_alone:
        assert crawler.logged(f"robots.txt of {origin} is unreachable", logging.DEBUG)
    assert crawler.stat("robotstxt/unreachable") == DEAD_ORIGINS


class ManualTimers:
    """call_later for UnreachableWarnings, fired by the test."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def __call__(self, delay: float, function: Any) -> Any:
        timer = _Timer(delay, function)
        self.calls.append(timer)
        return timer


class _Timer:
    def __init__(self, delay: float, function: Any) -> None:
        self.delay = delay
        self.function = function
        self.cancelled = False
        self.fired = False

    def active(self) -> bool:
        return not (self.cancelled or self.fired)

    def cancel(self) -> None:
        self.cancelled = True

    def fire(self) -> None:
        self.fired = True
        self.function()


def test_summary_lines_come_one_per_interval_and_at_close(caplog: Any) -> None:
    """Origins after the first five wait for the interval's line; a line names at most
    20 and counts the rest; what is pending at close is logged then."""
    timers = ManualTimers()
    log = UnreachableWarnings(0, timers)  # LOGSTATS_INTERVAL = 0: the default period
    caplog.set_level(logging.DEBUG, logger="scrapy_rep")
    for index in range(30):
        log.warn(f"http://o{index}", f"robots.txt of http://o{index} is unreachable (x)")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == FIRST_WARNINGS
    assert [t.delay for t in timers.calls] == [60.0]  # one timer for the 25 others
    timers.calls[0].fire()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings[-1].startswith("25 more origin(s) unreachable: http://o5, ")
    assert "http://o24 and 5 more;" in warnings[-1]
    log.warn("http://late", "robots.txt of http://late is unreachable (x)")
    assert len(timers.calls) == 2
    log.close()
    assert timers.calls[1].cancelled
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings[-1].startswith("1 more origin(s) unreachable: http://late;")
    # after close, no timer would fire: a late origin gets its own line
    log.warn("http://later", "robots.txt of http://later is unreachable (x)")
    assert caplog.records[-1].levelno == logging.WARNING
    assert len(timers.calls) == 2
