"""The fault suite: every backend (memory, SQLite, Redis) against damage it can meet.

Each fault ends as a cache miss or a repair, never an exception out of the store: bad
lease state (no expiry, an absurd expiry, unreadable, a dead holder), Redis keys of the
wrong type or without TTL, a blackholed Redis, a zip bomb, many threads at once.
Damaged SQLite files: test_storage_faults_sqlite.py.
"""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator

import pytest

from scrapy_rep.policy.config import Config
from scrapy_rep.storage import base as codec
from scrapy_rep.storage.base import MemoryStorage, RobotsStorage, new_holder
from scrapy_rep.storage.redis_store import RedisStorage
from scrapy_rep.storage.sqlite_store import SqliteStorage
from tests.storage.test_storage import (
    RECORD,
    ours,
    private_redis_server,
    redis_server,
    store,
    write_raw,
)
from tests.support.redis_server import RedisServer

__all__ = ["private_redis_server", "redis_server", "store"]  # fixtures used below

ORIGIN = "https://fault.test"
DAY = 86_400.0


# -- planting bad lease state behind the store's back ------------------------------------


def plant_lease(store: RobotsStorage, holder: str, expires_in: float | None) -> None:
    """A lease of ``holder`` on ORIGIN expiring in ``expires_in`` s (None: never)."""
    if isinstance(store, SqliteStorage):
        expiry = 1e300 if expires_in is None else time.time() + expires_in
        with sqlite3.connect(store.path) as conn:
            conn.execute(
                "INSERT OR REPLACE INTO leases (origin, holder, expires_at) VALUES (?, ?, ?)",
                (ORIGIN, holder, expiry),
            )
        conn.close()
    elif isinstance(store, RedisStorage):
        key = store.lease_key(ORIGIN)
        if expires_in is None:
            store._client.set(key, holder)
        else:
            store._client.set(key, holder, px=int(expires_in * 1000))
    else:
        assert isinstance(store, MemoryStorage)
        expiry = float("inf") if expires_in is None else time.monotonic() + expires_in
        store._leases[ORIGIN] = (holder, expiry)


def plant_unreadable_lease(store: RobotsStorage) -> None:
    if isinstance(store, SqliteStorage):
        with sqlite3.connect(store.path) as conn:
            conn.execute(
                "INSERT OR REPLACE INTO leases (origin, holder, expires_at) VALUES (?, ?, ?)",
                (ORIGIN, "someone", "abc"),
            )
            conn.execute(
                "INSERT OR REPLACE INTO leases (origin, holder, expires_at) VALUES (?, ?, ?)",
                ("https://other.test", b"\xff\xfe\x00", time.time() + 20),
            )
        conn.close()
    elif isinstance(store, RedisStorage):
        store._client.rpush(store.lease_key(ORIGIN), b"junk")
        store._client.hset(store.lease_key("https://other.test"), "a", "b")
    else:
        pytest.skip(
            "does not apply to the memory store: it keeps Python objects, so there are no "
            "stored lease rows to corrupt (run for SQLite and Redis)"
        )


def dead_holder() -> str:
    """The holder identity of a process of this machine that has exited."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from scrapy_rep.storage.base import new_holder; print(new_holder())",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_a_lease_without_expiry_is_broken_and_taken_over(store: RobotsStorage) -> None:
    plant_lease(store, "holder-elsewhere", None)
    assert store.acquire_lease(ORIGIN, "p2", 30)
    assert not store.acquire_lease(ORIGIN, "p3", 30), "the takeover is a normal lease"


def test_a_lease_beyond_any_renewal_is_broken(store: RobotsStorage) -> None:
    plant_lease(store, "holder-elsewhere", 10 * DAY)  # a clock jump, a bad writer
    assert store.acquire_lease(ORIGIN, "p2", 30)
    plant_lease(store, "holder-elsewhere", 40)  # within max(2 x 30 s, 60 s) + 5 s: obeyed
    assert not store.acquire_lease(ORIGIN, "p2", 30)


def test_an_unreadable_lease_is_ignored_and_cleaned(store: RobotsStorage) -> None:
    plant_unreadable_lease(store)
    assert store.acquire_lease(ORIGIN, "p2", 30)
    assert store.acquire_lease("https://other.test", "p2", 30)
    assert store.renew_lease(ORIGIN, "p2", 30)
    assert store.lease_holder(ORIGIN) == "p2"  # type: ignore[attr-defined]
    assert not store.acquire_lease(ORIGIN, "p3", 30)


def test_a_dead_local_holder_is_taken_over_at_once(store: RobotsStorage) -> None:
    plant_lease(store, dead_holder(), 30)
    assert store.acquire_lease(ORIGIN, "p2", 30)


def test_live_holders_are_obeyed(store: RobotsStorage) -> None:
    for live in (new_holder(), "another-host+x:1:123:abc", "an old-style uuid holder"):
        plant_lease(store, live, 30)
        assert not store.acquire_lease(ORIGIN, "p2", 30), live


def test_renew_extends_only_our_own_lease(store: RobotsStorage) -> None:
    assert store.acquire_lease(ORIGIN, "p1", 0.2)
    assert store.renew_lease(ORIGIN, "p1", 60)
    time.sleep(0.4)  # the first lease would be over by now; the renewed one is not
    assert not store.acquire_lease(ORIGIN, "p2", 60)
    assert not store.renew_lease(ORIGIN, "p2", 60)
    assert store.lease_holder(ORIGIN) == "p1"  # type: ignore[attr-defined]
    store.release_lease(ORIGIN, "p1")
    assert store.lease_holder(ORIGIN) is None  # type: ignore[attr-defined]
    # a renewal that arrives after the release leaves no stray lease behind
    assert not store.renew_lease(ORIGIN, "p1", 60)
    assert store.lease_holder(ORIGIN) is None  # type: ignore[attr-defined]


def test_lease_calls_that_arrive_after_close_raise_nothing(store: RobotsStorage) -> None:
    """At close the lease renewer may still have a renewal in a worker thread, and the
    coordinator releases its leases: either can reach the store after ``close()``. A
    late call must not raise into the shutdown, and a renewal never takes a lease."""
    assert store.acquire_lease(ORIGIN, "p1", 60)
    store.release_lease(ORIGIN, "p1")
    store.close()
    assert not store.renew_lease(ORIGIN, "p1", 60)
    store.release_lease(ORIGIN, "p1")
    store.close()  # twice is harmless


def test_many_threads_share_one_store(store: RobotsStorage) -> None:
    """The crawl calls the store from worker threads: concurrent calls on one instance
    raise nothing, and each lease goes to exactly one thread."""
    winners: dict[str, list[str]] = {f"https://t{i}.test": [] for i in range(40)}
    errors: list[BaseException] = []

    def work(name: str) -> None:
        try:
            for origin, won in winners.items():
                store.put(origin, RECORD)
                assert store.get(origin) == RECORD
                if store.acquire_lease(origin, name, 60):
                    won.append(name)
                    assert store.renew_lease(origin, name, 60)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(f"thread{n}",)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert all(len(won) == 1 for won in winners.values()), winners


# -- Redis -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["list", "hash", "set", "zset"])
def test_redis_keys_of_the_wrong_type(redis_server: RedisServer, kind: str) -> None:
    backend = RedisStorage.from_url(redis_server.url, Config())
    client = backend._client
    client.flushdb()
    for key in (backend.origin_key(ORIGIN), backend.lease_key(ORIGIN)):
        {
            "list": lambda k: client.rpush(k, "x"),
            "hash": lambda k: client.hset(k, "a", "b"),
            "set": lambda k: client.sadd(k, "x"),
            "zset": lambda k: client.zadd(k, {"x": 1.0}),
        }[kind](key)
    assert backend.get(ORIGIN) is None
    assert backend.lease_holder(ORIGIN) is None
    assert backend.acquire_lease(ORIGIN, "p1", 30)
    assert backend.renew_lease(ORIGIN, "p1", 30)
    backend.put_and_release_lease(ORIGIN, RECORD, "p1")
    assert backend.get(ORIGIN) == RECORD
    assert not backend.degraded
    backend.close()


def test_redis_record_key_without_ttl_gets_one(redis_server: RedisServer) -> None:
    backend = RedisStorage.from_url(redis_server.url, Config())
    key = backend.origin_key(ORIGIN)
    backend.put(ORIGIN, RECORD)
    backend._client.persist(key)
    assert backend._client.pttl(key) == -1
    assert backend.get(ORIGIN) == RECORD  # still read
    backend.put(ORIGIN, RECORD)
    assert backend._client.pttl(key) > 0
    backend.close()


@pytest.fixture
def blackhole() -> Iterator[int]:
    """A local socket that accepts connections (the kernel's backlog does) and never
    answers a byte: what a stalled Redis or a dropped route looks like."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield sock.getsockname()[1]


def test_redis_blackholed_calls_are_misses(
    blackhole: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Every call returns (a miss, a local lease) after the per-call timeout instead of
    hanging, raises nothing, and one WARNING says so. Run in a thread so a hang fails
    the test instead of stalling the suite."""
    results: list[object] = []

    def calls() -> None:
        backend = RedisStorage.from_url(f"redis://:pw@127.0.0.1:{blackhole}/0", Config())
        results.append(backend.get(ORIGIN))
        backend.put(ORIGIN, RECORD)
        results.append(backend.get(ORIGIN))
        results.append(backend.acquire_lease(ORIGIN, "p1", 30))
        results.append(backend.renew_lease(ORIGIN, "p1", 30))
        results.append(backend.degraded)
        backend.close()

    with caplog.at_level(logging.WARNING, logger="scrapy_rep"):
        worker = threading.Thread(target=calls, daemon=True)
        worker.start()
        worker.join(timeout=60)
    assert not worker.is_alive(), "a blackholed Redis hung the caller"
    assert results == [None, RECORD, True, True, True]
    warnings = [r.getMessage() for r in ours(caplog)]
    assert len(warnings) == 1 and "Timeout" in warnings[0], warnings


# -- records -----------------------------------------------------------------------------


def test_a_zip_bomb_costs_no_more_than_the_limit(
    store: RobotsStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """64 MiB of spaces in a 64 KiB stored value: zlib stops producing output at the
    record limit (a few hundred KiB), not after the 64 MiB."""
    bomb = zlib.compress(b"{" + b" " * (64 * 1024 * 1024), 9)
    produced: list[int] = []
    real = zlib.decompressobj

    class Counting:
        def __init__(self) -> None:
            self._inflater = real()

        def decompress(self, data: bytes, max_length: int = 0) -> bytes:
            out = self._inflater.decompress(data, max_length)
            produced.append(len(out))
            return out

        @property
        def unconsumed_tail(self) -> bytes:
            return self._inflater.unconsumed_tail

        @property
        def eof(self) -> bool:
            return self._inflater.eof

    monkeypatch.setattr(codec.zlib, "decompressobj", Counting)
    assert codec.unpack_record(bomb) is None
    assert 0 < sum(produced) <= codec.MAX_DECODED + 1
    produced.clear()
    write_raw(store, ORIGIN, bomb)
    assert store.get(ORIGIN) is None
    assert 0 < sum(produced) <= codec.MAX_DECODED + 1
    # a real record of the largest body REP_MAX_SIZE allows still fits the limit
    biggest = RECORD.evolve(body=os.urandom(512_000))
    assert codec.unpack_record(codec.pack_record(biggest)) == biggest
