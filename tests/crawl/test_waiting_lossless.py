"""Real crawls for the waiting room's rule that nothing is lost (docs/waiting.md): release
isolates failures, eviction never orphans a held request, the summary counts each
origin once, duplicates are filtered at hold time, offsite requests are never held."""

from __future__ import annotations

import logging
from typing import Any

import pytest_twisted
from scrapy.core.scheduler import Scheduler

from tests.support.crawl import DISALLOW_PRIVATE, REP, pages_of


class PoisonScheduler(Scheduler):
    """Refuses requests whose URL contains ``poison``, as scrapy-redis does when it
    cannot serialise a request (its callback is not a spider method)."""

    def enqueue_request(self, request: Any) -> bool:
        if "poison" in request.url:
            raise ValueError(f"cannot serialise {request.url}")
        return bool(super().enqueue_request(request))


@pytest_twisted.ensureDeferred
async def test_one_bad_request_does_not_lose_the_batch(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """Nine held requests, one of which the scheduler refuses at release: the eight
    others are crawled, the failure is logged with the request and counted, and the
    origin's good robots.txt is not recorded as an internal error."""
    mockserver.configure(host, {"robots": [{"status": 503}, {"body": DISALLOW_PRIVATE}]})
    paths = [f"/p{i}" for i in range(4)] + ["/poison"] + [f"/q{i}" for i in range(4)]
    urls = [mockserver.url(host, p) for p in paths]
    settings = {**REP, "SCHEDULER": f"{__name__}.PoisonScheduler"}
    crawler = await run_crawl(urls, settings=settings)
    assert sorted(pages_of(mockserver, host)) == sorted(p for p in paths if p != "/poison")
    assert mockserver.count(host, "/robots.txt") == 2
    assert crawler.stat("robotstxt/release_failed") == 1
    assert crawler.stat("robotstxt/released") == 9
    assert crawler.stat("robotstxt/unreachable") == 1
    assert crawler.stat("robotstxt/recovered") == 1
    errors = crawler.messages(logging.ERROR, logger="scrapy_rep")
    assert len(errors) == 1
    assert mockserver.url(host, "/poison") in errors[0]
    assert not crawler.logged("internal error")


@pytest_twisted.ensureDeferred
async def test_more_waiting_origins_than_the_runtime_bound_lose_nothing(
    mockserver: Any, run_crawl: Any
) -> None:
    """REP_MEMORY_MAX_ORIGINS = 3 with 12 origins whose robots.txt answers 503 first:
    every held request is crawled once the origins recover; the summary counts 12."""
    hosts = [mockserver.unique_host("bound") for _ in range(12)]
    mockserver.configure_many(
        {h: {"robots": [{"status": 503}, {"body": DISALLOW_PRIVATE}]} for h in hosts}
    )
    urls = [mockserver.url(h, p) for h in hosts for p in ("/a", "/b", "/private")]
    settings = {**REP, "REP_MEMORY_MAX_ORIGINS": 3}
    crawler = await run_crawl(urls, settings=settings)
    for h in hosts:
        assert sorted(pages_of(mockserver, h)) == ["/a", "/b"], h
    assert crawler.stat("robotstxt/released") == len(urls)
    assert crawler.stat("robotstxt/forbidden") == len(hosts)
    assert crawler.stat("robotstxt/origins") == len(hosts)
    assert not crawler.stat("robotstxt/dropped_at_close")


@pytest_twisted.ensureDeferred
async def test_summary_counts_an_evicted_origin_that_returns_once(
    mockserver: Any, run_crawl: Any
) -> None:
    """30 healthy origins, each requested twice far apart, with a bound of 4 runtimes:
    most are evicted between their two visits; the summary still says 30 origins."""
    hosts = [mockserver.unique_host("evict") for _ in range(30)]
    mockserver.configure_many({h: {"robots": {"body": DISALLOW_PRIVATE}} for h in hosts})
    urls = [mockserver.url(h, "/a") for h in hosts] + [mockserver.url(h, "/b") for h in hosts]
    crawler = await run_crawl(
        urls, settings={**REP, "REP_MEMORY_MAX_ORIGINS": 4, "CONCURRENT_REQUESTS": 2}
    )
    for h in hosts:
        assert sorted(pages_of(mockserver, h)) == ["/a", "/b"], h
    assert crawler.stat("robotstxt/origins") == len(hosts)
    assert crawler.logged(f"scrapy-rep summary: {len(hosts)} origin(s): {len(hosts)} with rules")


@pytest_twisted.ensureDeferred
async def test_duplicates_of_a_held_request_are_filtered(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """20 pages all link to one page of an origin whose robots.txt answers 503 twice:
    one copy waits, the dupefilter counts the 19 others, the page is crawled once."""
    down = mockserver.unique_host("down")
    target = mockserver.url(down, "/same")
    mockserver.configure(host, {"robots": {"status": 404}, "default": {"links": [target]}})
    mockserver.configure(
        down, {"robots": [{"status": 503}, {"status": 503}, {"body": DISALLOW_PRIVATE}]}
    )
    urls = [mockserver.url(host, f"/p{i}") for i in range(20)]
    crawler = await run_crawl(urls, settings=REP, follow_links=True)
    assert pages_of(mockserver, down) == ["/same"]
    assert crawler.stat("dupefilter/filtered") == 19
    # one copy waited (the summary's line for that origin)
    assert crawler.logged(
        f"{mockserver.origin(down)}: rules (200); fetches 3, forbidden 0, delayed 1"
    )
    assert crawler.spider.response_urls.count(target) == 1


@pytest_twisted.ensureDeferred
async def test_dont_filter_copies_all_wait_and_go(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """dont_filter is honoured at hold time as the scheduler honours it."""
    from scrapy import Request

    mockserver.configure(host, {"robots": [{"status": 503}, {"status": 404}]})
    url = mockserver.url(host, "/same")
    crawler = await run_crawl([Request(url, dont_filter=True) for _ in range(3)], settings=REP)
    assert pages_of(mockserver, host) == ["/same"] * 3
    assert not crawler.stat("dupefilter/filtered")


@pytest_twisted.ensureDeferred
async def test_offsite_link_to_an_unreachable_host_is_never_held(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """The spider's page links to an offsite host whose robots.txt never answers: the
    link is dropped as OffsiteMiddleware drops it, no request reaches that host, and the
    spider finishes at once (it would otherwise wait REP_UNREACHABLE_WAIT)."""
    offsite = mockserver.unique_host("offsite")
    allowed = mockserver.unique_host("allowed-onsite")
    mockserver.configure(offsite, {"robots": {"status": 503}})
    mockserver.configure(allowed, {"robots": {"status": 503}})
    mockserver.configure(
        host,
        {
            "robots": {"status": 404},
            "pages": {"/": {"links": [mockserver.url(offsite, "/x"), "/next"]}},
        },
    )
    # allow_offsite and dont_filter requests are not offsite for Scrapy: they may wait.
    from scrapy import Request

    kept = Request(mockserver.url(allowed, "/kept"), meta={"allow_offsite": True})
    crawler = await run_crawl(
        [mockserver.url(host, "/"), kept],
        settings={**REP, "REP_UNREACHABLE_WAIT": 0.5},
        follow_links=True,
        spider_kwargs={"allowed_domains": [host]},
        timeout=20,
    )
    assert mockserver.paths(offsite) == []
    assert sorted(pages_of(mockserver, host)) == ["/", "/next"]
    assert crawler.stat("offsite/filtered") == 1
    assert not crawler.logged(offsite, level=logging.INFO, logger="scrapy_rep")  # never seen
    assert crawler.logged(
        f"{mockserver.origin(allowed)}: unreachable (503); fetches 2, forbidden 0, delayed 1"
    )
    assert pages_of(mockserver, allowed) == ["/kept"]
