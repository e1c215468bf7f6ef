"""Real crawl: a store other than the in-process memory store is called only from
scrapy-rep's worker thread, never from the reactor thread; while an origin's first
read is in flight its requests wait like any undecided origin."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest_twisted
from scrapy import signals

from scrapy_rep.policy.records import OriginRecord
from scrapy_rep.storage.base import MemoryStorage
from tests.storage.test_storage_sqlite_nowait import WriteLockHolder
from tests.support.crawl import DISALLOW_PRIVATE, REP, pages_of


class SlowThreadRecordingStore:
    """A user store (REP_STORAGE = its import path): a memory store whose reads take
    0.2 s, recording the thread of every call."""

    shared = False
    threads: ClassVar[list[tuple[str, int]]] = []

    def __init__(self) -> None:
        self._inner = MemoryStorage()

    def _note(self, name: str) -> None:
        SlowThreadRecordingStore.threads.append((name, threading.get_ident()))

    def get(self, origin: str) -> OriginRecord | None:
        self._note("get")
        time.sleep(0.2)
        return self._inner.get(origin)

    def put(self, origin: str, record: OriginRecord) -> None:
        self._note("put")
        self._inner.put(origin, record)

    def acquire_lease(self, origin: str, holder: str, ttl: float) -> bool:
        self._note("acquire_lease")
        return self._inner.acquire_lease(origin, holder, ttl)

    def release_lease(self, origin: str, holder: str) -> None:
        self._note("release_lease")
        self._inner.release_lease(origin, holder)

    def close(self) -> None:
        pass

    def describe(self) -> str:
        return "slow test store"


@pytest_twisted.ensureDeferred
async def test_a_user_store_is_called_off_the_reactor_thread(
    mockserver: Any, run_crawl: Any
) -> None:
    hosts = [mockserver.unique_host("thread") for _ in range(3)]
    mockserver.configure_many({h: {"robots": {"body": DISALLOW_PRIVATE}} for h in hosts})
    urls = [mockserver.url(h, p) for h in hosts for p in ("/a", "/private")]
    SlowThreadRecordingStore.threads.clear()
    settings = {**REP, "REP_STORAGE": f"{__name__}.SlowThreadRecordingStore"}
    crawler = await run_crawl(urls, settings=settings)
    for h in hosts:
        assert pages_of(mockserver, h) == ["/a"], h
    calls = SlowThreadRecordingStore.threads
    assert {name for name, _ in calls} >= {"get", "put", "acquire_lease", "release_lease"}
    reactor_thread = threading.get_ident()  # the test runs on the reactor thread
    on_reactor = [name for name, ident in calls if ident == reactor_thread]
    assert on_reactor == [], on_reactor
    assert crawler.stat("robotstxt/forbidden") == len(hosts)
    assert crawler.stat("robotstxt/delayed") == len(urls)  # each waited for the read


@pytest_twisted.ensureDeferred
async def test_a_fetch_lease_left_at_close_is_released_off_the_reactor_thread(
    mockserver: Any, run_crawl: Any
) -> None:
    """The spider closes (CLOSESPIDER_TIMEOUT) while robots.txt is still downloading:
    the fetch's lease is released at close, in the store's worker thread."""
    host = mockserver.unique_host("closing")
    mockserver.configure(host, {"robots": {"body": DISALLOW_PRIVATE, "delay": 4}})
    SlowThreadRecordingStore.threads.clear()
    settings = {
        **REP,
        "REP_STORAGE": f"{__name__}.SlowThreadRecordingStore",
        "CLOSESPIDER_TIMEOUT": 1,
        "REP_IDLE_WAIT": 60,
    }
    crawler = await run_crawl([mockserver.url(host, "/a")], settings=settings)
    assert crawler.stat("robotstxt/delayed") == 1
    calls = SlowThreadRecordingStore.threads
    releases = [ident for name, ident in calls if name == "release_lease"]
    assert releases, calls  # the lease taken for the fetch was released
    reactor_thread = threading.get_ident()
    assert reactor_thread not in releases
    assert [name for name, ident in calls if ident == reactor_thread] == []


class LockAtOpen:
    """An extension: when the spider opens (the store is open by then), another
    process takes the store's write lock and keeps it for 1.5 s."""

    def __init__(self, crawler: Any) -> None:
        self.spec = crawler.settings["REP_STORAGE"]
        crawler.signals.connect(self.opened, signal=signals.spider_opened)

    @classmethod
    def from_crawler(cls, crawler: Any) -> LockAtOpen:
        return cls(crawler)

    def opened(self, spider: Any) -> None:
        WriteLockHolder(Path(self.spec.partition(":")[2]), hold=1.5)


@pytest_twisted.ensureDeferred
async def test_sqlite_answers_on_the_reactor_thread_unless_it_would_wait(
    mockserver: Any, run_crawl: Any, tmp_path: Path
) -> None:
    """The default store answers on the reactor thread when it can do so without
    waiting; while another process holds its write lock, the writes go to the
    worker thread and wait there: the crawl is the same, each robots.txt fetched once."""
    hosts = [mockserver.unique_host("nowait") for _ in range(4)]
    mockserver.configure_many({h: {"robots": {"body": DISALLOW_PRIVATE}} for h in hosts})
    urls = [mockserver.url(h, p) for h in hosts for p in ("/a", "/private")]
    settings = {
        **REP,
        "REP_STORAGE": f"sqlite:{tmp_path / 'robots.db'}",
        "REP_DURABLE_WAITING": False,
        "EXTENSIONS": {f"{__name__}.LockAtOpen": 0},
    }
    crawler = await run_crawl(urls, settings=settings)
    for h in hosts:
        assert pages_of(mockserver, h) == ["/a"], h
        assert mockserver.paths(h).count("/robots.txt") == 1, h
    assert crawler.stat("robotstxt/forbidden") == len(hosts)
    middleware = next(
        m for m in crawler.engine.downloader.middleware.middlewares if hasattr(m, "coordinator")
    )
    calls = middleware.coordinator.calls
    assert calls.answered_now > 0  # the first reads (a WAL read waits on no writer)
    assert calls.answered_in_worker > 0  # the leases, taken while the lock was held
