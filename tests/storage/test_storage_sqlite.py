"""SQLite store: where the file goes, several processes on one file, damage and recovery.

The contract every backend keeps is in test_storage.py.
"""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_rep.policy.config import SettingError, StorePlace
from scrapy_rep.storage.sqlite_store import DEFAULT_FILENAME, SqliteStorage
from tests.storage.test_storage import RECORD, ours

SQLITE_LOGGER = "scrapy_rep.storage.sqlite_store"
REPO_ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------
# SQLite
# ---------------------------------------------------------------------------


def path_from_spec(spec: str) -> Path | None:
    return SqliteStorage.path_of(StorePlace.parse(spec))


def test_sqlite_spec_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    outside = tmp_path / "outside"
    outside.mkdir()
    monkeypatch.chdir(outside)
    assert path_from_spec("sqlite") == outside / ".scrapy" / DEFAULT_FILENAME
    assert (outside / ".scrapy").is_dir()
    assert path_from_spec("sqlite:///abs/x.db") == Path("/abs/x.db")
    assert path_from_spec("sqlite:rel/x.db") == outside / "rel" / "x.db"
    assert path_from_spec("SQLITE:/abs/y.db") == Path("/abs/y.db")
    with pytest.raises(SettingError):
        path_from_spec("sqlite://")

    project = tmp_path / "project"
    (project / "myproject" / "spiders").mkdir(parents=True)
    (project / "scrapy.cfg").write_text("[settings]\ndefault = myproject.settings\n")
    monkeypatch.chdir(project / "myproject" / "spiders")
    expected = project.resolve() / ".scrapy" / DEFAULT_FILENAME
    assert path_from_spec("sqlite") == expected
    store = SqliteStorage(expected)
    store.put("https://a.test", RECORD)
    store.close()
    assert expected.is_file()


def test_sqlite_two_instances_share_one_file(tmp_path: Path) -> None:
    first = SqliteStorage(tmp_path / "shared.db")
    second = SqliteStorage(tmp_path / "shared.db")
    first.put("https://a.test", RECORD)
    assert second.get("https://a.test") == RECORD
    assert first.acquire_lease("https://a.test", "p1", 60)
    assert not second.acquire_lease("https://a.test", "p2", 60)
    first.release_lease("https://a.test", "p1")
    assert second.acquire_lease("https://a.test", "p2", 60)
    first.close()
    second.close()


_CONTENDER = """
import sys
from scrapy_rep.storage.sqlite_store import SqliteStorage
store = SqliteStorage(sys.argv[1])
origins = [f"https://o{i}.test" for i in range(int(sys.argv[2]))]
won = [i for i, o in enumerate(origins) if store.acquire_lease(o, sys.argv[3], 600)]
print(" ".join(map(str, won)))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def test_sqlite_processes_single_flight(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    SqliteStorage(path).close()  # create it before the race
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CONTENDER, path, "300", f"proc{n}"],
            stdout=subprocess.PIPE,
            env=_env(),
            text=True,
        )
        for n in range(3)
    ]
    winners: list[set[int]] = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        winners.append({int(x) for x in out.split()})
    assert sum(len(w) for w in winners) == 300, "every lease was taken exactly once"
    assert set().union(*winners) == set(range(300))


_WRITER = """
import os, sys
from scrapy_rep.policy.records import OriginRecord
from scrapy_rep.storage.sqlite_store import SqliteStorage
store = SqliteStorage(sys.argv[1])
i = 0
while True:
    origin = f"https://o{i % 400}.test"
    store.acquire_lease(origin, "writer", 60)
    store.put(origin, OriginRecord(kind="rules", body=os.urandom(2000), fetched_at=float(i)))
    store.release_lease(origin, "writer")
    i += 1
    if i == 400:
        print("ready", flush=True)
"""


def test_sqlite_survives_kill_9_mid_write(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "killed.db"
    for _ in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, env=_env()
        )
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        with caplog.at_level(logging.WARNING, logger=SQLITE_LOGGER):
            store = SqliteStorage(path)
        assert not ours(caplog), "the killed writer left an unusable store"
        assert all(store.get(f"https://o{i}.test") is not None for i in range(400))
        store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_sqlite_corrupt_file_is_moved_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "robots.db"
    store = SqliteStorage(path)
    store.put("https://a.test", RECORD)
    store.close()
    with open(path, "r+b") as fh:
        fh.write(b"this is not a sqlite header!" * 8)
    with caplog.at_level(logging.WARNING, logger=SQLITE_LOGGER):
        store = SqliteStorage(path)
    warnings = [r for r in ours(caplog) if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "moved it to" in warnings[0].getMessage()
    assert list(tmp_path.glob("robots.db.corrupt-*"))
    assert store.get("https://a.test") is None
    store.put("https://a.test", RECORD)
    assert store.get("https://a.test") == RECORD
    store.close()


def _fill(path: Path, content: str) -> None:
    if content == "garbage-file":
        path.write_bytes(os.urandom(5000))
        return
    with sqlite3.connect(path) as conn:
        if content == "schema":
            conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
            conn.execute("INSERT INTO meta VALUES ('schema_version', '99')")
        else:
            conn.execute("CREATE TABLE users (name TEXT)")
    conn.close()


@pytest.mark.parametrize("content", ["schema", "garbage-file"])
def test_sqlite_unusable_file_we_used_is_replaced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: str
) -> None:
    """A file at a path scrapy-rep has used before (its lock file is there), or at the
    default file name, that is not a usable store: moved aside, one WARNING. (A
    readable database with tables of its own is never a damaged store of ours:
    tests/storage/test_storage_sqlite_trust.py.)"""
    for path in (tmp_path / "robots.db", tmp_path / "sub" / DEFAULT_FILENAME):
        path.parent.mkdir(exist_ok=True)
        if path.name != DEFAULT_FILENAME:
            SqliteStorage(path).close()  # scrapy-rep used this path
            path.unlink()
        _fill(path, content)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=SQLITE_LOGGER):
            store = SqliteStorage(path)
        assert len(ours(caplog)) == 1
        assert "moved it to" in ours(caplog)[0].getMessage()
        store.put("https://a.test", RECORD)
        assert store.get("https://a.test") == RECORD
        store.close()


@pytest.mark.parametrize("content", ["foreign", "garbage-file"])
def test_sqlite_refuses_a_file_that_is_not_ours(tmp_path: Path, content: str) -> None:
    """REP_STORAGE naming someone else's file (another program's database, a text
    file) is a mistake: a clear error, and the file is left exactly as it was."""
    path = tmp_path / "important.db"
    _fill(path, content)
    before = path.read_bytes()
    with pytest.raises(SettingError, match=r"not a scrapy-rep robots\.txt store") as info:
        SqliteStorage(path)
    assert str(path) in str(info.value) and "REP_STORAGE" in str(info.value)
    assert path.read_bytes() == before
    assert not list(tmp_path.glob("important.db.corrupt-*"))


def test_sqlite_runtime_errors_fall_back_and_log_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SqliteStorage(tmp_path / "robots.db")
    assert store._conn is not None
    store._conn.close()  # every statement now fails inside sqlite3
    with caplog.at_level(logging.WARNING, logger=SQLITE_LOGGER):
        for _ in range(3):
            store.put("https://a.test", RECORD)
            assert store.get("https://a.test") == RECORD  # from the fallback
            assert store.get("https://b.test") is None  # a read that reaches SQLite
        assert store.acquire_lease("https://a.test", "p1", 60)
        assert not store.acquire_lease("https://a.test", "p2", 60)
    kinds = {r.getMessage().split(" failed")[0] for r in ours(caplog)}
    assert len(ours(caplog)) == len(kinds) == 3  # write, read, lease: once each


def test_sqlite_unopenable_path_runs_on_fallback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "adir.db").mkdir()
    with caplog.at_level(logging.WARNING, logger=SQLITE_LOGGER):
        store = SqliteStorage(tmp_path / "adir.db")
    assert len(ours(caplog)) == 1
    assert "fallback" in store.describe()
    store.put("https://a.test", RECORD)
    assert store.get("https://a.test") == RECORD
    store.close()
