"""One contract suite over every storage backend, then backend-specific behaviour.

The contract (round trips, misses, leases, corrupt entries) runs against memory,
SQLite (in ``tmp_path``) and a real ``redis-server`` (see ``tests/redis_server.py``).
No assertion depends on how long something took.
"""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scrapy_rep._config import Config, SettingError
from scrapy_rep._records import ALLOW_ALL, RULES, OriginRecord, encode_record
from scrapy_rep._storage import MemoryStorage, RobotsStorage, create_storage
from scrapy_rep._storage_codec import MAX_DECODED, pack_record
from scrapy_rep._storage_redis import RedisStorage, mask_url
from scrapy_rep._storage_sqlite import DEFAULT_FILENAME, SqliteStorage
from tests import redis_server as redis_helper
from tests.redis_server import RedisServer, free_port

# The fixtures live in the helper module (tests/conftest.py belongs to the harness).
redis_server = redis_helper.redis_server
private_redis_server = redis_helper.private_redis_server

SQLITE_LOGGER = "scrapy_rep._storage_sqlite"
REDIS_LOGGER = "scrapy_rep._storage_redis"
REPO_ROOT = Path(__file__).resolve().parent.parent

RECORD = OriginRecord(
    kind=RULES,
    body=b"User-agent: *\nDisallow: /private\n",
    fetched_at=1_700_000_000.5,
    expires_at=1_700_086_400.0,
    last_outcome="200",
)


# ---------------------------------------------------------------------------
# Backends
# ---------------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RobotsStorage]:
    backend: RobotsStorage
    if request.param == "memory":
        backend = MemoryStorage()
    elif request.param == "sqlite":
        backend = SqliteStorage(tmp_path / "robots.sqlite3")
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        backend = RedisStorage.from_url(server.url, Config())
        backend._client.flushdb()
    yield backend
    backend.close()


def write_raw(store: RobotsStorage, origin: str, raw: Any) -> None:
    """Put bytes into the backend behind the store's back, as corruption would."""
    if isinstance(store, SqliteStorage):
        with sqlite3.connect(store.path) as conn:
            conn.execute(
                "INSERT OR REPLACE INTO origins (origin, record, updated_at) VALUES (?, ?, 0)",
                (origin, raw),
            )
    elif isinstance(store, RedisStorage):
        store._client.set(store.origin_key(origin), raw)
    else:
        pytest.skip("memory storage keeps objects, not bytes")


def test_round_trip(store: RobotsStorage) -> None:
    store.put("https://example.com", RECORD)
    assert store.get("https://example.com") == RECORD
    assert store.shared is not isinstance(store, MemoryStorage)
    assert isinstance(store, RobotsStorage)
    assert store.describe()


@pytest.mark.parametrize(
    "body", [b"", bytes(range(256)), b"\xef\xbb\xbfUser-agent: *\r\n\x00\xff", b"x" * 512_000]
)
def test_binary_bodies(store: RobotsStorage, body: bytes) -> None:
    record = RECORD.evolve(body=body, kind=ALLOW_ALL, unreachable_since=5.0, failures=3)
    store.put("http://a.test", record)
    assert store.get("http://a.test") == record


def test_missing_is_none(store: RobotsStorage) -> None:
    assert store.get("https://never.test") is None


def test_overwrite_and_independent_origins(store: RobotsStorage) -> None:
    store.put("https://a.test", RECORD)
    store.put("https://b.test", RECORD.evolve(last_outcome="404", kind=ALLOW_ALL))
    newer = RECORD.evolve(failures=2, next_retry_at=9.0, unreachable_since=1.0)
    store.put("https://a.test", newer)
    assert store.get("https://a.test") == newer
    b = store.get("https://b.test")
    assert b is not None
    assert b.kind == ALLOW_ALL


def test_round_trip_property(store: RobotsStorage) -> None:
    # Hypothesis runs inside the test: pytest-twisted cannot wrap a @given test itself.
    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        origin=st.text(min_size=1, max_size=60),
        body=st.binary(max_size=2048),
        failures=st.integers(min_value=0, max_value=2**31),
        times=st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=2, max_size=2),
    )
    def check(origin: str, body: bytes, failures: int, times: list[float]) -> None:
        record = OriginRecord(
            kind=RULES, body=body, fetched_at=times[0], expires_at=times[1], failures=failures
        )
        store.put(origin, record)
        assert store.get(origin) == record

    check()


def test_lease_single_flight(store: RobotsStorage) -> None:
    assert store.acquire_lease("https://a.test", "p1", 60)
    assert not store.acquire_lease("https://a.test", "p2", 60)
    assert store.acquire_lease("https://a.test", "p1", 60), "the holder may ask again"
    assert store.acquire_lease("https://b.test", "p2", 60), "leases are per origin"


def test_lease_release_by_holder(store: RobotsStorage) -> None:
    assert store.acquire_lease("https://a.test", "p1", 60)
    store.release_lease("https://a.test", "p1")
    assert store.acquire_lease("https://a.test", "p2", 60)


def test_lease_cannot_be_released_by_another_holder(store: RobotsStorage) -> None:
    assert store.acquire_lease("https://a.test", "p1", 60)
    store.release_lease("https://a.test", "p2")
    assert not store.acquire_lease("https://a.test", "p2", 60)
    store.release_lease("https://never-leased.test", "p2")  # harmless


def test_expired_lease_is_taken_over(store: RobotsStorage) -> None:
    assert store.acquire_lease("https://a.test", "dead", 0.05)
    deadline = time.monotonic() + 10
    while not store.acquire_lease("https://a.test", "p2", 60):
        assert time.monotonic() < deadline, "an expired lease was never released"
        time.sleep(0.02)
    assert not store.acquire_lease("https://a.test", "dead", 60)


@pytest.mark.parametrize(
    "raw",
    [
        b"\x80\x03garbage pickle?",
        b"not json",
        b"[]",
        b'{"v": 1}',
        b'{"v":1,"kind":"rules","body":"!!!","fetched_at":null,"expires_at":0,'
        b'"unreachable_since":null,"next_retry_at":null,"failures":0,"last_outcome":""}',
        b"",
        zlib.compress(b"not json"),
        zlib.compress(b"\xff\xfe"),
        pack_record(RECORD)[:-5],  # truncated
        b"\x78\x9c garbage",
        zlib.compress(b"{" + b" " * MAX_DECODED),  # a zip bomb stops at the limit
    ],
    ids=lambda raw: repr(raw[:12]),
)
def test_corrupt_entry_is_a_miss(store: RobotsStorage, raw: bytes) -> None:
    write_raw(store, "https://a.test", raw)
    assert store.get("https://a.test") is None
    store.put("https://a.test", RECORD)  # and it can be overwritten
    assert store.get("https://a.test") == RECORD


def test_unreadable_entries_are_logged_once_per_store(
    store: RobotsStorage, caplog: pytest.LogCaptureFixture
) -> None:
    from scrapy_rep import _storage_codec

    _storage_codec._warned_unreadable.clear()
    write_raw(store, "https://a.test", b"junk")
    write_raw(store, "https://b.test", b"more junk")
    with caplog.at_level("WARNING", logger="scrapy_rep"):
        assert store.get("https://a.test") is None
        assert store.get("https://b.test") is None
        assert store.get("https://missing.test") is None  # absent is not unreadable
    unreadable = [r for r in caplog.records if "unreadable" in r.getMessage()]
    assert len(unreadable) == 1


def test_plain_json_entry_is_read(store: RobotsStorage) -> None:
    write_raw(store, "https://a.test", encode_record(RECORD))
    assert store.get("https://a.test") == RECORD


def test_unknown_record_version_is_a_miss(store: RobotsStorage) -> None:
    raw = encode_record(RECORD).replace(b'"v":1,', b'"v":99,')
    assert raw != encode_record(RECORD)
    for stored in (raw, zlib.compress(raw)):
        write_raw(store, "https://a.test", stored)
        assert store.get("https://a.test") is None


def test_close_is_idempotent_and_quiet(store: RobotsStorage) -> None:
    store.put("https://a.test", RECORD)
    store.close()
    store.close()
    store.get("https://a.test")  # must not raise
    store.put("https://a.test", RECORD)
    store.release_lease("https://a.test", "p1")


# ---------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------


def test_memory_is_lru_bounded() -> None:
    store = MemoryStorage(max_origins=3)
    for name in "abc":
        store.put(name, RECORD)
    store.get("a")  # a is now the most recently used
    store.put("d", RECORD)
    assert store.get("b") is None
    assert [store.get(n) is not None for n in "acd"] == [True, True, True]
    assert len(store) == 3


def test_create_storage_picks_backends(tmp_path: Path) -> None:
    memory = create_storage(Config(storage="memory", memory_max_origins=7))
    assert isinstance(memory, MemoryStorage)
    sqlite = create_storage(Config(storage=f"sqlite:{tmp_path / 'x.db'}"))
    assert isinstance(sqlite, SqliteStorage)
    assert sqlite.path == tmp_path / "x.db"
    sqlite.close()


# ---------------------------------------------------------------------------
# SQLite
# ---------------------------------------------------------------------------


def test_sqlite_spec_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    outside = tmp_path / "outside"
    outside.mkdir()
    monkeypatch.chdir(outside)
    assert SqliteStorage.path_from_spec("sqlite") == outside / ".scrapy" / DEFAULT_FILENAME
    assert (outside / ".scrapy").is_dir()
    assert SqliteStorage.path_from_spec("sqlite:///abs/x.db") == Path("/abs/x.db")
    assert SqliteStorage.path_from_spec("sqlite:rel/x.db") == outside / "rel" / "x.db"
    assert SqliteStorage.path_from_spec("SQLITE:/abs/y.db") == Path("/abs/y.db")
    with pytest.raises(SettingError):
        SqliteStorage.path_from_spec("sqlite://")

    project = tmp_path / "project"
    (project / "myproject" / "spiders").mkdir(parents=True)
    (project / "scrapy.cfg").write_text("[settings]\ndefault = myproject.settings\n")
    monkeypatch.chdir(project / "myproject" / "spiders")
    expected = project.resolve() / ".scrapy" / DEFAULT_FILENAME
    assert SqliteStorage.path_from_spec("sqlite") == expected
    store = SqliteStorage.from_spec("sqlite")
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
from scrapy_rep._storage_sqlite import SqliteStorage
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
from scrapy_rep._records import OriginRecord
from scrapy_rep._storage_sqlite import SqliteStorage
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
        assert not caplog.records, "the killed writer left an unusable store"
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
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "moved it to" in warnings[0].getMessage()
    assert list(tmp_path.glob("robots.db.corrupt-*"))
    assert store.get("https://a.test") is None
    store.put("https://a.test", RECORD)
    assert store.get("https://a.test") == RECORD
    store.close()


@pytest.mark.parametrize("content", ["schema", "foreign", "garbage-file"])
def test_sqlite_unknown_schema_is_replaced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: str
) -> None:
    path = tmp_path / "robots.db"
    if content == "garbage-file":
        path.write_bytes(os.urandom(5000))
    else:
        with sqlite3.connect(path) as conn:
            if content == "schema":
                conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
                conn.execute("INSERT INTO meta VALUES ('schema_version', '99')")
            else:
                conn.execute("CREATE TABLE users (name TEXT)")
        conn.close()
    with caplog.at_level(logging.WARNING, logger=SQLITE_LOGGER):
        store = SqliteStorage(path)
    assert len(caplog.records) == 1
    store.put("https://a.test", RECORD)
    assert store.get("https://a.test") == RECORD
    store.close()


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
        assert store.acquire_lease("https://a.test", "p1", 60)
        assert not store.acquire_lease("https://a.test", "p2", 60)
    kinds = {r.getMessage().split(" failed")[0] for r in caplog.records}
    assert len(caplog.records) == len(kinds) == 3  # write, read, lease: once each


def test_sqlite_unopenable_path_runs_on_fallback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "adir.db").mkdir()
    with caplog.at_level(logging.WARNING, logger=SQLITE_LOGGER):
        store = SqliteStorage(tmp_path / "adir.db")
    assert len(caplog.records) == 1
    assert "fallback" in store.describe()
    store.put("https://a.test", RECORD)
    assert store.get("https://a.test") == RECORD
    store.close()


# ---------------------------------------------------------------------------
# Redis
# ---------------------------------------------------------------------------


def test_mask_url() -> None:
    assert mask_url("redis://user:pw@h:6379/0") == "redis://user:***@h:6379/0"
    assert mask_url("rediss://:pw@h/1") == "rediss://:***@h/1"
    assert mask_url("redis://h:6379/0") == "redis://h:6379/0"
    assert mask_url("redis://token@h") == "redis://***@h"
    assert mask_url("unix:///tmp/r.sock?db=2&password=pw") == "unix:///tmp/r.sock?db=2&password=***"


def test_redis_missing_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(SettingError, match=r"pip install scrapy-rep\[redis\]"):
        RedisStorage.from_url("redis://localhost", Config())


def test_redis_bad_url() -> None:
    with pytest.raises(SettingError, match="REP_STORAGE"):
        RedisStorage.from_url("redis://:pw@host:notaport/0", Config())


def test_redis_keys_and_record_ttl(redis_server: RedisServer) -> None:
    config = Config(stale_max_age=1000.0, unreachable_wait=500.0)
    store = create_storage(Config(storage=redis_server.url), None)
    assert isinstance(store, RedisStorage)
    store.close()
    store = RedisStorage.from_url(redis_server.url, config)
    store.put("https://a.test", RECORD)
    assert store.acquire_lease("https://a.test", "p1", 30)
    client = store._client
    assert client.get("scrapy-rep:v1:lease:https://a.test") == b"p1"
    ttl_ms = client.pttl("scrapy-rep:v1:origin:https://a.test")
    assert 1500_000 < ttl_ms <= (1500 + 86_400) * 1000
    store.close()


def test_redis_wrong_type_key_is_a_miss(
    store: RobotsStorage, caplog: pytest.LogCaptureFixture
) -> None:
    if not isinstance(store, RedisStorage):
        pytest.skip("redis only")
    store._client.rpush(store.origin_key("https://a.test"), b"x")
    with caplog.at_level(logging.WARNING, logger=REDIS_LOGGER):
        assert store.get("https://a.test") is None
        assert store.get("https://a.test") is None
    assert len(caplog.records) == 1
    assert not store.degraded


def test_redis_outage_falls_back_and_recovers(
    private_redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    server = private_redis_server
    secret = server.password
    assert secret is not None and secret in server.url
    # reconnect_interval=0: probe on every call, so the test needs no sleeping.
    store = RedisStorage.from_url(server.url, Config(), reconnect_interval=0)
    assert secret not in store.describe()
    assert f"redis://:***@127.0.0.1:{server.port}/0" in store.describe()
    store.put("https://before.test", RECORD)
    assert store.get("https://before.test") == RECORD

    caplog.set_level(logging.DEBUG, logger=REDIS_LOGGER)
    server.stop()
    store.put("https://during.test", RECORD)
    for _ in range(5):
        assert store.get("https://during.test") == RECORD
        assert store.get("https://before.test") is None  # only Redis had it
    assert store.acquire_lease("https://x.test", "p1", 60)  # local lease now
    assert not store.acquire_lease("https://x.test", "p2", 60)
    store.release_lease("https://x.test", "p1")
    assert store.degraded
    assert "unreachable" in store.describe() and secret not in store.describe()
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]

    server.start()  # same port, empty data set
    assert store.get("https://during.test") == RECORD  # the outage-era copy survives
    assert not store.degraded
    store.put("https://after.test", RECORD)
    assert store._client.exists(store.origin_key("https://after.test"))
    assert store.acquire_lease("https://after.test", "p1", 60)
    assert not store.acquire_lease("https://after.test", "p2", 60)
    infos = [r for r in caplog.records if r.levelno == logging.INFO]
    assert len(infos) == 1 and "reachable again" in infos[0].getMessage()
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1
    assert secret not in caplog.text
    store.close()


def test_redis_unreachable_at_start_does_not_raise(caplog: pytest.LogCaptureFixture) -> None:
    url = f"redis://user:topsecret@127.0.0.1:{free_port()}/0"
    with caplog.at_level(logging.WARNING, logger=REDIS_LOGGER):
        store = RedisStorage.from_url(url, Config(), reconnect_interval=3600)
        store.put("https://a.test", RECORD)
        assert store.get("https://a.test") == RECORD
        assert store.acquire_lease("https://a.test", "p1", 60)
    assert len(caplog.records) == 1
    assert "topsecret" not in caplog.text and "user:***@" in caplog.text
    store.close()
