"""SQLite store locked by another process for longer than the busy timeout: one call
waits it, then nothing waits until a write gets the lock again; what is decided
meanwhile is answered in this process and written back once the store answers.

The other process is real (a subprocess holding ``BEGIN EXCLUSIVE``): SQLite's own
locks decide. Waits are counted (``lock_waits``, and the log), never timed."""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from scrapy_rep.storage.sqlite_store import SqliteStorage
from tests.storage.test_storage import RECORD

SQLITE_LOGGER = "scrapy_rep.storage.sqlite_store"
#: Short, so a wait costs the test little; the behaviour does not depend on it.
BUSY = 0.3


class ExclusiveHolder:
    """Another process that holds ``BEGIN EXCLUSIVE`` on the file until ``release()``."""

    def __init__(self, path: Path) -> None:
        code = (
            "import sqlite3, sys\n"
            f"conn = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
            "conn.execute('BEGIN EXCLUSIVE')\n"
            "print('locked', flush=True)\n"
            "sys.stdin.readline()\n"
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

    def release(self) -> None:
        if self.proc.poll() is not None:
            return
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        assert self.proc.wait(timeout=30) == 0

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
def store(path: Path) -> Iterator[SqliteStorage]:
    backend = SqliteStorage(path, busy_timeout=BUSY)
    yield backend
    backend.close()


@pytest.fixture
def holder(path: Path, store: SqliteStorage) -> Iterator[ExclusiveHolder]:
    lock = ExclusiveHolder(path)
    yield lock
    lock.kill()


def origins(n: int) -> list[str]:
    return [f"https://new{i}.test" for i in range(n)]


def test_a_locked_store_is_waited_on_once_per_spell(
    store: SqliteStorage, holder: ExclusiveHolder, path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """40 new origins, each as a crawl does it (lease and read, then write and
    release) while another process holds the lock: one call waits the busy timeout,
    the others answer at once from this process; each origin is single-flight here."""
    with caplog.at_level(logging.DEBUG, logger=SQLITE_LOGGER):
        for origin in origins(40):
            assert store.acquire_lease_and_get(origin, "me", 60) == (True, None)
            assert not store.acquire_lease(origin, "other-crawler-of-mine", 60)
            store.put_and_release_lease(origin, RECORD, "me")
            assert store.get(origin) == RECORD  # decided here, answered here
    assert store.lock_waits == 1
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "locked by another process" in warnings[0].getMessage()
    assert str(path) in warnings[0].getMessage()

    holder.release()
    # The next write gets the lock: the spell ends and the 40 are written back.
    with caplog.at_level(logging.INFO, logger=SQLITE_LOGGER):
        assert store.acquire_lease("https://after.test", "me", 60)
    assert any("wrote back 40 origin(s)" in r.getMessage() for r in caplog.records)
    other = SqliteStorage(path, busy_timeout=BUSY)
    try:
        assert all(other.get(origin) == RECORD for origin in origins(40))
        assert other.lease_holder("https://after.test") is not None  # the file's lease
    finally:
        other.close()
    assert store.lock_waits == 1


def test_a_write_back_keeps_a_record_from_a_later_fetch(
    store: SqliteStorage, holder: ExclusiveHolder, path: Path
) -> None:
    origin = "https://both.test"
    store.put(origin, RECORD)  # waits once, then kept here
    holder.release()
    later = dataclasses.replace(RECORD, fetched_at=(RECORD.fetched_at or 0) + 100)
    other = SqliteStorage(path, busy_timeout=BUSY)
    try:
        other.put(origin, later)  # another process fetched it again meanwhile
        store.put("https://any.test", RECORD)  # gets the lock: write-back
        assert other.get(origin) == later
        assert store.get(origin) == later  # this process reads the file again
    finally:
        other.close()


def test_reads_still_see_other_processes_records_during_a_spell(
    path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """WAL: a read needs no write lock, so a spell keeps reading the file."""
    first = SqliteStorage(path, busy_timeout=BUSY)
    first.put("https://known.test", RECORD)
    store = SqliteStorage(path, busy_timeout=BUSY)
    lock = ExclusiveHolder(path)
    try:
        store.put("https://new.test", RECORD)  # the one wait: starts the spell
        assert store.get("https://known.test") == RECORD
        assert store.lock_waits == 1
    finally:
        lock.kill()
        store.close()
        first.close()


def test_close_during_a_spell_says_what_was_not_written(
    store: SqliteStorage, holder: ExclusiveHolder, caplog: pytest.LogCaptureFixture
) -> None:
    for origin in origins(3):
        store.put(origin, RECORD)
    with caplog.at_level(logging.INFO, logger=SQLITE_LOGGER):
        store.close()
    assert any(
        "3 origin(s) decided while it was locked could not be written" in r.getMessage()
        for r in caplog.records
    )
    assert store.lock_waits == 1


def test_close_after_the_lock_ends_writes_back(
    store: SqliteStorage, holder: ExclusiveHolder, path: Path
) -> None:
    for origin in origins(3):
        store.put(origin, RECORD)
    holder.release()
    store.close()  # no write got the lock meanwhile: the close writes back
    other = SqliteStorage(path, busy_timeout=BUSY)
    try:
        assert all(other.get(origin) == RECORD for origin in origins(3))
    finally:
        other.close()
