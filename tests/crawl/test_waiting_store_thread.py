"""Real crawl: a store other than the in-process memory store is called only from
scrapy-rep's worker thread, never from the reactor thread; while an origin's first
read is in flight its requests wait like any undecided origin."""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar

import pytest_twisted

from scrapy_rep.policy.records import OriginRecord
from scrapy_rep.storage.base import MemoryStorage
from tests.crawl_helpers import DISALLOW_PRIVATE, REP, pages_of


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
