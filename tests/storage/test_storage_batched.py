"""The batched store calls a robots.txt fetch makes (lease + re-read, write + release).

Redis pipelines each pair into one round trip; every other store gets the two plain
calls. Both must keep the contract of the plain calls, on every backend and through a
Redis outage.
"""

from __future__ import annotations

import logging

import pytest

from scrapy_rep.policy.config import Config
from scrapy_rep.policy.records import OriginRecord
from scrapy_rep.storage.base import MemoryStorage, RobotsStorage
from scrapy_rep.storage.redis_store import RedisStorage
from tests.storage.test_storage import RECORD, private_redis_server, redis_server, store
from tests.support.redis_server import RedisServer

__all__ = ["private_redis_server", "redis_server", "store"]  # fixtures used below

ORIGIN = "https://batched.test"


def test_lease_and_reread_on_an_empty_store(store: RobotsStorage) -> None:
    assert store.acquire_lease_and_get(ORIGIN, "p1", 60) == (True, None)
    # single flight: another holder is refused, the holder itself keeps it
    assert store.acquire_lease_and_get(ORIGIN, "p2", 60) == (False, None)
    assert store.acquire_lease_and_get(ORIGIN, "p1", 60)[0] is True


def test_write_and_release(store: RobotsStorage) -> None:
    assert store.acquire_lease_and_get(ORIGIN, "p1", 60)[0]
    store.put_and_release_lease(ORIGIN, RECORD, "p1")
    assert store.get(ORIGIN) == RECORD
    assert store.acquire_lease(ORIGIN, "p2", 60)  # the lease was given up


def test_release_by_another_holder_keeps_the_lease(store: RobotsStorage) -> None:
    assert store.acquire_lease(ORIGIN, "p1", 60)
    store.put_and_release_lease(ORIGIN, RECORD, "p2")
    assert store.get(ORIGIN) == RECORD
    assert not store.acquire_lease(ORIGIN, "p3", 60)


def test_reread_sees_what_another_process_stored(store: RobotsStorage) -> None:
    store.put(ORIGIN, RECORD)
    held, record = store.acquire_lease_and_get(ORIGIN, "p1", 60)
    assert held
    # shared stores read again (one fetch then serves every process); a process-local
    # store has nothing another process could have written
    assert record == (RECORD if store.shared else None)


def test_redis_pipelines_each_pair(redis_server: RedisServer) -> None:
    backend = RedisStorage.from_url(redis_server.url, Config())
    backend._client.flushdb()
    backend._client.config_resetstat()
    assert backend.acquire_lease_and_get(ORIGIN, "p1", 60) == (True, None)
    backend.put_and_release_lease(ORIGIN, RECORD, "p1")
    assert backend.get(ORIGIN) == RECORD
    calls = {
        name.removeprefix("cmdstat_"): stats["calls"]
        for name, stats in backend._client.info("commandstats").items()
    }
    # [SET NX, GET lease, GET record], [SET record, the release script (a GET and a DEL
    # inside)], then our own GET: no command beyond the two pipelines' own
    assert (calls.get("set"), calls.get("get"), calls.get("del")) == (2, 4, 1), calls
    assert "script|exists" not in calls, calls  # no hidden extra round trip
    backend.close()


def test_redis_outage_uses_the_local_fallback(
    private_redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    backend = RedisStorage.from_url(private_redis_server.url, Config(), reconnect_interval=0)
    caplog.set_level(logging.DEBUG, logger="scrapy_rep.storage.redis_store")
    private_redis_server.stop()
    assert backend.acquire_lease_and_get(ORIGIN, "p1", 60) == (True, None)
    assert backend.acquire_lease_and_get(ORIGIN, "p2", 60) == (False, None)
    record = OriginRecord(kind=RECORD.kind, body=b"User-agent: *\nDisallow: /\n")
    backend.put_and_release_lease(ORIGIN, record, "p1")
    assert backend.get(ORIGIN) == record  # the outage-era copy answers
    assert backend.acquire_lease_and_get(ORIGIN, "p2", 60) == (True, record)
    assert backend.degraded
    backend.close()


def test_stores_without_batched_calls_get_the_plain_ones() -> None:
    class PlainStore(MemoryStorage):
        shared = True  # as a user's shared store would be

    plain = PlainStore()
    # (the base class's default: the two plain calls)
    assert type(plain).acquire_lease_and_get is RobotsStorage.acquire_lease_and_get
    plain.put(ORIGIN, RECORD)
    assert plain.acquire_lease_and_get(ORIGIN, "p1", 60) == (True, RECORD)
    plain.put_and_release_lease(ORIGIN, RECORD, "p1")
    assert plain.acquire_lease(ORIGIN, "p2", 60)
