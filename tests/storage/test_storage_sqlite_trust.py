"""The SQLite store's file: what scrapy-rep did not create is never moved aside, a
table of ours with other columns is repaired, and a store another user can write is
refused (it holds pickled requests). Real files, real SQLite."""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

import pytest

from scrapy_rep.policy.config import SettingError
from scrapy_rep.storage.sqlite_file import DEFAULT_FILENAME, lock_path
from scrapy_rep.storage.sqlite_store import SqliteStorage
from tests.storage.test_storage import RECORD

SQLITE_LOGGER = "scrapy_rep.storage.sqlite_store"


def someones_database(path: Path) -> bytes:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE users (name TEXT)")
        conn.execute("INSERT INTO users VALUES ('alice')")
    conn.close()
    return path.read_bytes()


def test_a_foreign_database_is_refused_on_every_run(tmp_path: Path) -> None:
    """The first refused open used to leave ``PATH.lock`` behind, which the second run
    took as proof that the file was a store of ours: it was renamed."""
    path = tmp_path / "important.db"
    before = someones_database(path)
    for _ in range(3):
        with pytest.raises(SettingError, match=r"not a scrapy-rep robots\.txt store"):
            SqliteStorage(path)
        assert path.read_bytes() == before
        assert not list(tmp_path.glob("important.db.corrupt-*"))
        assert not lock_path(path).exists()


@pytest.mark.parametrize("name", ["important.db", DEFAULT_FILENAME])
def test_a_foreign_database_is_refused_even_where_a_store_was(tmp_path: Path, name: str) -> None:
    """A readable database with tables of its own is not a damaged store, whatever the
    path's history (a lock file beside it, the default name)."""
    path = tmp_path / name
    SqliteStorage(path).close()  # scrapy-rep used this path: its lock file is there
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    before = someones_database(path)
    with pytest.raises(SettingError, match=r"not a scrapy-rep robots\.txt store"):
        SqliteStorage(path)
    assert path.read_bytes() == before
    assert not list(tmp_path.glob(f"{name}.corrupt-*"))
    assert lock_path(path).exists()  # not ours to remove: an earlier run made it


def test_a_table_with_other_columns_is_repaired(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A store of ours whose ``origins`` table has other columns (a hand edit, another
    build): moved aside once with one WARNING, and the fresh store works, in this run
    and the next."""
    path = tmp_path / "robots.db"
    SqliteStorage(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TABLE origins")
    conn.execute("CREATE TABLE origins (origin TEXT PRIMARY KEY, body BLOB)")
    conn.close()
    with caplog.at_level(logging.WARNING, logger=SQLITE_LOGGER):
        store = SqliteStorage(path)
    warnings = [r.getMessage() for r in caplog.records if r.name == SQLITE_LOGGER]
    assert len(warnings) == 1 and "table origins has columns origin, body" in warnings[0]
    assert "moved it to" in warnings[0]
    store.put("https://a.test", RECORD)
    assert store.get("https://a.test") == RECORD
    store.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=SQLITE_LOGGER):
        again = SqliteStorage(path)
    assert again.get("https://a.test") == RECORD
    again.close()
    assert not [r for r in caplog.records if r.name == SQLITE_LOGGER]
    assert len(list(tmp_path.glob("robots.db.corrupt-*"))) == 1


@pytest.mark.skipif(os.name != "posix", reason="POSIX mode bits")
@pytest.mark.parametrize("suffix", ["", "-wal", ".lock", ".cluster"])
@pytest.mark.parametrize("mode", [0o664, 0o646])
def test_a_store_another_user_can_write_is_refused(tmp_path: Path, suffix: str, mode: int) -> None:
    path = tmp_path / "robots.db"
    store = SqliteStorage(path)
    store.put("https://a.test", RECORD)
    store.close()
    target = Path(f"{path}{suffix}")
    target.touch()
    os.chmod(target, mode)
    with pytest.raises(SettingError) as info:
        SqliteStorage(path)
    message = str(info.value)
    assert message.startswith("REP_STORAGE:")
    assert str(target) in message and f"mode {mode:o}" in message
    assert "pickle" in message
    os.chmod(target, 0o644)
    fixed = SqliteStorage(path)  # writable by its owner only: accepted
    assert fixed.get("https://a.test") == RECORD
    fixed.close()


@pytest.mark.skipif(os.name != "posix", reason="POSIX mode bits")
def test_the_store_files_are_created_owner_writable_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o002)  # a user-private-group umask: group-writable by default
    try:
        path = tmp_path / "robots.db"
        store = SqliteStorage(path)
        store.put("https://a.test", RECORD)
        store.close()
        again = SqliteStorage(path)  # its own files pass the check
        again.close()
    finally:
        os.umask(old)
    for name in (path, lock_path(path)):
        assert os.stat(name).st_mode & 0o022 == 0, name


@pytest.mark.skipif(
    os.name != "posix" or os.geteuid() != 0, reason="needs root to give a file away"
)
def test_a_store_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "robots.db"
    SqliteStorage(path).close()
    os.chown(path, 65534, 65534)  # nobody
    with pytest.raises(SettingError, match=r"owned by another user \(uid 65534\)"):
        SqliteStorage(path)
