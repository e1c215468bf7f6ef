"""The SQLite store while another process holds its write lock for longer than the busy
timeout: stop waiting on it, decide locally, and write back once it answers.

Every write (a lease, a record) needs SQLite's one write lock. Another process that
keeps it (a ``BEGIN EXCLUSIVE`` left open, a long maintenance job, a stopped process)
would make each write wait the whole busy timeout, one after another in the store's
single worker thread: a crawl of new origins then waits seconds per origin although
each call ends up answered by the in-process fallback anyway. So the first call that
waits the busy timeout starts a *locked spell*: until the lock is seen free again,
every call tries without waiting (SQLite's reads do not need the write lock in WAL
mode, so other processes' records are still read) and a write that would wait is
answered by the in-process fallback at once. The first write that gets the lock ends
the spell, and what was decided meanwhile is written back in one transaction, unless
the file holds a record from a later fetch by then. A lock therefore costs one busy
timeout per spell, not one per call.

While a spell lasts, leases are process-local (two processes may both fetch one
robots.txt: RFC 9309 section 2.4 allows fetching it again, losing a request is not
allowed), and an origin decided here is answered from this process's copy.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy_rep.policy.records import OriginRecord
from scrapy_rep.storage.base import MemoryStorage, WouldBlock, fetched_later
from scrapy_rep.storage.codec import pack_record, unpack_record
from scrapy_rep.storage.sqlite_file import read_record, write_record

logger = logging.getLogger("scrapy_rep.storage.sqlite_store")

#: What a call answers when the in-process fallback must answer instead.
FAILED = object()
#: Seconds between two tries to write back after one failed.
WRITE_BACK_RETRY = 5.0
#: The calls that take the write lock: one that succeeds proves the lock is free.
WRITES = frozenset({"write", "lease", "lease release"})


def is_busy(exc: BaseException) -> bool:
    """SQLite gave up waiting for a lock another connection holds."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class LockedSpell:
    """Mixed into ``SqliteStorage``, which sets these attributes and methods."""

    path: Path
    _lock: threading.RLock
    _fallback: MemoryStorage
    _busy_timeout: float
    _record_limit: int
    #: True from a call that waited the busy timeout until a write gets the lock.
    _locked_out: bool
    _locked_since: float
    _spells: int
    #: Origins whose newest record only the fallback holds (written back later).
    _unsynced: set[str]
    _next_write_back: float
    #: Calls that waited the whole busy timeout (for tests and benchmarks).
    lock_waits: int

    if TYPE_CHECKING:  # (sqlite_nowait.NoWaitPath's and SqliteStorage's)

        def _quick_connection(self) -> sqlite3.Connection: ...

        def _close_quick(self) -> None: ...

        def _log_once(self, operation: str, exc: BaseException) -> None: ...

    def _lock_found(self, what: str, exc: BaseException) -> None:
        """A call waited the busy timeout: start a locked spell (the caller holds
        ``_lock``)."""
        self.lock_waits += 1
        if self._locked_out:
            return
        self._locked_out = True
        self._locked_since = time.monotonic()
        self._spells += 1
        logger.log(
            logging.WARNING if self._spells == 1 else logging.DEBUG,
            "scrapy-rep: robots.txt store %s is locked by another process (a %s waited "
            "the %g s busy timeout: %s); until it can be written again, robots.txt is "
            "decided in this process without waiting on it (an origin may be fetched "
            "once per process), and what is decided meanwhile is written back then",
            self.path,
            what,
            self._busy_timeout,
            exc,
        )

    def _run_locked_out(self, what: str, query: Callable[[sqlite3.Connection], object]) -> object:
        """``query`` without waiting, during a locked spell (the caller holds ``_lock``);
        ``FAILED`` when it would have to wait or fails."""
        try:
            conn = self._quick_connection()
        except WouldBlock:
            return FAILED
        try:
            result = query(conn)
        except (sqlite3.Error, ValueError, OverflowError) as exc:
            if conn.in_transaction:  # (never left open for the next call)
                self._close_quick()
            if not is_busy(exc):
                self._log_once(what, exc)
            return FAILED
        if what in WRITES:
            self._lock_over(conn)
        return result

    def _lock_over(self, conn: sqlite3.Connection) -> None:
        """A write got the lock: the spell is over; write back what it decided."""
        if not self._locked_out:
            return
        self._locked_out = False
        written = self._write_back(conn)
        logger.log(
            logging.INFO if self._spells == 1 else logging.DEBUG,
            "scrapy-rep: robots.txt store %s can be written again after %.0f s; %s",
            self.path,
            time.monotonic() - self._locked_since,
            "writing back failed, tried again later"
            if written is None
            else f"wrote back {written} origin(s) decided meanwhile",
        )

    def _keep_unsynced(self, origin: str, record: OriginRecord) -> None:
        """The store could not take ``record``: the fallback answers for it until it is
        written back."""
        self._fallback.put(origin, record)
        self._unsynced.add(origin)

    def _unsynced_copy(self, origin: str) -> OriginRecord | None:
        if origin not in self._unsynced:
            return None
        return self._fallback.get(origin)

    def _write_back_due(self) -> bool:
        """After a failed write-back, not before ``WRITE_BACK_RETRY`` seconds."""
        return bool(self._unsynced) and time.monotonic() >= self._next_write_back

    def _write_back(self, conn: sqlite3.Connection) -> int | None:
        """Write the fallback's unsynced records, each unless the file has a record of
        a later fetch, in one transaction without waiting; how many were written, None
        when it failed (they stay unsynced)."""
        pending = list(self._unsynced)
        if not pending:
            return 0
        mine = {o: r for o in pending if (r := self._fallback.get(o)) is not None}
        written = 0
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for origin, record in mine.items():
                    theirs = unpack_record(read_record(conn, origin), self._record_limit)
                    if theirs is None or fetched_later(record, theirs):
                        write_record(conn, origin, pack_record(record))
                        written += 1
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
        except (sqlite3.Error, ValueError, OverflowError) as exc:
            logger.debug("scrapy-rep: writing back to %s failed: %s", self.path, exc)
            self._next_write_back = time.monotonic() + WRITE_BACK_RETRY
            return None
        self._unsynced.difference_update(pending)
        for origin in mine:
            self._fallback.discard(origin)  # the file has it (or a later one) now
        return written

    def _write_back_at_close(self) -> None:
        """Last chance, without waiting (the caller holds ``_lock``); say what is lost."""
        if not self._unsynced:
            return
        try:
            conn = self._quick_connection()
        except WouldBlock:
            written = None
        else:
            written = self._write_back(conn)
        if written is None:
            logger.info(
                "scrapy-rep: robots.txt store %s: %d origin(s) decided while it was "
                "locked could not be written to it (their robots.txt is fetched again "
                "by the next crawl)",
                self.path,
                len(self._unsynced),
            )
