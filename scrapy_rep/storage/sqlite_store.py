"""SQLite store: the embedded default, shared by every Scrapy process on one machine.

Where the file goes, damage and repair, locked spells, answers without waiting and trust:
docs/storage.md. WAL lets readers past the writer, ``synchronous=NORMAL`` may lose the last
commits in a power cut but never the file, and lease rows are taken inside ``BEGIN
IMMEDIATE`` (on the wall clock, compared across processes).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from scrapy_rep.policy.config import SettingError
from scrapy_rep.policy.records import OriginRecord
from scrapy_rep.storage import sqlite_file
from scrapy_rep.storage.base import (
    MAX_DECODED,
    LocalFallback,
    RobotsStorage,
    WouldBlock,
    newer_records,
    pack_record,
    unpack_record,
    warn_unreadable,
)
from scrapy_rep.storage.cluster import ClusterError, Parked, SpiderCluster
from scrapy_rep.storage.sqlite_file import (
    DEFAULT_FILENAME,
    RELEASE_LEASE,
    BadDatabase,
    close_quietly,
    is_damage,
    read_lease,
    read_record,
    read_records_read_only,
    store_and_release,
    take_lease,
    write_record,
    write_transaction,
)

__all__ = ["DEFAULT_FILENAME", "SqliteStorage", "read_records_read_only"]

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

# What the sqlite3 driver really raises on a damaged file: sqlite3.Error, UnicodeDecodeError
# (a flipped byte in text), ValueError/OverflowError (values that do not convert).
_DRIVER_ERRORS = (sqlite3.Error, ValueError, OverflowError)
#: What a call answers when the in-process fallback must answer instead.
FAILED = object()
#: Seconds between two tries to write back after one failed.
WRITE_BACK_RETRY = 5.0
#: The calls that take the write lock: one that succeeds proves the lock is free.
WRITES = frozenset({"write", "lease", "lease release"})


def is_busy(exc: BaseException) -> bool:
    """SQLite gave up waiting for a lock another connection holds."""
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


#: Write transactions made without waiting between two WAL checkpoints (each writes a
#: few pages: about SQLite's own default of 1,000 pages).
CHECKPOINT_EVERY = 250
#: Cluster calls run off the reactor thread: they may wait longer for another
#: process's write than the store's own calls.
CLUSTER_BUSY_TIMEOUT = 10.0

_CLUSTER_SCHEMA = """
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
CREATE TABLE IF NOT EXISTS owners (
    spider TEXT NOT NULL, owner TEXT NOT NULL, alive_until REAL NOT NULL,
    PRIMARY KEY (spider, owner));
CREATE TABLE IF NOT EXISTS parked (
    spider TEXT NOT NULL, owner TEXT NOT NULL, key TEXT NOT NULL, origin TEXT NOT NULL,
    blob BLOB NOT NULL, PRIMARY KEY (spider, owner, key));
CREATE INDEX IF NOT EXISTS parked_by_key ON parked (spider, key);
CREATE TABLE IF NOT EXISTS turns (
    spider TEXT NOT NULL, origin TEXT NOT NULL, next_at REAL NOT NULL,
    PRIMARY KEY (spider, origin));
"""


class SqliteStorage(RobotsStorage):
    """One SQLite file; one connection per instance behind a lock (one more answers now)."""

    shared = True
    answers_without_waiting = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 3.0,
        fallback_max_origins: int = 10_000,
        record_limit: int = MAX_DECODED,
    ) -> None:
        self.path = Path(path)
        # Long enough to ride out another process's short write; short enough that a
        # stuck writer stalls a worker for seconds, not minutes.
        self._busy_timeout = busy_timeout
        self._record_limit = record_limit
        self._lock = threading.RLock()
        self._closed = False
        self._repaired = False
        self._checked = False
        self._file_id: tuple[int, int] | None = None
        # Answers for what SQLite could not store or read (disk full, I/O errors).
        self._fallback = LocalFallback(fallback_max_origins)
        # without_waiting: per thread; its own connection, opened when first needed
        self._local = threading.local()
        self._quick: sqlite3.Connection | None = None
        self._quick_writes = 0
        # Since when another process holds the write lock (a locked spell), or None
        self._locked_since: float | None = None
        self._spells = 0
        self.lock_waits = 0
        # The cluster file's connection (opened by cluster()) and its own lock.
        self._cluster_lock = threading.Lock()
        self._cluster_conn: sqlite3.Connection | None = None
        self._conn: sqlite3.Connection | None = self._open()

    # -- construction, errors and repair -------------------------------------------------

    path_of = staticmethod(sqlite_file.path_of)

    def _open(self) -> sqlite3.Connection | None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SettingError(f"REP_STORAGE: cannot create {self.path.parent}: {exc}") from None
        sqlite_file.check_trusted(self.path)
        lock = sqlite_file.lock_path(self.path)
        marked = lock.exists()  # before open_lock creates it
        # Only a path scrapy-rep has used (the default name, or the lock file every open
        # leaves) is moved aside when it is no store: renaming another could hide someone's.
        ours = marked or self.path.name == DEFAULT_FILENAME
        with sqlite_file.open_lock(self.path):
            try:
                return self._connect()
            except BadDatabase as exc:
                foreign = exc.foreign if exc.certain or not ours else ""
                if not foreign:
                    return self._connect_or_log("open") if self._set_aside(exc) else None
            except sqlite3.Error as exc:
                # Not the file's fault (permissions, read-only, a directory in the
                # way): nothing to repair, and the crawl must still run.
                self._log_once("open", exc)
                return None
        if not marked:
            # The marker this refused open made would make the next run take the
            # file for a store of ours and move it aside.
            with contextlib.suppress(OSError):
                lock.unlink()
        raise SettingError(
            f"REP_STORAGE: {self.path} is {foreign}, not a scrapy-rep robots.txt store, and "
            "scrapy-rep has never used this path: refusing to move it aside. Point "
            "REP_STORAGE at another file (or delete this one if it is a damaged store)."
        )

    def _set_aside(self, reason: BaseException) -> bool:
        """Move the damaged file away (the caller holds the open lock)."""
        try:
            aside = sqlite_file.move_aside(self.path)
        except OSError as move_error:
            self._log_once(f"moving the unusable store aside ({reason})", move_error)
            return False
        self._repaired = True
        logger.warning(
            "robots.txt store %s is unusable (%s); moved it to %s and started a fresh store",
            self.path,
            reason,
            aside,
        )
        return True

    def _connect(self) -> sqlite3.Connection:
        if not sqlite_file.is_sqlite_file(self.path):
            raise BadDatabase("not a SQLite database", foreign="not a SQLite database")
        # Switching a new file to WAL needs a moment of exclusive access; another process
        # starting at the same time can make that fail with "locked" past busy_timeout.
        for attempt in range(3):
            try:
                conn = sqlite_file.connect(self.path, self._busy_timeout, sqlite_file.prepare)
                break
            except sqlite3.OperationalError as exc:
                if attempt == 2 or not is_busy(exc):
                    raise
        self._file_id = sqlite_file.file_id(self.path)
        return conn

    def _connect_or_log(self, what: str) -> sqlite3.Connection | None:
        try:
            return self._connect()
        except (BadDatabase, sqlite3.Error) as exc:
            self._log_once(what, exc)
            return None

    def _run(self, what: str, query: Callable[[sqlite3.Connection], _T]) -> _T | object:
        """Run ``query``; ``FAILED`` when the fallback must answer. Damage found by a query
        moves the file aside and retries on a fresh store (once per instance: a file that
        keeps failing is not moved again). Answering now, it answers or raises WouldBlock."""
        if self.answering_now():
            if not self._lock.acquire(blocking=False):
                raise WouldBlock
            try:
                return self._run_quick(what, query)
            except Exception as exc:  # busy, damaged, I/O: the worker's to handle
                raise WouldBlock from exc
            finally:
                self._lock.release()
        with self._lock:
            if self._locked_since is not None:
                try:
                    return self._run_quick(what, query)
                except WouldBlock:
                    return FAILED
                except _DRIVER_ERRORS as exc:
                    if not is_busy(exc):
                        self._log_once(what, exc)
                    return FAILED
            while True:
                conn = self._conn
                if conn is None or self._closed:
                    return FAILED
                try:
                    result = query(conn)
                except _DRIVER_ERRORS as exc:
                    if is_busy(exc):
                        self._lock_found(what, exc)
                        return FAILED
                    if is_damage(exc) and self._repair(exc):
                        continue  # the query again, on the fresh store
                    self._log_once(what, exc)
                    return FAILED
                if what in WRITES and self._fallback.write_back_due():
                    self._write_back(conn)  # what failed writes (disk full, I/O) left behind
                return result

    def _repair(self, reason: BaseException) -> bool:
        """Replace a store found damaged while in use; True when a fresh one is open."""
        if self._repaired or self._closed:
            return False
        self._repaired = True
        self._close_quick()
        conn, self._conn = self._conn, None
        close_quietly(conn)
        with sqlite_file.open_lock(self.path):
            # Another process may have repaired it already: then its fresh file is
            # there, and moving that aside would throw its work away.
            if sqlite_file.file_id(self.path) == self._file_id:
                self._set_aside(reason)
            self._conn = self._connect_or_log("reopen")
        return self._conn is not None

    def _log_once(self, operation: str, exc: BaseException) -> None:
        if not self._fallback.first_error(f"{operation}:{type(exc).__name__}:{exc}"):
            logger.debug("sqlite %s failed on %s: %s", operation, self.path, exc)
            return
        logger.warning(
            "robots.txt store %s: %s failed (%s: %s); using process-local "
            "state for it (further errors of this kind are logged at DEBUG)",
            self.path,
            operation,
            type(exc).__name__,
            exc,
        )

    # -- RobotsStorage ----------------------------------------------------------------

    def get(self, origin: str) -> OriginRecord | None:
        local = self._fallback.unsynced_copy(origin)
        if local is not None:
            return local  # decided here while the file could not take it: the newest
        raw = self._run("read", lambda conn: read_record(conn, origin))
        return self._decoded(origin, None if raw is FAILED else raw)

    def _decoded(self, origin: str, raw: object) -> OriginRecord | None:
        record = unpack_record(raw, self._record_limit)
        if record is None and raw is not None and self.answering_now():
            raise WouldBlock  # checking the file is the worker's
        if record is None and raw is not None and not self._check_once():
            # one bad value in a sound file: a miss (damage was repaired, with a WARNING)
            warn_unreadable(f"sqlite {self.path}")
        return record if record is not None else self._fallback.get(origin)

    def _check_once(self) -> bool:
        """A value that does not decode may be a damaged page: check the file once, and repair
        it when it is (else it stays damaged for every run). True when it was replaced."""
        if self._checked:
            return False
        self._checked = True
        repaired_before = self._repaired

        def check(conn: sqlite3.Connection) -> None:
            row = conn.execute("PRAGMA quick_check(1)").fetchone()
            if row is None or row[0] != "ok":
                found = "no answer" if row is None else str(row[0])[:200]
                raise sqlite3.DatabaseError(f"database disk image is malformed ({found})")

        self._run("check", check)
        return self._repaired and not repaired_before

    def put(self, origin: str, record: OriginRecord) -> None:
        blob = pack_record(record)
        result = self._run("write", lambda conn: write_record(conn, origin, blob))
        self._fallback.keep(origin, record, stored=result is not FAILED)

    def acquire_lease(self, origin: str, holder: str, ttl: float) -> bool:
        result = self._run("lease", lambda conn: take_lease(conn, origin, holder, ttl)[0])
        if result is FAILED:
            # The shared lease is out of reach: single-flight within this process at least.
            return self._fallback.acquire_lease(origin, holder, ttl)
        return bool(result)

    def acquire_lease_and_get(
        self, origin: str, holder: str, ttl: float
    ) -> tuple[bool, OriginRecord | None]:
        result = self._run("lease", lambda conn: take_lease(conn, origin, holder, ttl, read=True))
        if not isinstance(result, tuple):  # FAILED
            held = self._fallback.acquire_lease(origin, holder, ttl)
            return held, self.get(origin) if held else None
        return bool(result[0]), self._decoded(origin, result[1]) if result[0] else None

    def put_and_release_lease(self, origin: str, record: OriginRecord, holder: str) -> None:
        blob = pack_record(record)
        self._fallback.release_lease(origin, holder)
        write = self._run("write", lambda conn: store_and_release(conn, origin, blob, holder))
        self._fallback.keep(origin, record, stored=write is not FAILED)
        if write is FAILED:
            self.release_lease(origin, holder)

    def renew_lease(self, origin: str, holder: str, ttl: float) -> bool:
        renewed = self._run(
            "lease", lambda conn: take_lease(conn, origin, holder, ttl, renewing=True)[0]
        )
        if renewed is FAILED:
            return self._fallback.renew_lease(origin, holder, ttl)
        return bool(renewed)

    def lease_holder(self, origin: str) -> str | None:
        result = self._run("lease read", lambda conn: read_lease(conn, origin))
        if not isinstance(result, tuple):  # FAILED, or no readable lease row
            return self._fallback.lease_holder(origin)
        return str(result[0]) if float(result[1]) > time.time() else None

    def release_lease(self, origin: str, holder: str) -> None:
        self._fallback.release_lease(origin, holder)
        self._run("lease release", lambda conn: conn.execute(RELEASE_LEASE, (origin, holder)))

    # -- answers without waiting, for the reactor thread (docs/storage.md) --------------------
    #
    # What would wait or fail raises ``WouldBlock`` having changed nothing, and the worker
    # makes the call again. It never checkpoints (an fsync could stall the reactor).

    def answering_now(self) -> bool:
        return bool(getattr(self._local, "now", False))

    @contextlib.contextmanager
    def without_waiting(self) -> Iterator[None]:
        self._local.now = True
        try:
            yield
        finally:
            self._local.now = False

    def _run_quick(self, what: str, query: Callable[[sqlite3.Connection], _T]) -> _T:
        """``query`` on the connection that never waits (the caller holds ``_lock``)."""
        conn = self._quick_connection()
        before = conn.total_changes
        try:
            result = query(conn)
        except Exception:
            if conn.in_transaction:  # (never left open for the next call)
                self._close_quick()
            raise
        if conn.total_changes != before:
            self._quick_writes += 1
        if what in WRITES:
            self._lock_over(conn)  # a write got the lock: a locked spell is over
        return result

    def _quick_connection(self) -> sqlite3.Connection:
        if self._conn is None or self._closed:
            raise WouldBlock  # the fallback answers: the worker's path
        if self._quick is None:
            try:
                self._quick = sqlite_file.connect(
                    self.path, 0, "PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = 0"
                )
            except sqlite3.Error as exc:
                raise WouldBlock from exc
        return self._quick

    def housekeeping_due(self) -> bool:
        """True every ``CHECKPOINT_EVERY`` writes made without waiting (counted as done)."""
        if self._quick_writes < CHECKPOINT_EVERY:
            return False
        self._quick_writes = 0
        return True

    def housekeeping(self) -> None:
        """Checkpoint the WAL on a connection of its own, without the instance's lock
        (PASSIVE waits for nobody), so that calls answered meanwhile are not held up."""
        if self._closed:
            return
        with (
            contextlib.suppress(sqlite3.Error),
            contextlib.closing(sqlite3.connect(self.path, timeout=0)) as conn,
        ):
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def _close_quick(self) -> None:
        quick, self._quick = self._quick, None
        close_quietly(quick)

    # -- a locked spell: another process holds the write lock (docs/storage.md) -------------
    #
    # Else every write would wait the busy timeout, one after another in the worker. Leases
    # are process-local meanwhile (RFC 9309 section 2.4 allows fetching robots.txt again;
    # losing a request is not allowed).

    def _lock_found(self, what: str, exc: BaseException) -> None:
        """A call waited the busy timeout: start a spell (the caller holds ``_lock``)."""
        self.lock_waits += 1
        if self._locked_since is not None:
            return
        self._locked_since = time.monotonic()
        self._spells += 1
        logger.log(
            logging.WARNING if self._spells == 1 else logging.DEBUG,
            "robots.txt store %s is locked by another process (a %s waited "
            "the %g s busy timeout: %s); until it can be written again, robots.txt is "
            "decided in this process without waiting on it (an origin may be fetched "
            "once per process), and what is decided meanwhile is written back then",
            self.path,
            what,
            self._busy_timeout,
            exc,
        )

    def _lock_over(self, conn: sqlite3.Connection) -> None:
        """A write got the lock: the spell is over; write back what it decided."""
        since, self._locked_since = self._locked_since, None
        if since is None:
            return
        written = self._write_back(conn)
        logger.log(
            logging.INFO if self._spells == 1 else logging.DEBUG,
            "robots.txt store %s can be written again after %.0f s; %s",
            self.path,
            time.monotonic() - since,
            "writing back failed, tried again later"
            if written is None
            else f"wrote back {written} origin(s) decided meanwhile",
        )

    def _write_back(self, conn: sqlite3.Connection) -> int | None:
        """Write the fallback's unsynced records in one transaction without waiting;
        how many were written, None when it failed (they stay unsynced)."""

        def write_newer(mine: dict[str, OriginRecord]) -> int:
            with write_transaction(conn):
                theirs = [read_record(conn, origin) for origin in mine]
                newer = newer_records(mine, theirs, self._record_limit)
                for origin, record in newer.items():
                    write_record(conn, origin, pack_record(record))
            return len(newer)

        try:
            return self._fallback.write_back(write_newer)
        except _DRIVER_ERRORS as exc:
            logger.debug("writing back to %s failed: %s", self.path, exc)
            self._fallback.next_write_back = time.monotonic() + WRITE_BACK_RETRY
            return None

    # -- the cluster primitives (storage/cluster.py) ---------------------------------------
    #
    # In a file of their own beside the store (``<store>.cluster``): the store's schema checks
    # never see these tables, and moving a damaged store aside never throws parked requests
    # away. Turns and heartbeats use the wall clock, which processes on one machine share.

    @property
    def cluster_path(self) -> Path:
        return Path(f"{self.path}.cluster")

    def cluster(self, spider: str) -> SpiderCluster:
        with self._cluster_call(write=False):
            pass  # opens the file now: one that cannot be opened is reported here
        return SpiderCluster(self, spider)

    @contextlib.contextmanager
    def _cluster_call(self, *, write: bool = True) -> Iterator[sqlite3.Connection]:
        """The cluster file's connection, under its lock; a ``write`` runs in BEGIN
        IMMEDIATE, which takes the write lock before anything is read, so two processes
        never both see the same dead owner or the same free turn."""
        with self._cluster_lock:
            if self._closed:
                raise ClusterError(f"the robots.txt store {self.path} is closed")
            try:
                if self._cluster_conn is None:
                    self._cluster_conn = sqlite_file.connect(
                        self.cluster_path, CLUSTER_BUSY_TIMEOUT, _CLUSTER_SCHEMA
                    )
                conn = self._cluster_conn
                with write_transaction(conn) if write else contextlib.nullcontext(conn):
                    yield conn
            except (sqlite3.Error, ValueError, TypeError) as exc:
                raise ClusterError(f"{type(exc).__name__}: {exc}") from None

    def park(
        self, spider: str, owner: str, ttl: float, add: Sequence[Parked], remove: Sequence[str]
    ) -> None:
        with self._cluster_call() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO owners (spider, owner, alive_until) VALUES (?, ?, ?)",
                (spider, owner, time.time() + ttl),
            )
            # Idempotent per request, whoever parked it: the entry of the same key
            # under another owner (a dead run's copy of a start request this run yields
            # again) is taken over, not kept beside it to be adopted and crawled again.
            conn.executemany(
                "DELETE FROM parked WHERE spider = ? AND key = ? AND owner != ?",
                [(spider, key, owner) for key, _, _ in add],
            )
            conn.executemany(
                "INSERT OR REPLACE INTO parked (spider, owner, key, origin, blob) "
                "VALUES (?, ?, ?, ?, ?)",
                [(spider, owner, key, origin, blob) for key, origin, blob in add],
            )
            conn.executemany(
                "DELETE FROM parked WHERE spider = ? AND owner = ? AND key = ?",
                [(spider, owner, key) for key in remove],
            )

    def adopt(self, spider: str, owner: str, ttl: float, limit: int) -> list[Parked]:
        now = time.time()
        with self._cluster_call() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO owners (spider, owner, alive_until) VALUES (?, ?, ?)",
                (spider, owner, now + ttl),
            )
            rows = conn.execute(
                "SELECT p.owner, p.key, p.origin, p.blob FROM parked p "
                "LEFT JOIN owners o ON o.spider = p.spider AND o.owner = p.owner "
                "WHERE p.spider = ? AND p.owner != ? "
                "AND (o.alive_until IS NULL OR NOT (o.alive_until >= ?)) LIMIT ?",
                (spider, owner, now, limit),
            ).fetchall()
            adopted: list[Parked] = []
            for dead, key, origin, blob in rows:
                conn.execute(
                    "DELETE FROM parked WHERE spider = ? AND owner = ? AND key = ?",
                    (spider, dead, key),
                )
                # Ignored (no row changed) for a duplicate of one we hold: it collapses.
                if conn.execute(
                    "INSERT OR IGNORE INTO parked (spider, owner, key, origin, blob) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (spider, owner, key, origin, blob),
                ).rowcount:
                    adopted.append((str(key), str(origin), bytes(blob)))
            conn.execute(
                "DELETE FROM owners WHERE spider = ? AND NOT (alive_until >= ?) AND owner NOT IN "
                "(SELECT owner FROM parked WHERE spider = ?)",
                (spider, now, spider),
            )
        return adopted

    def retire(self, spider: str, owner: str, *, keep: bool) -> None:
        with self._cluster_call() as conn:
            conn.execute(
                "UPDATE owners SET alive_until = 0 WHERE spider = ? AND owner = ?",
                (spider, owner),
            )
            if not keep:
                conn.execute("DELETE FROM parked WHERE spider = ? AND owner = ?", (spider, owner))
                conn.execute("DELETE FROM owners WHERE spider = ? AND owner = ?", (spider, owner))

    def parked(self, spider: str, owner: str | None = None) -> list[Parked]:
        with self._cluster_call(write=False) as conn:
            rows = conn.execute(  # no owner (''): every owner's
                "SELECT key, origin, blob FROM parked WHERE spider = ? AND ? IN (owner, '')",
                (spider, owner or ""),
            ).fetchall()
        return [(str(k), str(o), bytes(b)) for k, o, b in rows]

    def reserve_turn(
        self, spider: str, origin: str, spacing: float, horizon: float, not_before: float = 0.0
    ) -> tuple[bool, float]:
        with self._cluster_call() as conn:
            now = time.time()
            row = conn.execute(  # an unreadable row is broken, not obeyed
                "SELECT next_at FROM turns WHERE spider = ? AND origin = ? "
                "AND typeof(next_at) IN ('integer', 'real')",
                (spider, origin),
            ).fetchone()
            next_at = float(row[0]) if row is not None else 0.0
            if next_at > now + horizon + spacing:
                next_at = 0.0  # absurd (a clock jump): broken, not obeyed
            start = max(now + max(not_before, 0.0), next_at)
            if start - now > horizon:
                return False, start - now - horizon
            conn.execute(
                "INSERT OR REPLACE INTO turns (spider, origin, next_at) VALUES (?, ?, ?)",
                (spider, origin, start + spacing),
            )
            return True, start - now

    def close(self) -> None:
        # Bounded: a call that hangs in another thread must not hang the crawl's stop
        # (the process exits; SQLite's journal keeps the file consistent).
        if not self._lock.acquire(timeout=self._busy_timeout + 2.0):
            logger.warning(
                "robots.txt store %s: a store call did not end in time; "
                "closing without waiting for it",
                self.path,
            )
            self._closed = True
            return
        try:
            if self._closed:
                return
            if self._fallback.unsynced:  # a last try, without waiting; say what is lost
                written = None
                with contextlib.suppress(WouldBlock):
                    written = self._write_back(self._quick_connection())
                if written is None:
                    logger.info(
                        "robots.txt store %s: %d origin(s) decided while it was "
                        "locked could not be written to it (their robots.txt is fetched again "
                        "by the next crawl)",
                        self.path,
                        len(self._fallback.unsynced),
                    )
            self._closed = True
            self._close_quick()
            close_quietly(self._conn)
            self._fallback.close()
        finally:
            self._lock.release()
        # Bounded as above: a cluster call waits at most its busy timeout.
        if self._cluster_lock.acquire(timeout=CLUSTER_BUSY_TIMEOUT + 2.0):
            conn, self._cluster_conn = self._cluster_conn, None
            self._cluster_lock.release()
            close_quietly(conn)

    def describe(self) -> str:
        state = "" if self._conn is not None else " (unusable: process-local fallback)"
        return f"sqlite {self.path}{state}"
