"""``FetchQueue`` on its own (the bound, FIFO by origin, starts that do not start) and
under ``OriginCoordinator`` (thousands of fetches that end inside their own start)."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest
import pytest_twisted
from scrapy import Request

from scrapy_rep.crawl.coordinator import SHARED_POLL_INTERVAL
from scrapy_rep.crawl.fetcher import FetchQueue
from tests.support.clock import pending_timers, reactor_turns, settle_reactor
from tests.support.runtime import build_runtime

# A lease holder of another machine: never presumed dead, so its lease holds.
ANOTHER_PROCESS = "elsewhere:4242:1:0123456789ab"


class Starts:
    """Start functions that record their origin and say whether a fetch started."""

    def __init__(self, queue: FetchQueue) -> None:
        self.queue = queue
        self.started: list[str] = []

    def fetch(self, origin: str, *, starts: bool = True) -> Callable[[], bool]:
        def start() -> bool:
            self.started.append(origin)
            return starts

        return start

    def submit(self, *origins: str, starts: bool = True) -> None:
        for origin in origins:
            self.queue.submit(origin, self.fetch(origin, starts=starts))


def test_at_most_limit_fetches_run_and_the_rest_start_as_slots_free() -> None:
    queue = FetchQueue(limit=2)
    starts = Starts(queue)
    starts.submit("a", "b", "c", "d", "e")
    assert starts.started == ["a", "b"]
    assert (queue.running, len(queue), queue.peak) == (2, 3, 2)
    queue.done()
    assert starts.started == ["a", "b", "c"]
    queue.done()
    queue.done()
    assert starts.started == ["a", "b", "c", "d", "e"]
    assert (queue.running, len(queue), queue.peak) == (2, 0, 2)


def test_a_limit_below_one_still_lets_one_fetch_run() -> None:
    queue = FetchQueue(limit=0)
    starts = Starts(queue)
    starts.submit("a", "b")
    assert starts.started == ["a"]


def test_queued_fetches_start_first_in_first_out_each_origin_once() -> None:
    queue = FetchQueue(limit=1)
    starts = Starts(queue)
    starts.submit("running", "x", "y", "x", "z", "y")  # x and y asked twice while queued
    assert len(queue) == 3
    for _ in range(3):
        queue.done()
    assert starts.started == ["running", "x", "y", "z"]


def test_a_start_that_does_not_start_frees_its_slot_at_once() -> None:
    queue = FetchQueue(limit=1)
    starts = Starts(queue)
    starts.submit("running")
    starts.submit("lease-elsewhere-1", "lease-elsewhere-2", starts=False)
    starts.submit("next")
    queue.done()
    # The two that did not start took no slot: "next" started in the same drain.
    assert starts.started == ["running", "lease-elsewhere-1", "lease-elsewhere-2", "next"]
    assert (queue.running, len(queue)) == (1, 0)


def test_a_start_that_raises_frees_its_slot_and_the_queue_goes_on() -> None:
    queue = FetchQueue(limit=1)
    starts = Starts(queue)

    def broken() -> bool:
        raise RuntimeError("bug in a start")

    with pytest.raises(RuntimeError):  # a bug is not swallowed
        queue.submit("broken", broken)
    assert queue.running == 0
    starts.submit("a")
    assert starts.started == ["a"] and queue.running == 1


def test_clear_drops_the_queued_fetches_not_the_running_ones() -> None:
    queue = FetchQueue(limit=1)
    starts = Starts(queue)
    starts.submit("running", "queued")
    queue.clear()
    queue.done()
    assert starts.started == ["running"] and queue.running == 0


# Thousands, and more than Python's recursion limit (each fetch nested in the one
# before would take several frames). Not many more: the test Clock sorts its timers on
# every callLater, and each of these fetches arms one.
MANY = max(3_000, sys.getrecursionlimit())


@pytest_twisted.ensureDeferred
async def test_thousands_of_fetches_ending_inside_their_start_drain_without_recursing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One fetch slot; every other origin's lease is held by another process, so each
    # of their fetches ends inside its own start (the memory store answers at once).
    runtime = build_runtime(fetch_concurrency=1)
    coordinator, storage = runtime.coordinator, runtime.storage
    try:
        first = "https://first.example"
        coordinator.evaluate(first)
        await reactor_turns(lambda: runtime.fetcher.count(first) == 1, "the first fetch")
        origins = [f"https://o{n}.example" for n in range(MANY)]
        for origin in origins:
            assert storage.acquire_lease(origin, ANOTHER_PROCESS, 30.0)
            coordinator.evaluate(origin)
        assert len(coordinator.fetches) == MANY and coordinator.fetching_now() == MANY + 1

        runtime.fetcher.answer(first, 200)  # its slot frees: the queue drains
        await reactor_turns(lambda: coordinator.fetching_now() == 0, "the queue drains")

        assert len(coordinator.fetches) == 0 and coordinator.fetches.running == 0
        # Each lost the lease once and now polls the store for the other's answer.
        polls = [
            t for t in pending_timers(runtime.clock) if t == pytest.approx(SHARED_POLL_INTERVAL)
        ]
        assert len(polls) == MANY
        await settle_reactor()
        assert runtime.fetcher.origins() == [first]
    finally:
        runtime.close()


@pytest_twisted.ensureDeferred
async def test_a_queued_fetch_is_handed_the_request_that_started_it() -> None:
    """The page request whose evaluation starts a fetch reaches ``fetcher.fetch`` (for
    ``robots_parsed``) as an argument, also when the fetch waited in the queue while
    other origins' requests were evaluated; a fetch no request started gets None."""
    runtime = build_runtime(fetch_concurrency=1)
    coordinator, fetcher = runtime.coordinator, runtime.fetcher
    first, queued = "https://first.example", "https://queued.example"
    try:
        first_page = Request(first + "/page")
        queued_page = Request(queued + "/page")
        coordinator.evaluate(first, first_page)
        coordinator.evaluate(queued, queued_page)  # waits for the only slot
        coordinator.evaluate(first, Request(first + "/other"))  # (its fetch runs already)
        await reactor_turns(lambda: fetcher.count(first) == 1, "the first fetch")
        assert len(coordinator.fetches) == 1

        fetcher.answer(first, 200)
        await reactor_turns(lambda: fetcher.count(queued) == 1, "the queued fetch")
        assert [(call.origin, call.trigger) for call in fetcher.calls] == [
            (first, first_page),
            (queued, queued_page),
        ]
        fetcher.answer(queued, 200)
        late = "https://late.example"
        coordinator.evaluate(late)
        await reactor_turns(lambda: fetcher.count(late) == 1, "a fetch without a request")
        assert fetcher.calls[-1].trigger is None
    finally:
        runtime.close()
