"""Fetch leases in real crawls (docs/cluster.md, leases), and a blackholed Redis.

* the running fetch renews its short lease, so a robots.txt slower than the lease is
  still fetched once, and nobody else takes it meanwhile;
* waiting on another holder's lease for more than a few seconds is logged at INFO,
  once per origin, naming the holder; the lease is taken over when it runs out;
* a Redis that accepts connections and never answers does not stop the crawl.

Killed holders (kill -9, SIGSTOP) are in test_crawl_storage_kills.py."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
import pytest_twisted
from twisted.internet import defer

from scrapy_rep.policy.config import Config, SettingError
from scrapy_rep.policy.origin import origin_of
from scrapy_rep.storage.base import RobotsStorage, describe_holder
from scrapy_rep.storage.redis_store import RedisStorage
from scrapy_rep.storage.sqlite_store import SqliteStorage
from tests.support import redis_server as redis_helper
from tests.support.crawl import DISALLOW_PRIVATE, pages_of
from tests.support.crawl_storage import REP, store, warnings_of
from tests.support.waits import sleep, wait_until

redis_server = redis_helper.redis_server  # the `store` fixture's redis-server

__all__ = ["store"]  # a fixture used below

#: Another machine's crawler, alive as far as this machine can tell.
REMOTE_HOLDER = "crawler-b+0000:4242:77:feedbeef"


def open_store(spec: str) -> RobotsStorage:
    """A second handle on the crawl's store, as another process would have."""
    if spec.startswith("sqlite:"):
        return SqliteStorage(spec.removeprefix("sqlite:"))
    return RedisStorage.from_url(spec, Config())


@pytest.mark.slow
@pytest_twisted.ensureDeferred
async def test_a_running_fetch_renews_its_lease(
    mockserver: Any, run_crawl: Any, host: str, store: str
) -> None:
    """robots.txt answers after 5 s; the lease lasts 2 s and is renewed every 0.25 s.
    Three seconds into the fetch (past the first lease), another holder still cannot
    take the lease, which names this process; the fetch ends once, and the lease is
    given up with the result."""
    mockserver.configure(host, {"robots": {"body": DISALLOW_PRIVATE, "delay": 5.0}})
    origin = origin_of(mockserver.url(host, "/"))
    settings = {
        **REP,
        "REP_STORAGE": store,
        "REP_FETCH_TIMEOUT": 10,
        "REP_LEASE_TTL": 2,
        "REP_LEASE_RENEW_INTERVAL": 0.25,
    }
    other = open_store(store)
    try:
        crawl = defer.Deferred.fromCoroutine(
            run_crawl([mockserver.url(host, "/a"), mockserver.url(host, "/private/b")], settings)
        )
        await wait_until(lambda: mockserver.count(host, "/robots.txt") == 1, "the fetch")
        await sleep(3.0)
        assert mockserver.count(host, "/robots.txt") == 1
        holder = other.lease_holder(origin)  # type: ignore[attr-defined]
        assert holder is not None and describe_holder(holder).endswith("on this machine")
        assert not other.acquire_lease(origin, REMOTE_HOLDER, 1)
        crawler = await crawl
        assert other.lease_holder(origin) is None  # type: ignore[attr-defined]
    finally:
        other.close()
    assert mockserver.count(host, "/robots.txt") == 1
    assert pages_of(mockserver, host) == ["/a"]
    assert crawler.stat("robotstxt/forbidden") == 1
    assert not crawler.messages(logging.WARNING, logger="scrapy_rep")


@pytest.mark.slow
@pytest_twisted.ensureDeferred
async def test_waiting_on_another_holder_is_logged_once_then_taken_over(
    mockserver: Any, run_crawl: Any, host: str, store: str
) -> None:
    """Another machine's crawler holds the origin's lease for 7 more seconds and never
    finishes. After a few seconds of waiting the crawl says so at INFO (once, naming
    the holder), takes the lease over when it runs out, and crawls normally."""
    mockserver.configure(host, {"robots": {"body": DISALLOW_PRIVATE}})
    origin = origin_of(mockserver.url(host, "/"))
    other = open_store(store)
    try:
        assert other.acquire_lease(origin, REMOTE_HOLDER, 7)
    finally:
        other.close()
    urls = [mockserver.url(host, p) for p in ("/a", "/b", "/private/c")]
    crawler = await run_crawl(urls, {**REP, "REP_STORAGE": store}, timeout=60)
    assert mockserver.count(host, "/robots.txt") == 1
    assert sorted(pages_of(mockserver, host)) == ["/a", "/b"]
    waits = [m for m in crawler.messages(logging.INFO) if "holds its fetch lease" in m]
    assert len(waits) == 1, waits
    assert origin in waits[0] and "pid 4242 on crawler-b" in waits[0]
    assert "REP_LEASE_TTL" in waits[0]
    assert not warnings_of(crawler)


@pytest.fixture
def blackholed_redis() -> Iterator[str]:
    """A redis URL whose server accepts connections (the kernel's backlog does) and
    never answers a byte."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        yield f"redis://:blackhole-pw@127.0.0.1:{sock.getsockname()[1]}/0"


class UncheckedRedisStorage(RedisStorage):
    """The Redis store built by ``REP_STORAGE``'s class import path, so the start-up
    check (storage/factory.py, for a redis:// URL) does not run: the crawl meets the
    blackhole as it would meet one that went silent after start. The URL comes from
    the ``TEST_REDIS_URL`` setting."""

    @classmethod
    def from_config(cls, config: Any, settings: Any) -> RedisStorage:
        return cls.from_url(settings["TEST_REDIS_URL"], config)


@pytest_twisted.ensureDeferred
async def test_a_blackholed_redis_once_running_does_not_stop_the_crawl(
    mockserver: Any, run_crawl: Any, blackholed_redis: str
) -> None:
    """Every Redis call times out (short per-call timeouts), the store answers from
    process memory, and every origin is crawled: each robots.txt fetched once, every
    request downloaded or forbidden, one WARNING without the password."""
    hosts = [mockserver.unique_host(f"blackhole-{i}") for i in range(4)]
    mockserver.configure_many({h: {"robots": {"body": DISALLOW_PRIVATE}} for h in hosts})
    urls = [mockserver.url(h, p) for h in hosts for p in ("/a", "/private/b")]
    settings = {
        **REP,
        "REP_STORAGE": f"{__name__}.UncheckedRedisStorage",
        "TEST_REDIS_URL": blackholed_redis,
    }
    started = time.monotonic()
    crawler = await run_crawl(urls, settings, timeout=60)
    elapsed = time.monotonic() - started
    for h in hosts:
        assert mockserver.count(h, "/robots.txt") == 1
        assert pages_of(mockserver, h) == ["/a"]
    assert crawler.stat("robotstxt/forbidden") == len(hosts)
    warnings = warnings_of(crawler)
    assert len(warnings) == 1 and "unreachable" in warnings[0], warnings
    assert "blackhole-pw" not in "\n".join(crawler.messages())
    print(f"blackholed-redis crawl of {len(hosts)} origins took {elapsed:.1f} s")


@pytest.mark.slow
@pytest_twisted.ensureDeferred
async def test_a_blackholed_redis_at_start_stops_the_crawl(
    mockserver: Any, run_crawl: Any, blackholed_redis: str
) -> None:
    """The same blackhole named by its URL: at start it is most likely a mistake, so
    the crawl does not start (after a few seconds of retries) and sends nothing; the
    error names REP_STORAGE with the password masked."""
    host = mockserver.unique_host("blackhole-start")
    mockserver.configure(host, {"robots": {"body": DISALLOW_PRIVATE}})
    with pytest.raises(SettingError, match="REP_STORAGE") as info:
        await run_crawl([mockserver.url(host, "/a")], {**REP, "REP_STORAGE": blackholed_redis})
    assert "the store does not answer" in str(info.value)
    assert "redis://:***@127.0.0.1:" in str(info.value)
    assert "blackhole-pw" not in str(info.value)
    assert mockserver.paths(host) == []
