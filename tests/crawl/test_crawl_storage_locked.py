"""Real crawl: another process holds the SQLite store's write lock (``BEGIN EXCLUSIVE``)
for the whole crawl. One store call waits the busy timeout; after it the crawl decides
every new origin in this process without waiting on the store, and writes back what
it decided once the store takes writes again."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, ClassVar

import pytest_twisted
from scrapy import signals

from scrapy_rep.storage.sqlite_store import SqliteStorage
from tests.storage.test_storage_sqlite_locked import ExclusiveHolder
from tests.support.crawl import DISALLOW_PRIVATE, REP, pages_of

ORIGINS = 40


class LockWhenOpened:
    """An extension: once the spider opens (the store is open by then), another
    process takes ``BEGIN EXCLUSIVE`` on the store and keeps it until the test ends."""

    holders: ClassVar[list[ExclusiveHolder]] = []

    def __init__(self, crawler: Any) -> None:
        self.path = Path(crawler.settings["REP_STORAGE"].partition(":")[2])
        crawler.signals.connect(self.opened, signal=signals.spider_opened)

    @classmethod
    def from_crawler(cls, crawler: Any) -> LockWhenOpened:
        return cls(crawler)

    def opened(self, spider: Any) -> None:
        LockWhenOpened.holders.append(ExclusiveHolder(self.path))


@pytest_twisted.ensureDeferred
async def test_a_locked_store_costs_one_busy_timeout_not_one_per_origin(
    mockserver: Any, run_crawl: Any, tmp_path: Path
) -> None:
    hosts = [mockserver.unique_host("locked") for _ in range(ORIGINS)]
    mockserver.configure_many({h: {"robots": {"body": DISALLOW_PRIVATE}} for h in hosts})
    urls = [mockserver.url(h, p) for h in hosts for p in ("/a", "/private")]
    path = tmp_path / "robots.db"
    settings = {
        **REP,
        "REP_STORAGE": f"sqlite:{path}",
        "REP_DURABLE_WAITING": False,
        "EXTENSIONS": {f"{__name__}.LockWhenOpened": 0},
    }
    try:
        # Waiting the 3 s busy timeout per store write would take minutes: bounded.
        crawler = await run_crawl(urls, settings=settings, timeout=60)
        holder = LockWhenOpened.holders[-1]
        assert holder.proc.poll() is None  # the lock was held for the whole crawl
        holder.release()
    finally:
        for lock in LockWhenOpened.holders:
            lock.kill()
        LockWhenOpened.holders.clear()
    for h in hosts:
        assert pages_of(mockserver, h) == ["/a"], h  # every origin decided, rules obeyed
        assert mockserver.paths(h).count("/robots.txt") == 1, h
    assert crawler.stat("robotstxt/forbidden") == ORIGINS
    waited = [
        m
        for m in crawler.messages(logging.DEBUG, "scrapy_rep.storage.sqlite_store")
        # every call that waited the busy timeout logs it (old code: each at DEBUG
        # after the first kind); the close's write-back tries without waiting
        if "database is locked" in m and "writing back" not in m
    ]
    assert len(waited) == 1, waited  # one call waited the busy timeout, not one per origin
    assert "locked by another process" in waited[0]
    assert crawler.messages(logging.ERROR) == []
    # The lock is gone now: another process finds what this crawl decided once it
    # can write (the close wrote it back, or says it could not).
    store = SqliteStorage(path)
    try:
        written = sum(store.get(mockserver.origin(h)) is not None for h in hosts)
    finally:
        store.close()
    not_written = crawler.logged("could not be written to it", logging.INFO)
    assert written == ORIGINS or not_written, written
