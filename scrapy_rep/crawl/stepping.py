"""Engine work run on the reactor's own thread in bounded steps (docs/rfc.md, "cost").

The reactor must never wait more than 25 ms on robots.txt work, and a worker thread left it
waiting 12-64 ms for a core and the GIL (docs/benchmarks.md): here it waits at most
STEP_BUDGET plus one step.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import TypeVar

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.task import deferLater

from scrapy_rep.crawl.store_calls import installed_reactor

T = TypeVar("T")

# Seconds of steps between two turns of the reactor. Small, as a loaded machine
# stretches every ms between turns: the largest reactor gap of a hostile file's crawl
# was 15-36 ms with 1 ms, 45-64 ms with 3 ms (bench_adversarial.py); a turn costs < 0.1 ms
STEP_BUDGET = 0.001


async def run_steps(steps: Generator[None, None, T]) -> T:
    """Run *steps* to its end on the reactor thread, giving the reactor a turn after
    every STEP_BUDGET seconds of them; what *steps* returns."""
    clock = time.perf_counter
    while True:
        deadline = clock() + STEP_BUDGET
        try:
            next(steps)  # at least one step a turn, whatever the budget
            while clock() < deadline:
                next(steps)
        except StopIteration as done:
            value: T = done.value
            return value
        # a turn of the reactor: timers due and I/O ready run before the next slice
        await maybe_deferred_to_future(deferLater(installed_reactor(), 0, lambda: None))
