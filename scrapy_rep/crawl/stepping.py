"""Engine work run on the reactor's own thread in bounded steps (docs/rfc.md, "cost").

The reactor must never wait more than 25 ms on robots.txt work, and pure Python
parses the worst 500 KiB files and compiles the worst groups of tens of thousands of
rules in 30-90 ms.  A worker thread did not fix that on a 2-core machine: the worker
is one more runnable thread, and the reactor waited 12-64 ms for a core and the GIL
(docs/benchmarks.md).  So the engine cuts that work into steps of a few ms each
(RobotsTxt.parse_steps, RobotsTxt.prepare_steps), and run_steps runs them on the
reactor thread, a slice of steps at a time: it keeps stepping until STEP_BUDGET has
passed, then lets the reactor run everything that is ready (other origins' requests
are decided and downloaded, responses read) before it goes on.  The reactor then
waits at most STEP_BUDGET plus one step.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import TypeVar

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.task import deferLater

from scrapy_rep.crawl.store_calls import installed_reactor

__all__ = ["STEP_BUDGET", "run_steps"]

T = TypeVar("T")

# seconds of steps between two turns of the reactor: one step or a few (each a few ms
# of CPU at most). On a loaded 2-core machine every ms of CPU between turns is
# stretched by the OS's scheduling, so the budget is small: in a crawl of a hostile
# file the largest reactor gap was 15-36 ms with 1 ms, 45-64 ms with 3 ms (load 10,
# benchmarks/bench_adversarial.py); a turn costs well under 0.1 ms
STEP_BUDGET = 0.001


async def run_steps(steps: Generator[None, None, T], budget: float = STEP_BUDGET) -> T:
    """Run *steps* to its end on the reactor thread, giving the reactor a turn after
    every *budget* seconds of them; what *steps* returns."""
    clock = time.perf_counter
    while True:
        deadline = clock() + budget
        try:
            next(steps)  # at least one step a turn, whatever the budget
            while clock() < deadline:
                next(steps)
        except StopIteration as done:
            value: T = done.value
            return value
        # a turn of the reactor: timers due and I/O ready run before the next slice
        await maybe_deferred_to_future(deferLater(installed_reactor(), 0, _nothing))


def _nothing() -> None:
    return None
