"""Real crawls against the persistent stores (docs/behaviour.md: caching and unreachable
windows, section 3 "storage"): what one crawl stores, the next crawl uses.

* a second crawl within the TTL is served by the store (no robots.txt request), for
  every product token (the store keeps robots.txt, not verdicts);
* the last good copy stored by a PREVIOUS crawl applies once the origin has been
  unreachable for longer than ``REP_UNREACHABLE_WAIT`` (an injected ``REP_CLOCK``), and
  the unreachable state itself (since when, next retry) survives a restart.

Several processes sharing a store: test_crawl_storage_shared.py; corrupt data and
outages: test_crawl_storage_faults.py."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest_twisted
from scrapy.utils.defer import deferred_from_coro
from twisted.internet import defer

from tests.support import redis_server as redis_helper
from tests.support.crawl import DISALLOW_PRIVATE, pages_of
from tests.support.crawl_storage import REP, GatedSpider, store, warnings_of
from tests.support.waits import wait_until

redis_server = redis_helper.redis_server  # the `store` fixture's redis-server

__all__ = ["store"]  # a fixture used below

HOUR = 3600.0
DAY = 24 * HOUR


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
        # No copy decides this one before the refetch answers (the stored copy has
        # expired); it starts the refetch, which answers 503, so it waits too.
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
    # (/trigger is held too, from before the 503)
    await wait_until(lambda: spider.stat("robotstxt/delayed") >= 3, "the requests to be held")
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
    assert crawler.stat("robotstxt/download_status_count/503", 0) >= 3
    assert sorted(crawler.spider.response_urls) == [
        mockserver.url(host, "/public"),
        mockserver.url(host, "/trigger"),
    ]
    assert crawler.logged("using the last good copy", level=logging.INFO, logger="scrapy_rep")
    assert not crawler.stat("robotstxt/dropped_at_close")


async def run_until_held(
    run_crawl: Any, settings: dict[str, Any], urls: list[str], *, unreachable: bool = False
) -> Any:
    """Crawl ``urls`` until all of them wait on robots.txt (and, with ``unreachable``,
    until its fetch came back unreachable), then stop the crawl (a restart); returns the
    stopped crawler."""
    probe: list[GatedSpider] = []
    crawl = defer.Deferred.fromCoroutine(
        run_crawl(
            settings=settings,
            spider_cls=GatedSpider,
            spider_kwargs={"phases": [urls], "gates": [], "probe": probe},
        )
    )
    await wait_until(
        lambda: (
            bool(probe)
            and probe[0].stat("robotstxt/delayed") == len(urls)
            and (not unreachable or probe[0].stat("robotstxt/unreachable") == 1)
        ),
        "held",
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
    # The third run is stopped while its request waits: dropped, not kept in the store
    # for the fourth run (that is tests/cluster/test_cluster_held.py's subject).
    settings = {**REP, "REP_STORAGE": store, "REP_CLOCK": clock, "REP_DURABLE_WAITING": False}
    await run_crawl([mockserver.url(host, "/first")], settings=settings)

    # Expired: the request waits for the refetch (no expired copy decides), which
    # answers 503; the run is stopped while its request waits (dropped).
    clock.offset = 2 * DAY
    urls = [mockserver.url(host, "/second")]
    second = await run_until_held(run_crawl, settings, urls, unreachable=True)
    assert second.stat("robotstxt/dropped_at_close") == 1
    assert mockserver.count(host, "/robots.txt") == 2
    assert "/second" not in mockserver.paths(host)

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
    # No new wait: the requests waited only for the store's first read (off the
    # reactor thread), not for a new unreachable spell.
    assert not fourth.stat("robotstxt/unreachable")
    assert fourth.stat("robotstxt/stale_used") == 1
    assert fourth.stat("robotstxt/forbidden") == 1
    assert fourth.spider.response_urls == [mockserver.url(host, "/public")]
    # The retry was due: robots.txt was asked for again (still 503) meanwhile.
    assert fourth.stat("robotstxt/response_status_count/503") == 1
    assert sorted(pages_of(mockserver, host)) == ["/first", "/public"]


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
