"""The fault suite, SQLite files: truncated, random bytes in the schema and in the
middle, not UTF-8 schema text, damage found while reading, a future schema, a directory
in the way, a read-only file, bad rows. Each ends as a miss or a repair (moved aside
once, one WARNING), never an exception; afterwards the next open is healthy: no
warning, ``PRAGMA integrity_check`` ok, round trips work.

Lease faults and the other backends: test_storage_faults.py.
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from scrapy_rep.storage.sqlite_store import SqliteStorage
from tests.storage.test_storage import RECORD, ours

ORIGIN = "https://fault.test"


# -- SQLite files ----------------------------------------------------------------------


def filled_store(path: Path, count: int = 300) -> None:
    store = SqliteStorage(path)
    for i in range(count):
        store.put(f"https://o{i}.test", RECORD.evolve(body=os.urandom(600)))
    assert store.acquire_lease(ORIGIN, "p1", 60)
    store.close()


def exercise(store: SqliteStorage, count: int = 300) -> None:
    """Every method on every origin: none may raise."""
    for i in range(count):
        origin = f"https://o{i}.test"
        store.get(origin)
        if i % 10 == 0:
            store.put(origin, RECORD)
            assert store.get(origin) == RECORD
    assert store.acquire_lease(ORIGIN, "p2", 60) in (True, False)
    store.renew_lease(ORIGIN, "p2", 60)
    store.lease_holder(ORIGIN)
    store.release_lease(ORIGIN, "p2")


def assert_healthy(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The next run: opens without a warning, passes integrity_check, works."""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="scrapy_rep"):
        store = SqliteStorage(path)
        store.put("https://after.test", RECORD)
        assert store.get("https://after.test") == RECORD
        assert store.acquire_lease("https://after.test", "p9", 60)
        store.close()
    assert not ours(caplog), [r.getMessage() for r in ours(caplog)]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()


def damaged_then_used(path: Path, caplog: pytest.LogCaptureFixture) -> list[str]:
    """Open the damaged file, use it; the WARNINGs it logged."""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="scrapy_rep"):
        store = SqliteStorage(path)
        exercise(store)
        store.close()
    return [r.getMessage() for r in ours(caplog) if r.levelno >= logging.WARNING]


def moved(messages: list[str]) -> int:
    return sum("moved it to" in m for m in messages)


@pytest.mark.parametrize("keep", [0, 10, 100, 0.5])
def test_sqlite_truncated_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, keep: float
) -> None:
    path = tmp_path / "store.db"
    filled_store(path)
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.truncate(int(size * keep) if keep < 1 else int(keep))
    messages = damaged_then_used(path, caplog)
    assert moved(messages) <= 1 and len(messages) <= 1, messages
    assert_healthy(path, caplog)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("where", ["schema", "middle"])
def test_sqlite_random_bytes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, seed: int, where: str
) -> None:
    """Random bytes over the schema (the end of page 1, where they make sqlite3 raise
    UnicodeDecodeError, "Could not decode to UTF-8" or "malformed database schema") or
    over a page in the middle of the file: moved aside once, with one WARNING."""
    path = tmp_path / "store.db"
    filled_store(path)
    rng = random.Random(seed)
    size = path.stat().st_size
    if where == "schema":  # sqlite_master's rows fill the end of page 1
        schema_at = path.read_bytes()[:4096].find(b"table") - 16
        start, length = rng.randrange(schema_at, 4090), rng.randrange(1, 32)
    else:
        start, length = rng.randrange(size // 4, size // 2), 4096
    with open(path, "r+b") as fh:
        fh.seek(start)
        fh.write(rng.randbytes(length))
    messages = damaged_then_used(path, caplog)
    assert moved(messages) == 1 and len(messages) == 1, messages
    assert_healthy(path, caplog)


def test_sqlite_non_utf8_schema_text_is_repaired(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The issue's case: a byte flip leaves invalid UTF-8 in sqlite_master's text, which
    sqlite3 reports as UnicodeDecodeError or (Python 3.11) "Could not decode to UTF-8"."""
    path = tmp_path / "store.db"
    filled_store(path)
    data = bytearray(path.read_bytes())
    index_name = b"sqlite_autoindex_origins_1"
    at = data.index(index_name + b"origins") + len(index_name) + 2
    data[at] = 0xFF  # inside the index's tbl_name
    path.write_bytes(bytes(data))
    with (
        pytest.raises((UnicodeDecodeError, sqlite3.OperationalError)),
        sqlite3.connect(path) as conn,
    ):
        conn.execute("SELECT tbl_name FROM sqlite_master").fetchall()
    conn.close()
    messages = damaged_then_used(path, caplog)
    assert moved(messages) == 1, messages
    assert_healthy(path, caplog)


def test_sqlite_damage_found_while_reading_is_repaired_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The file opens (page 1 is intact) but its data pages are junk: the first read
    that meets them moves the file aside, once, with one WARNING; the rest of the run
    goes on in the fresh file."""
    path = tmp_path / "store.db"
    filled_store(path)
    with open(path, "r+b") as fh:
        fh.seek(4096)
        fh.write(random.Random(1).randbytes(path.stat().st_size - 4096))
    messages = damaged_then_used(path, caplog)
    assert moved(messages) == 1, messages
    assert len(messages) == 1, messages
    assert len(list(tmp_path.glob("store.db.corrupt-*"))) == 1
    assert_healthy(path, caplog)


def test_sqlite_future_schema_is_replaced(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "store.db"
    filled_store(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.close()
    messages = damaged_then_used(path, caplog)
    assert moved(messages) == 1 and "schema version 99" in messages[0]
    assert_healthy(path, caplog)


def test_sqlite_directory_in_the_way(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "store.db"
    path.mkdir()
    messages = damaged_then_used(path, caplog)
    assert len(messages) == 1 and moved(messages) == 0, messages
    assert path.is_dir(), "a directory is never moved"


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A store file nobody may write: chattr +i for root (who ignores modes)."""
    path = tmp_path / "store.db"
    filled_store(path)
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
            pytest.skip("running as root on a file system without chattr +i")
        try:
            yield path
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        path.chmod(0o444)
        yield path


def test_sqlite_read_only_file(read_only: Path, caplog: pytest.LogCaptureFixture) -> None:
    before = read_only.read_bytes()
    messages = damaged_then_used(read_only, caplog)
    assert moved(messages) == 0 and len(messages) == 1, messages
    assert read_only.read_bytes() == before


def test_sqlite_bad_rows(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "store.db"
    filled_store(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE origins SET record = 'abc' WHERE origin = 'https://o1.test'")
        conn.execute(
            "UPDATE origins SET record = 42, updated_at = 'x' WHERE origin = 'https://o2.test'"
        )
        conn.execute("UPDATE origins SET record = X'FFFE' WHERE origin = 'https://o3.test'")
        conn.execute("UPDATE leases SET expires_at = 'abc'")
    conn.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="scrapy_rep"):
        store = SqliteStorage(path)
        assert [store.get(f"https://o{i}.test") for i in (1, 2, 3)] == [None] * 3
        assert store.get("https://o4.test") is not None
        assert store.acquire_lease(ORIGIN, "p2", 60)
        store.close()
    assert moved([r.getMessage() for r in ours(caplog)]) == 0, "bad rows are misses"
    assert_healthy(path, caplog)
