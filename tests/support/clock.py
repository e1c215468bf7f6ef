"""A controllable clock for the runtime's timers, and a bounded wait on the reactor.

The runtime takes its wall clock as a callable (``clock=``), and the waiting room its
timer function (``call_later=``): both are given ``Clock.seconds`` / ``Clock.callLater``.
Three classes still look the global reactor up for their timers through a module
function named ``_reactor`` (the coordinator's per-origin timers and its summary
line, a fetch's steps, the lease renewals). ``timers_on`` points exactly those at the
``Clock``; it is the single place to change once those classes take a ``reactor``
collaborator in their constructors (then pass ``clock`` there and delete this).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable

import pytest
from twisted.internet import task

from tests.support.waits import installed_reactor

#: A wall time of November 2023: records written at 0.0 would look like "never".
T0 = 1_700_000_000.0

#: Package modules whose classes reach the global reactor for timers (see above).
GLOBAL_REACTOR_LOOKUPS = (
    "scrapy_rep.crawl.coordinator",
    "scrapy_rep.crawl.fetch_steps",
    "scrapy_rep.crawl.leases",
)


def new_clock(start: float = T0) -> task.Clock:
    clock = task.Clock()
    clock.advance(start)
    return clock


def timers_on(clock: task.Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every timer the runtime arms goes on ``clock`` for this test."""
    for name in GLOBAL_REACTOR_LOOKUPS:
        module = importlib.import_module(name)
        if not hasattr(module, "_reactor"):
            raise AssertionError(
                f"{name} no longer looks the reactor up through _reactor(): pass the "
                "test clock to its constructor instead (tests/support/clock.py)"
            )
        monkeypatch.setattr(module, "_reactor", lambda: clock)


def pending_timers(clock: task.Clock) -> list[float]:
    """Seconds from now of each timer armed on ``clock``, soonest first."""
    now = clock.seconds()
    return sorted(call.getTime() - now for call in clock.getDelayedCalls() if call.active())


async def reactor_turns(predicate: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Let the real reactor run until ``predicate()`` holds. A guard against a hang,
    not a timing check: ``timeout`` is generous for a loaded machine. Only the real
    reactor's own work runs here (asyncio tasks, a store worker's answers); the
    runtime's timers stay on the test's ``Clock`` until the test advances it."""
    deadline = time.monotonic() + timeout
    turns = 0
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        # A few immediate turns first (an asyncio task needs one or two), then a short
        # pause per turn, so that a wait on another thread does not spin a core.
        delay = 0.0 if turns < 20 else 0.01
        turns += 1
        await task.deferLater(installed_reactor(), delay, lambda: None)


async def settle_reactor(turns: int = 5) -> None:
    """A few turns of the real reactor, to show that nothing more happens."""
    for _ in range(turns):
        await task.deferLater(installed_reactor(), 0, lambda: None)
