"""The SQLite store's SQL: its tables, telling a store of ours from anything else, and
the lease rows (read defensively, taken and renewed inside one write transaction).

Kept apart from ``sqlite_store`` (the connection, errors and repair) for readability.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable
from typing import TypeVar

from scrapy_rep.storage.base import holder_is_dead, lease_is_absurd
from scrapy_rep.storage.sqlite_file import DB_SCHEMA_VERSION, OUR_TABLES

_T = TypeVar("_T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS origins (
    origin TEXT PRIMARY KEY, record BLOB NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS leases (
    origin TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at REAL NOT NULL);
"""
# Leases that are over, or that cannot be read: nobody can be waiting on them.
CLEAN_LEASES = (
    "DELETE FROM leases WHERE typeof(expires_at) NOT IN ('integer', 'real') "
    "OR typeof(holder) != 'text' OR expires_at < ?"
)


#: The columns of each table, as ``SCHEMA`` creates them.
COLUMNS = {
    "meta": ["key", "value"],
    "origins": ["origin", "record", "updated_at"],
    "leases": ["origin", "holder", "expires_at"],
}


class BadDatabase(Exception):
    """The file exists but is not a store we can use as it is."""

    def __init__(self, reason: str, *, foreign: str = "", certain: bool = False) -> None:
        super().__init__(reason)
        self.foreign = foreign  # what the file looks like, when not a store at all
        # A readable database with tables of its own: never a damaged store of ours,
        # whatever marks the path carries.
        self.certain = certain


def check_columns(conn: sqlite3.Connection) -> None:
    """Raise ``BadDatabase`` when a table of ours has other columns (CREATE TABLE IF
    NOT EXISTS leaves such a table as it is, and every query on it would fail)."""
    for table, expected in COLUMNS.items():
        found = [row[1] for row in conn.execute(f"PRAGMA table_info({table})").fetchall()]
        if found != expected:
            raise BadDatabase(f"table {table} has columns {', '.join(map(str, found))}")


def identify(conn: sqlite3.Connection) -> None:
    """Raise ``BadDatabase`` unless the file is empty or a store of this version."""
    # Every text column: a flipped byte anywhere in the schema shows up here, at open.
    rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    tables = {row[1] for row in rows if row[0] == "table"}
    if "meta" in tables:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None or str(row[0]) != str(DB_SCHEMA_VERSION):
            found = "none" if row is None else row[0]
            raise BadDatabase(f"unknown schema version {found}")
    elif tables - OUR_TABLES:
        names = ", ".join(sorted(tables)[:5])
        raise BadDatabase(
            "not a scrapy-rep store",
            foreign=f"a SQLite database with tables {names}",
            certain=True,
        )


def read_lease(conn: sqlite3.Connection, origin: str) -> tuple[str, float] | None:
    """The lease row, or None when there is none or it cannot be read (a damaged
    row is nobody's lease: it is overwritten by the next taker)."""
    row = conn.execute(
        "SELECT CAST(holder AS BLOB), typeof(expires_at), expires_at FROM leases WHERE origin = ?",
        (origin,),
    ).fetchone()
    if row is None or row[1] not in ("integer", "real") or not isinstance(row[0], bytes):
        return None
    try:
        return row[0].decode("utf-8"), float(row[2])
    except (UnicodeDecodeError, ValueError, OverflowError):
        return None


def take_lease(
    conn: sqlite3.Connection, origin: str, holder: str, ttl: float, renewing: bool
) -> bool:
    """Take (or, ``renewing``, extend) the lease in one write transaction."""
    return bool(_in_write(conn, lambda: _take(conn, origin, holder, ttl, renewing)))


def take_lease_and_read(
    conn: sqlite3.Connection, origin: str, holder: str, ttl: float
) -> tuple[bool, object]:
    """Take the lease and, when won, read the record's raw value, in one transaction:
    one commit and one trip to the store for a fetch's start."""

    def both() -> tuple[bool, object] | None:
        if not _take(conn, origin, holder, ttl, False):
            return None
        return True, read_record(conn, origin)

    return _in_write(conn, both) or (False, None)


def store_and_release(conn: sqlite3.Connection, origin: str, blob: bytes, holder: str) -> None:
    """Write the record and give up our lease in one transaction (one commit)."""

    def both() -> bool:
        write_record(conn, origin, blob)
        conn.execute(RELEASE_LEASE, (origin, holder))
        return True

    _in_write(conn, both)


def read_record(conn: sqlite3.Connection, origin: str) -> object:
    row = conn.execute("SELECT record FROM origins WHERE origin = ?", (origin,)).fetchone()
    return None if row is None else row[0]


def write_record(conn: sqlite3.Connection, origin: str, blob: bytes) -> None:
    conn.execute(
        "INSERT INTO origins (origin, record, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (origin) DO UPDATE SET record = excluded.record, "
        "updated_at = excluded.updated_at",
        (origin, blob, time.time()),
    )


RELEASE_LEASE = "DELETE FROM leases WHERE origin = ? AND holder = ?"


def _in_write(conn: sqlite3.Connection, body: Callable[[], _T | None]) -> _T | None:
    """Run ``body`` inside BEGIN IMMEDIATE (the write lock is taken before anything is
    read); None from ``body`` rolls back, anything else commits."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = body()
        conn.execute("ROLLBACK" if result is None else "COMMIT")
        return result
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise


def _take(
    conn: sqlite3.Connection, origin: str, holder: str, ttl: float, renewing: bool
) -> bool | None:
    """The lease decision, inside a write transaction: True (taken), None (not)."""
    now = time.time()
    current = read_lease(conn, origin)
    if renewing and (current is None or current[0] != holder):
        return None  # no longer ours: a renewal never takes a lease
    if current is not None and current[0] != holder and current[1] > now:
        other = current[0]
        taken_over = not renewing and (
            lease_is_absurd(current[1] - now, ttl) or holder_is_dead(other)
        )
        if not taken_over:
            return None
    conn.execute(
        "INSERT OR REPLACE INTO leases (origin, holder, expires_at) VALUES (?, ?, ?)",
        (origin, holder, now + ttl),
    )
    return True


def is_corruption(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    # "could not decode to UTF-8": how Python 3.11's sqlite3 reports invalid text
    # (later versions raise UnicodeDecodeError, handled where it is caught).
    return any(
        mark in text for mark in ("malformed", "not a database", "corrupt", "could not decode")
    )
