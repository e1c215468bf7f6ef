"""The cluster primitives on real stores (SQLite file, redis-server): parked requests,
heartbeats and adoption, Crawl-delay turns. Several owners are several store objects,
each with its own connection, as separate processes would have."""

from __future__ import annotations

import itertools
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scrapy_rep.crawl.durable_waiting import open_cluster
from scrapy_rep.storage.cluster import ClusterError, ClusterStore, SpiderCluster
from scrapy_rep.storage.redis_store import RedisStorage
from scrapy_rep.storage.sqlite_store import SqliteStorage
from tests.support import redis_server as redis_helper
from tests.support.redis_server import RedisServer

redis_server = redis_helper.redis_server

Opener = Callable[[], ClusterStore]


@pytest.fixture(params=["sqlite", "redis"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens another connection to one fresh cluster store (one spider name per test)."""
    spider = f"spider-{request.node.name}-{time.monotonic_ns()}"
    if request.param == "sqlite":
        spec = f"sqlite:{tmp_path / 'store.db'}"
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        spec = server.url
    opened: list[ClusterStore] = []

    def open_one() -> ClusterStore:
        store = open_cluster(spec, spider)
        assert store is not None
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.close()


def entries(n: int, prefix: str = "k") -> list[tuple[str, str, bytes]]:
    return [(f"{prefix}{i}", "http://a.test", f"blob-{prefix}{i}".encode()) for i in range(n)]


def test_a_live_owner_keeps_its_entries_and_a_dead_ones_are_adopted_once(opener: Opener) -> None:
    a, b, c = opener(), opener(), opener()
    a.park("A", 60, entries(3), [])
    assert b.adopt("B", 60, 100) == []  # A beats: nothing to adopt
    a.retire("A", keep=True)  # A stops without handing back: entries stay, heartbeat goes
    adopted = b.adopt("B", 60, 100)
    assert sorted(adopted) == sorted(entries(3))
    assert c.adopt("C", 60, 100) == []  # adoption moved them: nobody gets them twice
    assert sorted(b.parked("B")) == sorted(entries(3))
    assert a.parked("A") == []


def test_an_expired_heartbeat_is_a_dead_owner(opener: Opener) -> None:
    a, b = opener(), opener()
    a.park("A", 0.2, entries(2), [])
    deadline = time.monotonic() + 10
    adopted: list[tuple[str, str, bytes]] = []
    while not adopted:
        assert time.monotonic() < deadline, "the heartbeat never expired"
        adopted = b.adopt("B", 60, 100)
        time.sleep(0.05)
    assert sorted(adopted) == sorted(entries(2))


def test_removed_entries_are_not_adopted_and_retire_without_keep_clears(opener: Opener) -> None:
    a, b = opener(), opener()
    a.park("A", 60, entries(4), [])
    a.park("A", 60, [], ["k0", "k2"])
    a.retire("A", keep=True)
    assert sorted(k for k, _, _ in b.adopt("B", 60, 100)) == ["k1", "k3"]
    b.retire("B", keep=False)
    assert b.parked() == []


def test_a_duplicate_of_a_held_request_collapses_on_adoption(opener: Opener) -> None:
    a, b = opener(), opener()
    a.park("A", 60, entries(3), [])
    # B holds k0 too: its park takes A's k0 over, so the copies collapse there (adopt's
    # own collapse of duplicates is tested in tests/storage/test_storage_adopt.py)
    b.park("B", 60, entries(1), [])
    a.retire("A", keep=True)
    assert sorted(k for k, _, _ in b.adopt("B", 60, 100)) == ["k1", "k2"]
    assert sorted(k for k, _, _ in b.parked()) == ["k0", "k1", "k2"]


def test_adoption_is_bounded_per_call_and_finds_every_entry(opener: Opener) -> None:
    """400 entries (a Redis hash past its compact encoding, so HSCAN pages through
    buckets): each call takes at most its limit, and never comes back empty while
    entries are left."""
    a, b = opener(), opener()
    a.park("A", 60, entries(400), [])
    a.retire("A", keep=True)
    got: list[tuple[str, str, bytes]] = []
    while len(got) < 400:
        batch = b.adopt("B", 60, 50)
        assert 0 < len(batch) <= 50, len(got)
        got.extend(batch)
    assert sorted(got) == sorted(entries(400))
    assert b.adopt("B", 60, 50) == []


def test_concurrent_adopters_never_share_an_entry(opener: Opener) -> None:
    a = opener()
    a.park("A", 60, entries(300), [])
    a.retire("A", keep=True)
    adopters = [opener() for _ in range(4)]
    results: dict[int, list[str]] = {i: [] for i in range(4)}

    def run(i: int) -> None:
        for _ in range(50):
            results[i].extend(k for k, _, _ in adopters[i].adopt(f"B{i}", 60, 25))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [k for keys in results.values() for k in keys]
    assert sorted(everything) == sorted(k for k, _, _ in entries(300))


def test_turns_are_spaced_and_bounded_by_the_horizon(opener: Opener) -> None:
    stores = [opener() for _ in range(3)]
    answers: list[tuple[bool, float]] = []
    lock = threading.Lock()

    def run(store: ClusterStore) -> None:
        for _ in range(5):
            answer = store.reserve_turn("http://delay.test", 1.0, 3.5)
            with lock:
                answers.append(answer)

    threads = [threading.Thread(target=run, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    reserved = sorted(wait for ok, wait in answers if ok)
    # turns 0, 1, 2, 3 s ahead fit the 3.5 s horizon; the others were refused
    assert len(reserved) == 4
    for earlier, later in itertools.pairwise(reserved):
        # waits are measured at slightly different moments: each is at most the
        # few milliseconds of the calls between them short of a whole second
        assert later - earlier > 0.9
    refused = [wait for ok, wait in answers if not ok]
    assert len(refused) == 11 and all(wait > 0 for wait in refused)


def test_an_absurd_or_unreadable_next_time_is_not_obeyed(
    opener: Opener, request: pytest.FixtureRequest
) -> None:
    store = opener()
    store.reserve_turn("http://x.test", 1.0, 10.0)
    assert isinstance(store, SpiderCluster)
    backend = store.store
    if isinstance(backend, RedisStorage):
        key = f"{backend.cluster_prefix(store.spider)}turn:http://x.test"
        backend._client.set(key, str(time.time() + 10**9))
        assert store.reserve_turn("http://x.test", 1.0, 10.0) == (True, pytest.approx(0, abs=0.05))
        backend._client.set(key, "abc")
        assert store.reserve_turn("http://x.test", 1.0, 10.0)[0]
    else:
        assert isinstance(backend, SqliteStorage)
        conn = sqlite3.connect(backend.cluster_path)
        conn.execute("UPDATE turns SET next_at = ?", (time.time() + 10**9,))
        conn.commit()
        assert store.reserve_turn("http://x.test", 1.0, 10.0) == (True, pytest.approx(0, abs=0.05))
        conn.execute("UPDATE turns SET next_at = 'abc'")
        conn.commit()
        conn.close()
        assert store.reserve_turn("http://x.test", 1.0, 10.0)[0]


def test_spiders_sharing_a_store_do_not_adopt_each_other(tmp_path: Path) -> None:
    spec = f"sqlite:{tmp_path / 'store.db'}"
    one, two = open_cluster(spec, "one"), open_cluster(spec, "two")
    assert one is not None and two is not None
    one.park("A", 60, entries(2), [])
    one.retire("A", keep=True)
    assert two.adopt("B", 60, 10) == []
    again = open_cluster(spec, "one")
    assert again is not None and len(again.adopt("C", 60, 10)) == 2
    for store in (one, two, again):
        store.close()


def test_an_unreachable_redis_raises_cluster_error(refused_port: int) -> None:
    store = open_cluster(f"redis://127.0.0.1:{refused_port}/0", "s")
    assert store is not None
    with pytest.raises(ClusterError):
        store.park("A", 1, entries(1), [])
    with pytest.raises(ClusterError):
        store.reserve_turn("http://a.test", 1, 1)


def test_stores_that_are_not_shared_have_no_cluster() -> None:
    assert open_cluster("memory", "s") is None
