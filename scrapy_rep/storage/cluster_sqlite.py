"""The cluster primitives (``storage/cluster.py``) in a SQLite file, for crawler
processes on one machine: BEGIN IMMEDIATE takes the write lock before anything is read,
so adoption and turns are atomic across processes."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from scrapy_rep.storage.cluster import ClusterError, Parked

_SQLITE_SCHEMA = """
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


class SqliteCluster:
    """The cluster primitives in a SQLite file next to the robots.txt store's
    (``<store>.cluster``), so the store's own schema checks never see these tables.
    Processes on one machine share a wall clock, which the turns and heartbeats use."""

    def __init__(self, path: str | Path, spider: str, *, busy_timeout: float = 10.0) -> None:
        self.path = Path(path)
        self.spider = spider
        # One connection, used from worker threads: one statement sequence at a time.
        self._lock = threading.Lock()
        try:
            self._conn = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.executescript(_SQLITE_SCHEMA)
        except sqlite3.Error as exc:
            raise ClusterError(f"{type(exc).__name__}: {exc}") from None

    @classmethod
    def beside(cls, store_path: Path, spider: str) -> SqliteCluster:
        return cls(Path(f"{store_path}.cluster"), spider)

    @contextlib.contextmanager
    def _write(self) -> Any:
        """BEGIN IMMEDIATE takes the write lock before anything is read, so two processes
        never both see the same dead owner or the same free turn."""
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    yield self._conn
                    self._conn.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        self._conn.execute("ROLLBACK")
                    raise
            except (sqlite3.Error, ValueError, TypeError) as exc:
                raise ClusterError(f"{type(exc).__name__}: {exc}") from None

    def park(self, owner: str, ttl: float, add: Sequence[Parked], remove: Sequence[str]) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO owners (spider, owner, alive_until) VALUES (?, ?, ?)",
                (self.spider, owner, time.time() + ttl),
            )
            # Idempotent per request, whoever parked it: the entry of the same key
            # under another owner (a dead run's copy of a start request this run yields
            # again) is taken over, not kept beside it to be adopted and crawled again.
            conn.executemany(
                "DELETE FROM parked WHERE spider = ? AND key = ? AND owner != ?",
                [(self.spider, key, owner) for key, _, _ in add],
            )
            conn.executemany(
                "INSERT OR REPLACE INTO parked (spider, owner, key, origin, blob) "
                "VALUES (?, ?, ?, ?, ?)",
                [(self.spider, owner, key, origin, blob) for key, origin, blob in add],
            )
            conn.executemany(
                "DELETE FROM parked WHERE spider = ? AND owner = ? AND key = ?",
                [(self.spider, owner, key) for key in remove],
            )

    def adopt(self, owner: str, ttl: float, limit: int) -> list[Parked]:
        now = time.time()
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO owners (spider, owner, alive_until) VALUES (?, ?, ?)",
                (self.spider, owner, now + ttl),
            )
            rows = conn.execute(
                "SELECT p.owner, p.key, p.origin, p.blob FROM parked p "
                "LEFT JOIN owners o ON o.spider = p.spider AND o.owner = p.owner "
                "WHERE p.spider = ? AND p.owner != ? "
                "AND (o.alive_until IS NULL OR NOT (o.alive_until >= ?)) LIMIT ?",
                (self.spider, owner, now, limit),
            ).fetchall()
            mine = _present(conn, self.spider, owner, [row[1] for row in rows])
            adopted: list[Parked] = []
            for dead, key, origin, blob in rows:
                conn.execute(
                    "DELETE FROM parked WHERE spider = ? AND owner = ? AND key = ?",
                    (self.spider, dead, key),
                )
                if key in mine:
                    continue  # a duplicate of one we hold: collapses
                mine.add(key)
                conn.execute(
                    "INSERT INTO parked (spider, owner, key, origin, blob) VALUES (?, ?, ?, ?, ?)",
                    (self.spider, owner, key, origin, blob),
                )
                adopted.append((str(key), str(origin), bytes(blob)))
            conn.execute(
                "DELETE FROM owners WHERE spider = ? AND NOT (alive_until >= ?) AND owner NOT IN "
                "(SELECT owner FROM parked WHERE spider = ?)",
                (self.spider, now, self.spider),
            )
        return adopted

    def retire(self, owner: str, *, keep: bool) -> None:
        with self._write() as conn:
            conn.execute(
                "UPDATE owners SET alive_until = 0 WHERE spider = ? AND owner = ?",
                (self.spider, owner),
            )
            if not keep:
                conn.execute(
                    "DELETE FROM parked WHERE spider = ? AND owner = ?", (self.spider, owner)
                )
                conn.execute(
                    "DELETE FROM owners WHERE spider = ? AND owner = ?", (self.spider, owner)
                )

    def parked(self, owner: str | None = None) -> list[Parked]:
        query = "SELECT key, origin, blob FROM parked WHERE spider = ?"
        args: tuple[str, ...] = (self.spider,)
        if owner:
            query += " AND owner = ?"
            args += (owner,)
        try:
            with self._lock:
                rows = self._conn.execute(query, args).fetchall()
        except sqlite3.Error as exc:
            raise ClusterError(f"{type(exc).__name__}: {exc}") from None
        return [(str(k), str(o), bytes(b)) for k, o, b in rows]

    def reserve_turn(
        self, origin: str, spacing: float, horizon: float, not_before: float = 0.0
    ) -> tuple[bool, float]:
        with self._write() as conn:
            now = time.time()
            row = conn.execute(
                "SELECT next_at FROM turns WHERE spider = ? AND origin = ?", (self.spider, origin)
            ).fetchone()
            try:
                next_at = float(row[0]) if row is not None else 0.0
            except (TypeError, ValueError):
                next_at = 0.0  # an unreadable row is broken, not obeyed
            if next_at > now + horizon + spacing:
                next_at = 0.0  # absurd (a clock jump): broken, not obeyed
            start = max(now + max(not_before, 0.0), next_at)
            if start - now > horizon:
                return False, start - now - horizon
            conn.execute(
                "INSERT OR REPLACE INTO turns (spider, origin, next_at) VALUES (?, ?, ?)",
                (self.spider, origin, start + spacing),
            )
            return True, start - now

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._conn.close()


def _present(conn: sqlite3.Connection, spider: str, owner: str, keys: Iterable[str]) -> set[str]:
    found: set[str] = set()
    for key in set(keys):
        row = conn.execute(
            "SELECT 1 FROM parked WHERE spider = ? AND owner = ? AND key = ?", (spider, owner, key)
        ).fetchone()
        if row is not None:
            found.add(key)
    return found
