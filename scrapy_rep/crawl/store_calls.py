"""Store calls off the reactor thread.

A shared store answers over a socket (Redis) or a file lock (SQLite): a slow answer
on the reactor thread stalls every download of the crawl. The coordinator therefore
calls a store only through ``StoreCalls.call``, which runs the call in one dedicated
worker thread and returns a Deferred. One thread, so calls run in the order they were
made and a backend needs no more thread safety than one extra thread (SQLite's store
has a lock and ``check_same_thread=False``; redis-py's pool is thread-safe).

``MemoryStorage`` is called directly (its Deferred has already fired): it is a dict.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from twisted.internet import defer

from scrapy_rep.storage.base import MemoryStorage

if TYPE_CHECKING:
    from collections.abc import Callable

    from twisted.python.threadpool import ThreadPool

    from scrapy_rep.storage.base import RobotsStorage

_T = TypeVar("_T")


class StoreCalls:
    def __init__(self, storage: RobotsStorage) -> None:
        self.storage = storage
        self.direct = isinstance(storage, MemoryStorage)
        self._pool: ThreadPool | None = None

    def call(self, function: Callable[..., _T], *args: Any) -> defer.Deferred[_T]:
        if self.direct:
            try:
                return defer.succeed(function(*args))
            except Exception:
                return defer.fail()
        from twisted.internet import reactor
        from twisted.internet.threads import deferToThreadPool

        if self._pool is None:
            from twisted.python.threadpool import ThreadPool

            self._pool = ThreadPool(1, 1, name="scrapy-rep-store")
            self._pool.start()
            installed: Any = reactor
            installed.addSystemEventTrigger("during", "shutdown", self.close)
        return deferToThreadPool(reactor, self._pool, function, *args)

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.stop()
