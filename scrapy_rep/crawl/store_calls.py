"""Store calls off the reactor thread, unless they can be answered without waiting.

A shared store answers over a socket (Redis) or a file lock (SQLite): a slow answer
on the reactor thread stalls every download of the crawl. The coordinator therefore
calls a store only through ``StoreCalls.call``, which runs the call in one dedicated
worker thread and returns a Deferred. One thread, so calls run in the order they were
made and a backend needs no more thread safety than one extra thread (SQLite's store
has a lock and ``check_same_thread=False``; redis-py's pool is thread-safe).

``MemoryStorage`` is called directly (its Deferred has already fired): it is a dict.
A store with ``without_waiting`` (SQLite, ``storage/sqlite_nowait.py``) is asked on the
reactor thread first, when no call of the same origin (``key``) is queued in the
worker, so each origin's calls still run in the order they were made: it answers at
once or raises ``WouldBlock``, and the call then goes to the worker as any other. A
broad crawl makes a few store calls per new origin; on a busy crawler each hop to the
worker and back took 0.1-0.5 s (calls queue behind one another, and each statement
waits for the interpreter lock), where an answer at once takes tens of microseconds.
Per origin, not globally: one call that had to wait must not send every later call
of every origin to the worker's queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from twisted.internet import defer

from scrapy_rep.storage.base import MemoryStorage, WouldBlock

if TYPE_CHECKING:
    from collections.abc import Callable

    from twisted.python.threadpool import ThreadPool

    from scrapy_rep.storage.base import RobotsStorage

_T = TypeVar("_T")


class StoreCalls:
    def __init__(self, storage: RobotsStorage) -> None:
        self.storage = storage
        self.direct = isinstance(storage, MemoryStorage)
        self._now: Callable[[], Any] | None = getattr(storage, "without_waiting", None)
        self._pool: ThreadPool | None = None
        # key -> calls of that key given to the worker and not yet answered
        self._queued: dict[str | None, int] = {}
        self.answered_now = 0  # (for tests and benchmarks)
        self.answered_in_worker = 0

    def call(
        self, function: Callable[..., _T], *args: Any, key: str | None = None
    ) -> defer.Deferred[_T]:
        """``function(*args)``; ``key``: the origin the call is about (calls of one key
        run in the order they were made)."""
        if self.direct:
            try:
                return defer.succeed(function(*args))
            except Exception:
                return defer.fail()
        if self._now is not None and key not in self._queued:
            try:
                with self._now():
                    result = function(*args)
            except WouldBlock:
                pass  # to the worker, which may wait
            except Exception:
                return defer.fail()
            else:
                self.answered_now += 1
                self._housekeeping()
                return defer.succeed(result)
        self._queued[key] = self._queued.get(key, 0) + 1
        deferred = self._in_worker(function, *args)
        deferred.addBoth(self._answered, key)
        return deferred

    def _in_worker(self, function: Callable[..., _T], *args: Any) -> defer.Deferred[_T]:
        from twisted.internet import reactor
        from twisted.internet.threads import deferToThreadPool

        if self._pool is None:
            from twisted.python.threadpool import ThreadPool

            self._pool = ThreadPool(1, 1, name="scrapy-rep-store")
            self._pool.start()
            installed: Any = reactor
            installed.addSystemEventTrigger("during", "shutdown", self.close)
        return deferToThreadPool(reactor, self._pool, function, *args)

    def _answered(self, result: _T, key: str | None) -> _T:
        self.answered_in_worker += 1
        left = self._queued[key] - 1
        if left:
            self._queued[key] = left
        else:
            del self._queued[key]
        return result

    def _housekeeping(self) -> None:
        # In the worker, ordered with no origin's calls (it waits for nothing: PASSIVE).
        due = getattr(self.storage, "housekeeping_due", None)
        if due is not None and due():
            housekeeping = self.storage.housekeeping  # type: ignore[attr-defined]
            self._in_worker(housekeeping).addErrback(lambda _: None)

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.stop()
