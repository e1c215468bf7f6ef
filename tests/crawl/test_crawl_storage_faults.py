"""Real crawls against a damaged or vanishing persistent store (docs/storage.md).

* a corrupted store is a cache miss (refetch), never a crash or a lost request;
* Redis going away mid-crawl degrades to in-process state without losing requests."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import pytest_twisted
from twisted.internet import defer

from scrapy_rep.policy.config import SettingError
from scrapy_rep.policy.origin import origin_of
from scrapy_rep.storage.redis_store import RedisStorage
from tests.support import redis_server as redis_helper
from tests.support.crawl import DISALLOW_PRIVATE, pages_of
from tests.support.crawl_storage import REP, GatedSpider, warnings_of
from tests.support.redis_server import RedisServer
from tests.support.waits import sleep, wait_until

redis_server = redis_helper.redis_server
private_redis_server = redis_helper.private_redis_server


def redis_client(server: RedisServer) -> Any:
    import redis

    return redis.Redis.from_url(server.url)


# -- a corrupted store is a miss ----------------------------------------------------------


async def crawl_twice_around(
    mockserver: Any, run_crawl: Any, host: str, settings: dict[str, Any], damage: Callable[[], None]
) -> Any:
    """Run 1 stores the rules, ``damage()`` corrupts the store, run 2 crawls 4 pages.
    Returns run 2's crawler after checking that it refetched and lost nothing."""
    mockserver.configure(host, {"robots": {"body": DISALLOW_PRIVATE}})
    await run_crawl([mockserver.url(host, "/first")], settings=settings)
    damage()
    requested = ["/a", "/private/b", "/c", "/private/d"]
    second = await run_crawl([mockserver.url(host, p) for p in requested], settings=settings)
    assert mockserver.count(host, "/robots.txt") == 2
    assert second.stat("robotstxt/request_count") == 1
    assert not second.stat("robotstxt/cache_hit")
    assert sorted(pages_of(mockserver, host)) == ["/a", "/c", "/first"]
    downloaded = len(second.spider.response_urls)
    forbidden = second.stat("robotstxt/forbidden")
    assert (downloaded, forbidden) == (2, 2)
    assert downloaded + forbidden == len(requested)
    assert not second.messages(logging.ERROR)
    return second


@pytest_twisted.ensureDeferred
async def test_junk_over_the_sqlite_file_is_recovered_from(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Path
) -> None:
    db = tmp_path / "store.db"
    settings = {**REP, "REP_STORAGE": f"sqlite:{db}"}

    def damage() -> None:
        assert db.exists()
        db.write_bytes(b"this is not a database\x00\xff" * 500)

    second = await crawl_twice_around(mockserver, run_crawl, host, settings, damage)
    warnings = warnings_of(second)
    assert len(warnings) == 1, warnings
    assert "is unusable" in warnings[0]
    assert "started a fresh store" in warnings[0]
    assert list(tmp_path.glob("store.db.corrupt-*"))
    # The fresh store works: a third run is served from it.
    third = await run_crawl([mockserver.url(host, "/private/e")], settings=settings)
    assert mockserver.count(host, "/robots.txt") == 2
    assert third.stat("robotstxt/cache_hit") == 1
    assert third.stat("robotstxt/forbidden") == 1
    assert not warnings_of(third)


@pytest_twisted.ensureDeferred
async def test_corrupt_sqlite_record_is_a_cache_miss(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Path
) -> None:
    db = tmp_path / "store.db"
    settings = {**REP, "REP_STORAGE": f"sqlite:{db}"}
    origin = origin_of(mockserver.url(host, "/"))

    def damage() -> None:
        with sqlite3.connect(db) as conn:
            changed = conn.execute(
                "UPDATE origins SET record = ? WHERE origin = ?", (b"\x78\x9cjunk", origin)
            ).rowcount
        conn.close()
        assert changed == 1

    second = await crawl_twice_around(mockserver, run_crawl, host, settings, damage)
    assert len(warnings_of(second)) <= 1


@pytest_twisted.ensureDeferred
async def test_corrupt_redis_value_is_a_cache_miss(
    mockserver: Any, run_crawl: Any, host: str, redis_server: RedisServer
) -> None:
    settings = {**REP, "REP_STORAGE": redis_server.url}
    key = RedisStorage.origin_key(origin_of(mockserver.url(host, "/")))
    client = redis_client(redis_server)

    def damage() -> None:
        assert client.exists(key)
        client.set(key, b"\x00garbage{not json")

    try:
        second = await crawl_twice_around(mockserver, run_crawl, host, settings, damage)
    finally:
        client.close()
    assert len(warnings_of(second)) <= 1


@pytest_twisted.ensureDeferred
async def test_redis_key_of_the_wrong_type_logs_one_warning(
    mockserver: Any, run_crawl: Any, host: str, redis_server: RedisServer
) -> None:
    """A key another program turned into a list: Redis answers WRONGTYPE on every read;
    one warning, a refetch, and the new record replaces the bad key."""
    settings = {**REP, "REP_STORAGE": redis_server.url}
    key = RedisStorage.origin_key(origin_of(mockserver.url(host, "/")))
    client = redis_client(redis_server)

    def damage() -> None:
        client.delete(key)
        client.rpush(key, b"junk")

    try:
        second = await crawl_twice_around(mockserver, run_crawl, host, settings, damage)
        assert client.type(key) == b"string"
    finally:
        client.close()
    warnings = warnings_of(second)
    assert len(warnings) == 1, warnings
    assert "WRONGTYPE" in warnings[0]


# -- Redis goes away mid-crawl -------------------------------------------------------------


class QuickProbeRedisStorage(RedisStorage):
    """The Redis store, built by ``REP_STORAGE``'s class import path, probing a Redis
    outage every 0.1 s instead of every 5 s so a short crawl sees several failed
    probes and the recovery. The URL comes from the ``TEST_REDIS_URL`` setting."""

    @classmethod
    def from_config(cls, config: Any, settings: Any) -> RedisStorage:
        return cls.from_url(settings["TEST_REDIS_URL"], config, reconnect_interval=0.1)


@pytest_twisted.ensureDeferred
async def test_redis_outage_mid_crawl_loses_nothing(
    mockserver: Any, run_crawl: Any, private_redis_server: RedisServer
) -> None:
    """Redis is stopped while origin B's robots.txt fetch is in flight and before
    origins C and D are first seen. The crawl carries on with in-process state: one
    warning however many probes fail (no password in it), each robots.txt fetched once,
    every request downloaded or forbidden. Redis then comes back: the store says so once,
    writes back what it learned meanwhile, and origin E's record lands in Redis too."""
    a, b, c, d, e = (mockserver.unique_host(f"outage-{n}") for n in "abcde")
    slow = {"body": DISALLOW_PRIVATE, "delay": 1.0}
    mockserver.configure_many(
        {
            a: {"robots": {"body": DISALLOW_PRIVATE}},
            b: {"robots": slow},
            # Half B's delay: C's and B's answers (each a store write that probes
            # Redis) come at least ~0.4 s apart, so two probes fail.
            c: {"robots": {"body": DISALLOW_PRIVATE, "delay": 0.5}},
            d: {"robots": {"body": "User-agent: *\nDisallow: /\n"}},
            e: {"robots": {"body": DISALLOW_PRIVATE}},
        }
    )

    def u(h: str, path: str) -> str:
        return mockserver.url(h, path)

    phases = [
        [u(a, "/a1"), u(a, "/private/a")],
        [u(b, "/b1"), u(b, "/private/b")],  # B's robots.txt: answered after 1 s
        [
            u(a, "/a2"), u(a, "/private/a2"),
            u(c, "/c1"), u(c, "/private/c"),
            u(d, "/d1"), u(d, "/d2"),
        ],
        [u(e, "/e1"), u(e, "/private/e")],
    ]  # fmt: skip
    gates: list[defer.Deferred[None]] = [defer.Deferred() for _ in phases[1:]]
    probe: list[GatedSpider] = []
    settings = {
        **REP,
        "REP_STORAGE": f"{__name__}.QuickProbeRedisStorage",
        "TEST_REDIS_URL": private_redis_server.url,
    }
    crawl = defer.Deferred.fromCoroutine(
        run_crawl(
            settings=settings,
            spider_cls=GatedSpider,
            spider_kwargs={"phases": phases, "gates": gates, "probe": probe},
        )
    )
    await wait_until(lambda: "/a1" in mockserver.paths(a), "origin A to be crawled")
    gates[0].callback(None)
    await wait_until(lambda: mockserver.count(b, "/robots.txt") == 1, "B's robots.txt fetch")
    private_redis_server.stop()
    gates[1].callback(None)
    spider = probe[0]
    await wait_until(lambda: spider.stat("robotstxt/response_count") == 4, "A-D's robots.txt")
    await wait_until(lambda: len(spider.responses) == 4, "A-D's pages")
    private_redis_server.start()  # empty: no persistence
    await sleep(0.3)  # a probe is due again
    gates[2].callback(None)
    crawler = await crawl

    for h in (a, b, c, d, e):
        assert mockserver.count(h, "/robots.txt") == 1, (h, mockserver.paths(h))
    assert sorted(pages_of(mockserver, a)) == ["/a1", "/a2"]
    assert pages_of(mockserver, b) == ["/b1"]
    assert pages_of(mockserver, c) == ["/c1"]
    assert pages_of(mockserver, d) == []
    assert pages_of(mockserver, e) == ["/e1"]
    requested = sum(len(phase) for phase in phases)
    downloaded = len(crawler.spider.response_urls)
    forbidden = crawler.stat("robotstxt/forbidden")
    assert (downloaded, forbidden) == (5, 7)
    assert downloaded + forbidden == requested
    assert not crawler.stat("robotstxt/dropped_at_close")
    assert not crawler.messages(logging.ERROR)

    outage = [m for m in warnings_of(crawler) if "unreachable" in m]
    assert len(outage) == 1, warnings_of(crawler)
    assert "process-local store" in outage[0]
    # Several probes failed during the outage; each only at DEBUG.
    assert len([m for m in crawler.messages() if "redis still unreachable" in m]) >= 2
    back = [m for m in crawler.messages(logging.INFO) if "reachable again" in m]
    assert len(back) == 1, back
    # What the crawl learned during the outage (B's, C's and D's robots.txt) was
    # written back once Redis answered again, with E's learned afterwards: a next
    # crawl refetches none of them.
    client = redis_client(private_redis_server)
    try:
        for h in (b, c, d, e):
            assert client.exists(RedisStorage.origin_key(origin_of(u(h, "/")))), h
    finally:
        client.close()
    password = private_redis_server.password
    assert password
    assert not any(password in m for m in crawler.messages())


@pytest_twisted.ensureDeferred
async def test_a_redis_password_never_reaches_the_crawl_log(
    mockserver: Any, run_crawl: Any, host: str, private_redis_server: RedisServer
) -> None:
    """A percent-encoded password full of reserved characters, and wrong: the crawl
    does not start (Redis refuses it at start), and logs the store (masked) and Redis's
    refusal, never the password in any form."""
    mockserver.configure(host, {"robots": {"body": DISALLOW_PRIVATE}})
    reserved = "Zq9#Xw/7?Yv@8:Uu%"
    url = f"redis://:{quote(reserved, safe='')}@127.0.0.1:{private_redis_server.port}/0"
    records: list[logging.LogRecord] = []
    handler = _Keep(records)
    logging.getLogger().addHandler(handler)
    try:
        with pytest.raises(SettingError, match="REP_STORAGE") as info:
            await run_crawl([mockserver.url(host, "/a")], {**REP, "REP_STORAGE": url})
    finally:
        logging.getLogger().removeHandler(handler)
    assert pages_of(mockserver, host) == []
    text = "\n".join([*(r.getMessage() for r in records), str(info.value)])
    assert "AuthenticationError" in text
    assert f"redis://:***@127.0.0.1:{private_redis_server.port}/0" in text
    for piece in ("Zq9", "Yv@8", "Uu%", quote(reserved, safe="")):
        assert piece not in text, piece


class _Keep(logging.Handler):
    """Keeps every record (run_crawl keeps them only for a crawl that returns)."""

    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__(logging.DEBUG)
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
