"""Real crawls against the persistent stores (SPEC section 2 caching and unreachable
windows, section 3 "storage"): SQLite files and a real ``redis-server``.

* a second crawl within the TTL is served by the store (no robots.txt request), for
  every product token (the store keeps robots.txt, not verdicts);
* the last good copy stored by a PREVIOUS crawl applies once the origin has been
  unreachable for longer than ``REP_UNREACHABLE_WAIT`` (an injected ``REP_CLOCK``), and
  the unreachable state itself (since when, next retry) survives a restart;
* two crawler processes sharing a store fetch each robots.txt exactly once; a process
  killed while it holds a fetch lease does not strand the others;
* a corrupted store is a cache miss (refetch), never a crash or a lost request;
* Redis going away mid-crawl degrades to in-process state without losing requests."""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet import defer, task

from scrapy_rep._origin import origin_of
from scrapy_rep._storage_redis import RedisStorage
from tests import redis_server as redis_helper
from tests.conftest import RESOLVER_SETTING, TESTS_DIR, ListSpider
from tests.crawl_helpers import DISALLOW_PRIVATE, pages_of
from tests.redis_server import RedisServer

redis_server = redis_helper.redis_server
private_redis_server = redis_helper.private_redis_server

REP: dict[str, Any] = {
    "ADDONS": {"scrapy_rep.Addon": 0},
    "RETRY_ENABLED": False,
    "REP_RETRY_BACKOFF": 0.2,
    "REP_MAX_RETRY_BACKOFF": 0.5,
    "REP_FETCH_TIMEOUT": 3,
}
HOUR = 3600.0
DAY = 24 * HOUR
SPIDER_FILE = TESTS_DIR / "spiders_for_subprocess.py"


# -- helpers -------------------------------------------------------------------------


class ShiftedClock:
    """An epoch clock for ``REP_CLOCK``: real time plus ``offset`` seconds, which the
    test moves forward (time keeps running, so backoff timers still come due).
    Scrapy deep-copies settings, so the copy must be this very object."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def __deepcopy__(self, memo: dict[int, Any]) -> ShiftedClock:
        return self


class GatedSpider(ListSpider):
    """Yields ``phases`` (lists of URLs) one after another; before each later phase it
    waits for the matching Deferred of ``gates``, which the test fires. Appends itself
    to ``probe`` so the test can read its crawler's stats while it runs."""

    name = "gated"

    def __init__(
        self,
        phases: list[list[str]],
        gates: list[defer.Deferred[None]],
        probe: list[GatedSpider],
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.phases = phases
        self.gates = gates
        probe.append(self)

    def stat(self, key: str) -> Any:
        assert self.crawler.stats is not None
        return self.crawler.stats.get_value(key, 0)

    async def start(self) -> AsyncIterator[Any]:
        for index, phase in enumerate(self.phases):
            if index:
                await maybe_deferred_to_future(self.gates[index - 1])
            for url in phase:
                yield self.request_for(url)

    def request_for(self, url: str) -> Any:
        from scrapy import Request

        return Request(url, callback=self.parse, errback=self.on_error)


async def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    """Let the reactor run until ``predicate()`` holds (a guard, not a timing check)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await task.deferLater(_reactor(), 0.05, lambda: None)


def warnings_of(crawler: Any) -> list[str]:
    return crawler.messages(logging.WARNING, logger="scrapy_rep")


@pytest.fixture(params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A ``REP_STORAGE`` value: a fresh SQLite file, or the session's redis-server
    (every test uses fresh hostnames, so its keys are its own)."""
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'store.db'}"
    server: RedisServer = request.getfixturevalue("redis_server")
    return server.url


def redis_client(server: RedisServer) -> Any:
    import redis

    return redis.Redis.from_url(server.url)


# -- a second run is served by the store -----------------------------------------------


@pytest_twisted.ensureDeferred
async def test_second_run_within_ttl_uses_the_stored_rules(
    mockserver: Any, run_crawl: Any, host: str, store: str
) -> None:
    mockserver.configure(host, {"robots": {"body": DISALLOW_PRIVATE}})
    settings = {**REP, "REP_STORAGE": store}
    first = await run_crawl([mockserver.url(host, "/one")], settings=settings)
    assert mockserver.paths(host) == ["/robots.txt", "/one"]
    assert first.stat("robotstxt/request_count") == 1
    assert not first.stat("robotstxt/cache_hit")

    urls = [mockserver.url(host, p) for p in ("/two", "/private/x", "/private")]
    second = await run_crawl(urls, settings=settings)
    # No robots.txt request in the second run, and its stored rules still decide.
    assert mockserver.paths(host) == ["/robots.txt", "/one", "/two"]
    assert not second.stat("robotstxt/request_count")
    assert second.stat("robotstxt/cache_hit") == 1
    assert second.stat("robotstxt/forbidden") == 2
    assert second.spider.response_urls == [mockserver.url(host, "/two")]
    assert second.logged("Forbidden by robots.txt", level=logging.DEBUG)
    assert not warnings_of(second)


# -- the last good copy of a previous run, after the unreachable wait ---------------------


@pytest_twisted.ensureDeferred
async def test_previous_runs_copy_applies_after_the_unreachable_wait(
    mockserver: Any, run_crawl: Any, host: str, store: str
) -> None:
    """Run 1 stores the rules. Run 2, 2 days later, finds them expired; the
    refetch gets 503, so requests wait: not dropped, not downloaded, through several
    retries. Once run 2's clock passes the 12 h REP_UNREACHABLE_WAIT the copy stored by
    run 1 applies: the allowed page is downloaded, the disallowed one dropped."""
    mockserver.configure(host, {"robots": [{"body": DISALLOW_PRIVATE}, {"status": 503}]})
    clock = ShiftedClock()
    settings = {**REP, "REP_STORAGE": store, "REP_CLOCK": clock}
    first = await run_crawl([mockserver.url(host, "/first")], settings=settings)
    assert first.stat("robotstxt/response_status_count/200") == 1
    assert pages_of(mockserver, host) == ["/first"]

    clock.offset = 2 * DAY
    gate: defer.Deferred[None] = defer.Deferred()
    probe: list[GatedSpider] = []
    phases = [
        # The expired copy decides this one while the refetch is in flight (allowed
        # either way); it starts the refetch.
        [mockserver.url(host, "/trigger")],
        # Scheduled once the refetch came back 503: these must wait.
        [mockserver.url(host, "/public"), mockserver.url(host, "/private/x")],
    ]
    crawl = defer.Deferred.fromCoroutine(
        run_crawl(
            settings=settings,
            spider_cls=GatedSpider,
            spider_kwargs={"phases": phases, "gates": [gate], "probe": probe},
        )
    )
    await wait_until(lambda: bool(probe) and probe[0].stat("robotstxt/unreachable") == 1, "503")
    spider = probe[0]
    gate.callback(None)
    await wait_until(lambda: spider.stat("robotstxt/delayed") >= 2, "the requests to be held")
    # They stay held across further robots.txt retries (each one another 503).
    retries = mockserver.count(host, "/robots.txt")
    await wait_until(lambda: mockserver.count(host, "/robots.txt") >= retries + 2, "two retries")
    assert "/public" not in pages_of(mockserver, host)
    assert not spider.stat("robotstxt/forbidden")
    assert not spider.stat("robotstxt/stale_used")

    clock.offset = 2 * DAY + 13 * HOUR  # past REP_UNREACHABLE_WAIT (12 h)
    crawler = await crawl
    assert sorted(pages_of(mockserver, host)) == ["/first", "/public", "/trigger"]
    assert crawler.stat("robotstxt/forbidden") == 1
    assert crawler.stat("robotstxt/stale_used") == 1
    assert crawler.stat("robotstxt/cache_hit") == 1
    assert crawler.stat("robotstxt/unreachable") == 1
    assert crawler.stat("robotstxt/response_status_count/503", 0) >= 3
    assert sorted(crawler.spider.response_urls) == [
        mockserver.url(host, "/public"),
        mockserver.url(host, "/trigger"),
    ]
    assert crawler.logged("using the last good copy", level=logging.INFO, logger="scrapy_rep")
    assert not crawler.stat("robotstxt/dropped_at_close")


async def run_until_held(run_crawl: Any, settings: dict[str, Any], urls: list[str]) -> Any:
    """Crawl ``urls`` until all of them wait on robots.txt, then stop the crawl (a
    restart); returns the stopped crawler."""
    probe: list[GatedSpider] = []
    crawl = defer.Deferred.fromCoroutine(
        run_crawl(
            settings=settings,
            spider_cls=GatedSpider,
            spider_kwargs={"phases": [urls], "gates": [], "probe": probe},
        )
    )
    await wait_until(
        lambda: bool(probe) and probe[0].stat("robotstxt/delayed") == len(urls), "held"
    )
    await deferred_from_coro(probe[0].crawler.stop_async())
    return await crawl


@pytest_twisted.ensureDeferred
async def test_unreachable_state_survives_a_restart(
    mockserver: Any, run_crawl: Any, host: str, store: str
) -> None:
    """The store keeps unreachable-since and next-retry-at: a crawler restarted one
    minute after a 503 (Retry-After: 900) neither refetches robots.txt early nor lets
    requests through; one restarted 13 h after the first 503 does not start a new 12 h
    wait: the last good copy applies at once."""
    unavailable = {"status": 503, "headers": {"Retry-After": "900"}}
    mockserver.configure(host, {"robots": [{"body": DISALLOW_PRIVATE}, unavailable]})
    clock = ShiftedClock()
    settings = {**REP, "REP_STORAGE": store, "REP_CLOCK": clock}
    await run_crawl([mockserver.url(host, "/first")], settings=settings)

    clock.offset = 2 * DAY  # expired: the expired copy decides while it is refetched: 503
    second = await run_crawl([mockserver.url(host, "/second")], settings=settings)
    assert second.stat("robotstxt/unreachable") == 1
    assert second.spider.response_urls == [mockserver.url(host, "/second")]
    assert mockserver.count(host, "/robots.txt") == 2

    clock.offset = 2 * DAY + 60  # the stored retry time (+900 s) is not due yet
    third = await run_until_held(run_crawl, settings, [mockserver.url(host, "/third")])
    assert not third.stat("robotstxt/request_count")
    assert third.stat("robotstxt/cache_hit") == 1
    assert third.stat("robotstxt/dropped_at_close") == 1
    assert mockserver.count(host, "/robots.txt") == 2
    assert "/third" not in mockserver.paths(host)

    clock.offset = 2 * DAY + 13 * HOUR  # 13 h after the first 503 of run 2
    urls = [mockserver.url(host, "/public"), mockserver.url(host, "/private/x")]
    fourth = await run_crawl(urls, settings=settings)
    assert not fourth.stat("robotstxt/delayed")
    assert fourth.stat("robotstxt/stale_used") == 1
    assert fourth.stat("robotstxt/forbidden") == 1
    assert fourth.spider.response_urls == [mockserver.url(host, "/public")]
    # The retry was due: robots.txt was asked for again (still 503) meanwhile.
    assert fourth.stat("robotstxt/response_status_count/503") == 1
    assert sorted(pages_of(mockserver, host)) == ["/first", "/public", "/second"]


@pytest_twisted.ensureDeferred
async def test_one_stored_copy_serves_every_product_token(
    mockserver: Any, run_crawl: Any, host: str, store: str
) -> None:
    """The store keeps robots.txt itself, not one crawler's verdicts: a second crawl
    with another product token is served by the stored copy and obeys its own group."""
    robots = "User-agent: alphabot\nDisallow: /a\n\nUser-agent: betabot\nDisallow: /b\n"
    mockserver.configure(host, {"robots": {"body": robots}})
    urls = [mockserver.url(host, p) for p in ("/a", "/b")]
    settings = {**REP, "REP_STORAGE": store}
    alpha = await run_crawl(urls, settings={**settings, "USER_AGENT": "alphabot/1.0"})
    beta = await run_crawl(urls, settings={**settings, "USER_AGENT": "BetaBot/2.0 (+x)"})
    assert mockserver.count(host, "/robots.txt") == 1
    assert alpha.spider.response_urls == [mockserver.url(host, "/b")]
    assert beta.spider.response_urls == [mockserver.url(host, "/a")]
    assert beta.stat("robotstxt/cache_hit") == 1
    assert (alpha.stat("robotstxt/forbidden"), beta.stat("robotstxt/forbidden")) == (1, 1)


# -- several processes share one store --------------------------------------------------


def start_process(
    tmp_path: Path,
    env: dict[str, str],
    store: str,
    tag: str,
    urls: list[str],
    extra: tuple[str, ...] = (),
) -> tuple[subprocess.Popen[bytes], Path, Path]:
    result = tmp_path / f"result-{tag}.json"
    log = tmp_path / f"log-{tag}.txt"
    config = {"urls": urls, "tag": tag, "gate_dir": str(tmp_path), "result": str(result)}
    with log.open("wb") as log_file:
        command = [
            sys.executable, "-m", "scrapy", "runspider", str(SPIDER_FILE),
            "-s", f"TWISTED_DNS_RESOLVER={RESOLVER_SETTING}",
            "-s", f"REP_STORAGE={store}",
            *extra,
        ]  # fmt: skip
        proc = subprocess.Popen(
            command,
            env={**env, "REP_TEST_CONFIG": json.dumps(config)},
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=log_file,
        )
    return proc, result, log


def wait_for_files(paths: list[Path], procs: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + 60
    while not all(p.exists() for p in paths):
        if any(proc.poll() is not None for proc in procs):
            raise AssertionError("a crawler process exited before it was ready")
        if time.monotonic() > deadline:
            raise AssertionError("crawler processes did not start")
        time.sleep(0.02)


def test_two_processes_fetch_each_robots_txt_once(
    mockserver: Any, tmp_path: Path, subprocess_env: dict[str, str], store: str
) -> None:
    """Two `scrapy runspider` processes start their requests at the same moment (a
    file barrier) against 5 origins whose robots.txt answers after 1 s: whichever
    process takes an origin's lease fetches it, the other waits on the shared store.
    Each robots.txt is requested once in all, and both processes decide alike."""
    hosts = [mockserver.unique_host(f"procs-{i}") for i in range(5)]
    robots = {"body": DISALLOW_PRIVATE, "delay": 1.0}
    mockserver.configure_many({h: {"robots": robots} for h in hosts})
    paths = ["/a", "/b", "/private/c"]
    urls = [mockserver.url(h, p) for p in paths for h in hosts]
    procs, results, logs = [], [], []
    try:
        for tag in ("one", "two"):
            proc, result, log = start_process(tmp_path, subprocess_env, store, tag, urls)
            procs.append(proc)
            results.append(result)
            logs.append(log)
        wait_for_files([tmp_path / "ready-one", tmp_path / "ready-two"], procs)
        (tmp_path / "go").write_text("go")
        for proc in procs:
            proc.wait(timeout=60)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for proc, log in zip(procs, logs, strict=True):
        assert proc.returncode == 0, log.read_text()[-3000:]

    for h in hosts:
        assert mockserver.count(h, "/robots.txt") == 1, (h, mockserver.paths(h))
        received = sorted(p for p in mockserver.paths(h) if p != "/robots.txt")
        assert received == ["/a?p=one", "/a?p=two", "/b?p=one", "/b?p=two"]

    outcomes = [json.loads(result.read_text()) for result in results]
    fetched = 0
    for tag, outcome in zip(("one", "two"), outcomes, strict=True):
        stats = outcome["stats"]
        assert outcome["reason"] == "finished"
        expected = sorted(mockserver.url(h, f"{p}?p={tag}") for h in hosts for p in ("/a", "/b"))
        assert outcome["downloaded"] == expected
        assert stats["robotstxt/forbidden"] == len(hosts)
        assert outcome["failed"] == sorted(
            ["IgnoreRequest", "Forbidden by robots.txt", mockserver.url(h, f"/private/c?p={tag}")]
            for h in hosts
        )
        # Both started before any robots.txt was known: every request waited.
        assert stats["robotstxt/delayed"] == len(urls)
        assert stats["robotstxt/released"] == len(urls)
        assert "robotstxt/dropped_at_close" not in stats
        fetched += stats.get("robotstxt/request_count", 0)
    assert fetched == len(hosts)


def stored_lease_expiry(store: str, origin: str) -> float:
    """When the fetch lease of ``origin`` in ``store`` expires (0: no lease)."""
    if store.startswith("sqlite:"):
        conn = sqlite3.connect(store.removeprefix("sqlite:"))
        try:
            row = conn.execute(
                "SELECT expires_at FROM leases WHERE origin = ?", (origin,)
            ).fetchone()
        finally:
            conn.close()
        return 0.0 if row is None else float(row[0])
    import redis

    client = redis.Redis.from_url(store)
    try:
        ttl_ms = client.pttl(RedisStorage.lease_key(origin))
    finally:
        client.close()
    return 0.0 if ttl_ms < 0 else time.time() + ttl_ms / 1000


@pytest_twisted.ensureDeferred
async def test_a_dead_lease_holder_does_not_strand_the_others(
    mockserver: Any,
    run_crawl: Any,
    host: str,
    tmp_path: Path,
    subprocess_env: dict[str, str],
    store: str,
) -> None:
    """A crawler process is killed (SIGKILL) while it holds an origin's fetch lease
    (REP_LEASE_TIMEOUT=3). Another crawler sharing the store waits on that lease, takes
    it over when it expires, fetches robots.txt itself and crawls normally."""
    hanging = {"body": DISALLOW_PRIVATE, "delay": 10}
    mockserver.configure(host, {"robots": [hanging, {"body": DISALLOW_PRIVATE}]})
    (tmp_path / "go").write_text("go")
    urls = [mockserver.url(host, "/a")]
    proc, _, log = start_process(
        tmp_path, subprocess_env, store, "doomed", urls, ("-s", "REP_LEASE_TIMEOUT=3")
    )
    try:
        await wait_until(
            lambda: mockserver.count(host, "/robots.txt") == 1 or proc.poll() is not None,
            "the doomed process's robots.txt request",
            timeout=60,
        )
        assert proc.poll() is None, log.read_text()[-3000:]
    finally:
        proc.kill()
        proc.wait()

    # The dead process's lease is still in the store, so the next crawl has to wait.
    assert stored_lease_expiry(store, origin_of(mockserver.url(host, "/"))) > time.time()

    urls = [mockserver.url(host, "/b"), mockserver.url(host, "/private/c")]
    crawler = await run_crawl(urls, settings={**REP, "REP_STORAGE": store})
    assert mockserver.paths(host) == ["/robots.txt", "/robots.txt", "/b"]
    assert crawler.stat("robotstxt/request_count") == 1
    assert crawler.stat("robotstxt/forbidden") == 1
    assert crawler.spider.response_urls == [mockserver.url(host, "/b")]


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
    every request downloaded or forbidden. Redis then comes back: the store says so once
    and origin E's record lands in Redis again."""
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
    await task.deferLater(_reactor(), 0.3, lambda: None)  # a probe is due again
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
    client = redis_client(private_redis_server)
    try:
        assert client.exists(RedisStorage.origin_key(origin_of(u(e, "/"))))
        assert not client.exists(RedisStorage.origin_key(origin_of(u(c, "/"))))
    finally:
        client.close()
    password = private_redis_server.password
    assert password
    assert not any(password in m for m in crawler.messages())


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor
