"""The waiting room and the origin coordinator, built as ``RobotsTxtMiddleware`` builds
them, around the test's clock (the coordinator's ``reactor``: every timer it arms goes
on it), fake fetcher and a real store (``memory`` by default).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from scrapy import Request
from twisted.internet import task

from scrapy_rep.crawl.coordinator import OriginCoordinator
from scrapy_rep.crawl.durable_waiting import DurableWaiting
from scrapy_rep.crawl.waiting_room import WaitingRoom
from scrapy_rep.policy.config import Config
from scrapy_rep.policy.robots_policy import RobotsPolicy
from scrapy_rep.storage.base import MemoryStorage, RobotsStorage
from tests.support.clock import new_clock
from tests.support.fake_fetcher import FakeFetcher


class RecordingLedger(DurableWaiting):
    """A keeper that keeps what the room tells it: which requests wait, per origin."""

    records = True

    def __init__(self) -> None:
        self.waiting: dict[str, list[Request]] = {}
        self.events: list[tuple[str, str, str]] = []  # (record/forget, origin, url)

    def record(self, origin: str, requests: Sequence[Request]) -> None:
        for request in requests:
            self.waiting.setdefault(origin, []).append(request)
            self.events.append(("record", origin, request.url))

    def forget(self, origin: str, requests: Sequence[Request]) -> None:
        urls = [request.url for request in requests]
        kept = self.waiting.get(origin, [])
        for url in urls:
            self.events.append(("forget", origin, url))
            for index, request in enumerate(kept):
                if request.url == url:
                    del kept[index]
                    break
        if not kept:
            self.waiting.pop(origin, None)

    def adopt(self) -> Sequence[tuple[str, Request]]:
        return ()

    def close(self, handed_back: bool) -> int | None:
        return 0

    def urls(self) -> dict[str, list[str]]:
        return {origin: [r.url for r in requests] for origin, requests in self.waiting.items()}


@dataclass
class Runtime:
    """One origin coordinator and what it was built with."""

    clock: task.Clock
    config: Config
    storage: RobotsStorage
    fetcher: FakeFetcher
    room: WaitingRoom
    coordinator: OriginCoordinator
    released: list[tuple[str, Request]] = field(default_factory=list)
    due: list[tuple[str, str]] = field(default_factory=list)  # timed holds handed back
    stats: Counter[str] = field(default_factory=Counter)

    def now(self) -> float:
        return self.clock.seconds()

    def hold(self, origin: str, *paths: str) -> None:
        """What the middleware does with a request of an undecided origin."""
        for path in paths:
            self.coordinator.hold(origin, Request(origin + path))

    def released_urls(self, origin: str) -> list[str]:
        return [request.url for released, request in self.released if released == origin]

    def close(self) -> None:
        self.coordinator.close()
        self.room.close()
        # A fetch left unanswered would stay an asyncio task pending until the
        # interpreter exits (and be reported then): it ends as a timeout, after the close.
        for call in self.fetcher.pending():
            self.fetcher.time_out(call.origin)


def build_runtime(
    *,
    storage: RobotsStorage | None = None,
    clock: task.Clock | None = None,
    **config: Any,
) -> Runtime:
    """``config``: ``Config`` fields to change (``fetch_concurrency=1``, ...)."""
    clock = clock or new_clock()
    settings = replace(Config(storage="memory"), **config)
    storage = storage if storage is not None else MemoryStorage()
    fetcher = FakeFetcher(clock.seconds)
    released: list[tuple[str, Request]] = []
    due: list[tuple[str, str]] = []
    stats: Counter[str] = Counter()

    def count(key: str) -> None:
        stats[key] += 1

    room = WaitingRoom(
        DurableWaiting(),
        clock.seconds,
        clock.callLater,
        lambda origin, request, since: due.append((origin, request.url)),
        memory_bound=settings.memory_max_held,
    )
    coordinator = OriginCoordinator(
        RobotsPolicy(settings),
        storage,
        fetcher,  # type: ignore[arg-type]  # (the coordinator only calls fetch())
        clock.seconds,
        room,
        lambda origin, request: released.append((origin, request)),
        count,
        reactor=clock,
    )
    return Runtime(clock, settings, storage, fetcher, room, coordinator, released, due, stats)
