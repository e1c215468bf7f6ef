"""SQLite store: answers without waiting (``without_waiting``, for the reactor thread)
and the combined calls (lease + read, write + release: one transaction each).

Another process holding the write lock is a real subprocess here: SQLite's locks are
what decide, and a call that would wait must raise ``WouldBlock`` having changed
nothing, so that the worker thread can make it again.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from scrapy_rep.storage.base import WouldBlock
from scrapy_rep.storage.sqlite_store import CHECKPOINT_EVERY, SqliteStorage
from tests.storage.test_storage import RECORD

ORIGIN = "https://nowait.test"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStorage]:
    backend = SqliteStorage(tmp_path / "store.db")
    yield backend
    backend.close()


class WriteLockHolder:
    """Another process that holds the store's write lock until told to stop (or for
    ``hold`` seconds)."""

    def __init__(self, path: Path, hold: float | None = None) -> None:
        wait = "sys.stdin.readline()" if hold is None else f"time.sleep({hold})"
        code = (
            "import sqlite3, sys, time\n"
            f"conn = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
            "conn.execute('BEGIN IMMEDIATE')\n"
            "print('locked', flush=True)\n"
            f"{wait}\n"
            "conn.execute('COMMIT')\n"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": ""},
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "locked"

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        assert self.proc.wait(timeout=30) == 0


def test_calls_answer_at_once_when_nothing_waits(store: SqliteStorage, tmp_path: Path) -> None:
    with store.without_waiting():
        assert store.get(ORIGIN) is None
        assert store.acquire_lease_and_get(ORIGIN, "p1", 60) == (True, None)
        store.put_and_release_lease(ORIGIN, RECORD, "p1")
        assert store.get(ORIGIN) == RECORD
    # what was answered at once is in the file, for another process too
    other = SqliteStorage(tmp_path / "store.db")
    try:
        assert other.get(ORIGIN) == RECORD
        assert other.lease_holder(ORIGIN) is None  # released in the same transaction
        assert other.acquire_lease(ORIGIN, "p2", 60)
    finally:
        other.close()


def test_a_write_that_would_wait_raises_and_changes_nothing(
    store: SqliteStorage, tmp_path: Path
) -> None:
    store.put(ORIGIN, RECORD)
    holder = WriteLockHolder(tmp_path / "store.db")
    try:
        with store.without_waiting():
            # WAL: a read never waits on a writer
            assert store.get(ORIGIN) == RECORD
            with pytest.raises(WouldBlock):
                store.acquire_lease(ORIGIN, "p1", 60)
            with pytest.raises(WouldBlock):
                store.acquire_lease_and_get(ORIGIN, "p1", 60)
            with pytest.raises(WouldBlock):
                store.put_and_release_lease("https://other.test", RECORD, "p1")
    finally:
        holder.stop()
    # nothing of it happened: the lease is free, the other record absent
    assert store.lease_holder(ORIGIN) is None
    assert store.get("https://other.test") is None
    # made again where waiting is allowed (the worker thread), each call works
    assert store.acquire_lease_and_get(ORIGIN, "p1", 60) == (True, RECORD)
    store.put_and_release_lease(ORIGIN, RECORD, "p1")
    assert store.lease_holder(ORIGIN) is None


def test_a_value_that_does_not_decode_is_left_to_the_worker(
    store: SqliteStorage, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    conn = sqlite3.connect(tmp_path / "store.db", isolation_level=None)
    conn.execute(
        "INSERT INTO origins (origin, record, updated_at) VALUES (?, ?, 0)",
        (ORIGIN, b"\x78\x9cnot zlib at all"),
    )
    conn.close()
    with store.without_waiting(), pytest.raises(WouldBlock):
        store.get(ORIGIN)  # the file check and the WARNING are the worker's
    with caplog.at_level(logging.WARNING):
        assert store.get(ORIGIN) is None  # a miss, as before
    assert "unreadable" in caplog.text


def test_a_store_busy_in_another_thread_sends_the_call_to_the_worker(
    store: SqliteStorage,
) -> None:
    """The worker thread (or a lease renewal) is using the instance: the reactor
    thread does not wait for it."""
    taken, done = threading.Event(), threading.Event()

    def busy_worker() -> None:
        with store._lock:
            taken.set()
            done.wait(30)

    worker = threading.Thread(target=busy_worker)
    worker.start()
    try:
        assert taken.wait(30)
        with store.without_waiting(), pytest.raises(WouldBlock):
            store.get(ORIGIN)
    finally:
        done.set()
        worker.join(30)
    with store.without_waiting():
        assert store.get(ORIGIN) is None


def test_writes_made_at_once_are_checkpointed_by_the_worker(
    store: SqliteStorage, tmp_path: Path
) -> None:
    due = 0
    with store.without_waiting():
        for i in range(CHECKPOINT_EVERY * 2 + 1):
            store.put(f"https://site{i}.test", RECORD)
            due += store.housekeeping_due()
    assert due == 2  # once per CHECKPOINT_EVERY writes
    store.housekeeping()  # the worker's: a checkpoint on a connection of its own
    busy, wal_frames, done = (
        sqlite3.connect(tmp_path / "store.db").execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    )
    assert busy == 0 and done == wal_frames
    assert store.get("https://site0.test") == RECORD
