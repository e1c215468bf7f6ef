"""``FetchQueue`` drains without recursing when queued fetches end inside their own
start (a shared store: another process holds the lease, or has just stored the
answer, and the store answers without waiting)."""

from __future__ import annotations

import sys

import pytest

from scrapy_rep.crawl.fetcher import FetchQueue

# Far more than Python's recursion limit: each fetch used to start the next one a few
# frames deeper.
MANY = max(5_000, sys.getrecursionlimit() * 3)


def test_fetches_that_end_inside_their_start_drain_in_a_loop() -> None:
    queue = FetchQueue(limit=2)
    started: list[str] = []
    depths: list[int] = []

    def running_fetch() -> bool:
        return True  # ends later (never, here): holds one slot

    def ends_at_once(origin: str) -> bool:
        started.append(origin)
        depths.append(len(_stack()))
        queue.done()  # the lease was not ours: the fetch ends before start() returns
        return True

    queue.submit("https://slow.test", running_fetch)
    queue.submit("https://slow2.test", running_fetch)  # both slots taken
    origins = [f"https://o{i}.test" for i in range(MANY)]
    for origin in origins:
        queue.submit(origin, lambda origin=origin: ends_at_once(origin))
    assert len(queue) == MANY and started == []

    queue.done()  # one slow fetch ends: the queue drains through every origin
    assert started == origins  # FIFO, each once
    assert len(queue) == 0
    assert queue.running == 1  # the other slow fetch
    assert queue.peak == 2
    assert max(depths) - min(depths) == 0  # each started at the same depth


def test_a_start_that_submits_more_is_drained_by_the_same_loop() -> None:
    """An origin decided inside a start wakes its requests, which may queue the
    fetch of another origin: that one runs in the same loop, not one level deeper."""
    queue = FetchQueue(limit=1)
    started: list[int] = []

    def chain(i: int) -> bool:
        started.append(i)
        if i + 1 < MANY:
            queue.submit(f"https://o{i + 1}.test", lambda: chain(i + 1))
        queue.done()
        return True

    queue.submit("https://o0.test", lambda: chain(0))
    assert started == list(range(MANY))
    assert queue.running == 0 and len(queue) == 0


def test_a_start_that_does_not_start_frees_its_slot() -> None:
    queue = FetchQueue(limit=1)
    calls: list[int] = []

    def declined(i: int) -> bool:
        calls.append(i)
        return False

    queue.submit("https://busy.test", lambda: True)
    for i in range(MANY):
        queue.submit(f"https://o{i}.test", lambda i=i: declined(i))
    queue.done()
    assert calls == list(range(MANY))
    assert queue.running == 0


def test_a_start_that_raises_leaves_the_queue_usable() -> None:
    queue = FetchQueue(limit=1)

    def broken() -> bool:
        raise ValueError("bug")

    with pytest.raises(ValueError, match="bug"):
        queue.submit("https://broken.test", broken)
    assert queue.running == 0
    ran: list[str] = []
    queue.submit("https://next.test", lambda: ran.append("next") is None)
    assert ran == ["next"] and queue.running == 1


def _stack() -> list[object]:
    frames = []
    frame = sys._getframe()
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back  # type: ignore[assignment]
    return frames
