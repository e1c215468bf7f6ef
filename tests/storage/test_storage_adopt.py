"""Adopting parked requests on real stores (SQLite file, redis-server) when several dead
owners' entries, and the adopter's own, share a request key: one request comes out.

``park`` takes a key over from other owners, so it never leaves such duplicates; adopt
collapses them all the same, whatever wrote them. The dead owners' entries are written
straight into the store (no heartbeat: their owners count as dead)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from scrapy_rep.policy.config import Config
from scrapy_rep.storage.cluster import Parked, SpiderCluster
from scrapy_rep.storage.factory import create_storage
from scrapy_rep.storage.redis_store import RedisStorage
from scrapy_rep.storage.sqlite_store import SqliteStorage
from tests.support import redis_server as redis_helper
from tests.support.redis_server import RedisServer

redis_server = redis_helper.redis_server

ORIGIN = "http://a.test"
#: Dead owners' entries: k0 under two of them, k1 also held by the adopter.
DEAD = {"D1": ["k0", "k1", "k2"], "D2": ["k0", "k3"], "D3": ["k0"]}

PutDead = Callable[[str, str], None]  # (owner, key): park an entry under a dead owner


def blob(owner: str, key: str) -> bytes:
    return f"{key} parked by {owner}".encode()


@pytest.fixture(params=["sqlite", "redis"])
def store_and_put_dead(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[SpiderCluster, PutDead]]:
    spider = f"spider-{time.monotonic_ns()}"
    if request.param == "sqlite":
        store = create_storage(Config(storage=f"sqlite:{tmp_path / 'store.db'}"))
        assert isinstance(store, SqliteStorage)
        cluster = store.cluster(spider)  # creates the cluster file and its tables
        conn = sqlite3.connect(store.cluster_path, isolation_level=None)

        def put_dead(owner: str, key: str) -> None:  # no heartbeat row: a dead owner
            conn.execute(
                "INSERT INTO parked (spider, owner, key, origin, blob) VALUES (?, ?, ?, ?, ?)",
                (spider, owner, key, ORIGIN, blob(owner, key)),
            )

        yield cluster, put_dead
        conn.close()
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        store = create_storage(Config(storage=server.url))
        assert isinstance(store, RedisStorage)
        cluster = store.cluster(spider)
        client = redis.Redis.from_url(server.url)
        prefix = RedisStorage.cluster_prefix(spider)

        def put_dead(owner: str, key: str) -> None:  # no alive: key: a dead owner
            client.sadd(f"{prefix}owners", owner)
            client.hset(f"{prefix}parked:{owner}", key, ORIGIN.encode() + b"\n" + blob(owner, key))

        yield cluster, put_dead
        client.close()
    store.close()


def test_duplicates_of_dead_owners_collapse_into_one_adopted_request(
    store_and_put_dead: tuple[SpiderCluster, PutDead],
) -> None:
    cluster, put_dead = store_and_put_dead
    held: Parked = ("k1", ORIGIN, b"k1 parked by B")
    cluster.park("B", 60, [held], [])
    for owner, keys in DEAD.items():
        for key in keys:
            put_dead(owner, key)

    adopted = cluster.adopt("B", 60, 100)

    # One k0 (whichever dead owner's copy came first), k2 and k3; k1 B holds already.
    assert sorted(key for key, _, _ in adopted) == ["k0", "k2", "k3"]
    bodies = {key: body for key, _, body in adopted}
    assert bodies["k0"] in {blob(owner, "k0") for owner in DEAD}
    assert sorted(cluster.parked("B")) == sorted([held, *adopted])
    assert sorted(key for key, _, _ in cluster.parked()) == ["k0", "k1", "k2", "k3"]
    assert cluster.adopt("B", 60, 100) == []  # the duplicates went, none left behind
