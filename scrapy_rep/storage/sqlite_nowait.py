"""The SQLite store's answers without waiting, for the crawl's reactor thread.

A store call made from the reactor thread through ``StoreCalls`` first tries
``without_waiting``: a second connection with no busy timeout, used only when the
instance's lock is free. Whatever would wait or go wrong (another process holds the
write lock, a damaged file, an I/O error, an undecodable value) raises ``WouldBlock``
and changes nothing, and the call is then made again in the store's worker thread,
which waits, repairs and falls back as ``sqlite_store`` describes. A WAL read, or a
commit that does not fsync (``synchronous = NORMAL``), takes tens of microseconds: the
hop to the worker thread and back, and on a busy crawler the wait for the interpreter
lock at each statement, cost many times more (measured: a broad crawl's store calls
took 0.1-0.5 s each, queued behind one another in the worker).

That connection never checkpoints the WAL itself (an fsync could stall the reactor);
``housekeeping`` does, in the worker thread, every ``CHECKPOINT_EVERY`` writes.
Durability is the same as the worker's writes: a committed transaction survives a
kill of the process (it is in the WAL); a power cut may lose the commits since the
last checkpoint, never the file's consistency (and a lost robots.txt copy only costs a
refetch).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from scrapy_rep.storage.base import WouldBlock
from scrapy_rep.storage.sqlite_locked import WRITES

_T = TypeVar("_T")

#: Write transactions made without waiting between two WAL checkpoints (each writes a
#: few pages: about SQLite's own default of 1,000 pages).
CHECKPOINT_EVERY = 250


class NoWaitPath:
    """Mixed into ``SqliteStorage``, which sets these attributes."""

    path: Path
    _lock: threading.RLock
    _conn: sqlite3.Connection | None
    _closed: bool
    _local: threading.local
    _quick: sqlite3.Connection | None
    _quick_writes: int

    def _run(self, what: str, query: Callable[[sqlite3.Connection], Any]) -> Any:
        raise NotImplementedError

    def answering_now(self) -> bool:
        return bool(getattr(self._local, "now", False))

    @contextlib.contextmanager
    def without_waiting(self) -> Iterator[None]:
        """This thread's calls answer now or raise ``WouldBlock`` (see the module
        docstring); a call that raised it changed nothing it would not change again."""
        self._local.now = True
        try:
            yield
        finally:
            self._local.now = False

    if TYPE_CHECKING:  # (sqlite_locked.LockedSpell's, a sibling mixin)

        def _lock_over(self, conn: sqlite3.Connection) -> None: ...

    def _run_now(self, what: str, query: Callable[[sqlite3.Connection], _T]) -> _T:
        if not self._lock.acquire(blocking=False):
            raise WouldBlock
        try:
            conn = self._quick_connection()
            before = conn.total_changes
            try:
                result = query(conn)
            except Exception as exc:  # busy, damaged, I/O: the worker's to handle
                if conn.in_transaction:  # (never left open for the next call)
                    self._close_quick()
                raise WouldBlock from exc
            if conn.total_changes != before:
                self._quick_writes += 1
            if what in WRITES:
                self._lock_over(conn)  # a write got the lock: a locked spell is over
            return result
        finally:
            self._lock.release()

    def _quick_connection(self) -> sqlite3.Connection:
        if self._conn is None or self._closed:
            raise WouldBlock  # the fallback answers: the worker's path
        if self._quick is None:
            try:
                conn = sqlite3.connect(
                    self.path, timeout=0, isolation_level=None, check_same_thread=False
                )
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("PRAGMA wal_autocheckpoint = 0")
            except sqlite3.Error as exc:
                raise WouldBlock from exc
            self._quick = conn
        return self._quick

    def housekeeping_due(self) -> bool:
        """True once every ``CHECKPOINT_EVERY`` writes made without waiting (and
        counted as done: the caller runs ``housekeeping`` in a worker thread)."""
        if self._quick_writes < CHECKPOINT_EVERY:
            return False
        self._quick_writes = 0
        return True

    def housekeeping(self) -> None:
        """Checkpoint the WAL, on a connection of its own and without the instance's
        lock (PASSIVE waits for no reader or writer), so calls answered without
        waiting meanwhile are not sent to the worker by it."""
        if self._closed:
            return
        with contextlib.suppress(sqlite3.Error):
            conn = sqlite3.connect(self.path, timeout=0, isolation_level=None)
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            finally:
                conn.close()

    def _close_quick(self) -> None:
        quick, self._quick = self._quick, None
        if quick is not None:
            with contextlib.suppress(sqlite3.Error):
                quick.close()
