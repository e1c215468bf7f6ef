"""A controllable clock for the runtime's timers, and a bounded wait on the reactor.

The runtime takes its wall clock as a callable (``clock=``), the waiting room its
timer function (``call_later=``), and the coordinator and the lease keeper a
``reactor`` for their timers: a test gives them ``Clock.seconds``, ``Clock.callLater``
and the ``Clock`` itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from twisted.internet import task

from tests.support.waits import installed_reactor

#: A wall time of November 2023: records written at 0.0 would look like "never".
T0 = 1_700_000_000.0


def new_clock(start: float = T0) -> task.Clock:
    clock = task.Clock()
    clock.advance(start)
    return clock


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
