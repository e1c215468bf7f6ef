"""One contract suite over every storage backend, and the memory store's own behaviour.

SQLite and Redis specifics are in test_storage_sqlite.py and test_storage_redis.py.

The contract (round trips, misses, leases, corrupt entries) runs against memory,
SQLite (in ``tmp_path``) and a real ``redis-server`` (see ``tests/support/redis_server.py``).
No assertion depends on how long something took.
"""

from __future__ import annotations

import logging
import sqlite3
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scrapy_rep.policy.config import Config, SettingError, StorePlace
from scrapy_rep.policy.records import ALLOW_ALL, RULES, OriginRecord, encode_record
from scrapy_rep.storage.base import MAX_DECODED, MemoryStorage, RobotsStorage, pack_record
from scrapy_rep.storage.factory import create_storage
from scrapy_rep.storage.redis_store import RedisStorage
from scrapy_rep.storage.sqlite_store import SqliteStorage
from tests.support import redis_server as redis_helper
from tests.support.redis_server import RedisServer

# The fixtures live in the helper module (tests/conftest.py belongs to the harness).
redis_server = redis_helper.redis_server
private_redis_server = redis_helper.private_redis_server


RECORD = OriginRecord(
    kind=RULES,
    body=b"User-agent: *\nDisallow: /private\n",
    fetched_at=1_700_000_000.5,
    expires_at=1_700_086_400.0,
    last_outcome="200",
)


def ours(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """This package's log records: the capture also sees other loggers, such as a
    ResourceWarning (py.warnings) for an earlier test's client collected meanwhile."""
    return [r for r in caplog.records if r.name.startswith("scrapy_rep")]


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
        pytest.skip(
            "does not apply to the memory store: it keeps Python objects, so there are no "
            "stored bytes to corrupt (run for SQLite and Redis)"
        )


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
    from scrapy_rep.storage import base as _storage_codec

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


class OlderShapeStore:
    """A ``REP_STORAGE`` class written before ``RobotsStorage`` was a base class: the
    old protocol's methods, no base class, a ``renew_lease`` and ``degraded`` of its own."""

    shared = True
    degraded = True
    renewed: ClassVar[list[str]] = []

    def __init__(self) -> None:
        self.inner = MemoryStorage()

    def get(self, origin: str) -> OriginRecord | None:
        return self.inner.get(origin)

    def put(self, origin: str, record: OriginRecord) -> None:
        self.inner.put(origin, record)

    def acquire_lease(self, origin: str, holder: str, ttl: float) -> bool:
        return self.inner.acquire_lease(origin, holder, ttl)

    def renew_lease(self, origin: str, holder: str, ttl: float) -> bool:
        OlderShapeStore.renewed.append(origin)
        return self.inner.renew_lease(origin, holder, ttl)

    def release_lease(self, origin: str, holder: str) -> None:
        self.inner.release_lease(origin, holder)

    def close(self) -> None:
        pass

    def describe(self) -> str:
        return "older shape"


class NotAStore:
    pass


def test_a_class_of_the_older_shape_still_works() -> None:
    store = create_storage(Config(storage=f"{__name__}.OlderShapeStore"))
    assert isinstance(store, RobotsStorage)
    assert store.shared and store.degraded and store.describe() == "older shape"
    # its own renew_lease is used; the base class's defaults stand in for the rest
    assert store.acquire_lease_and_get("o", "p1", 60) == (True, None)
    assert store.renew_lease("o", "p1", 60) and OlderShapeStore.renewed == ["o"]
    assert store.lease_holder("o") is None
    store.put_and_release_lease("o", RECORD, "p1")
    assert store.get("o") == RECORD and store.acquire_lease("o", "p2", 60)
    store.forget("o")
    assert store.get("o") == OriginRecord()
    with pytest.raises(SettingError, match="does not implement RobotsStorage"):
        create_storage(Config(storage=f"{__name__}.NotAStore"))


def test_config_parses_rep_storage_once() -> None:
    assert Config().store_place == StorePlace("sqlite", "")
    assert Config(storage="sqlite:///a/b.db").store_place == StorePlace("sqlite", "///a/b.db")
    assert Config(storage="memory").store_place.kind == "memory"
    place = Config(storage="redis://:pw@127.0.0.1:6379/0").store_place
    assert place.kind == "redis" and place.shared and "pw" not in repr(place)
    assert Config(storage="a.b.C").store_place == StorePlace("class", "a.b.C")
