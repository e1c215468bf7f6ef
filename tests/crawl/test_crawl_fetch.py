"""Real crawls for the robots.txt body (size limit, encodings) and for caching.

The size limit, max-age driven refetches (no request is decided by an expired copy:
requests after expiry wait for the refetch, and a steady crawl refreshes the copy
ahead of expiry so that it never waits), a refetch that ends unreachable (requests
wait, then the last good copy applies), and the implicit allow of /robots.txt.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_twisted
from scrapy.http import Request

from tests.crawl.test_crawl_storage import ShiftedClock
from tests.support.crawl import DISALLOW_PRIVATE, REP, ListSpider, pages_of, times_of


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class PhasedSpider(ListSpider):
    """Yields ``phases`` (lists of URLs) one after another, sleeping ``pause`` seconds
    (or the matching item of ``pauses``) between them, so requests arrive over time."""

    name = "phased"

    def __init__(
        self, phases: list[list[str]], pauses: list[float] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.phases = phases
        self.pauses = pauses or [1.5] * len(phases)

    async def start(self) -> AsyncIterator[Any]:
        for index, phase in enumerate(self.phases):
            if index:
                await asyncio.sleep(self.pauses[index - 1])
            for url in phase:
                yield Request(url, callback=self.parse, errback=self.on_error)


# ---------------------------------------------------------------------------
# Size limit
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("size", [600 * 1024, 5 * 1024 * 1024], ids=["600KiB", "5MiB"])
@pytest_twisted.ensureDeferred
async def test_oversized_robots_is_cut_at_the_limit(
    mockserver: Any, run_crawl: Any, host: str, size: int
) -> None:
    """The download stops at REP_MAX_SIZE (500 KiB): an early rule applies, one placed
    beyond the limit does not, and the cut is counted."""
    head = "User-agent: *\nDisallow: /early\n"
    mockserver.configure(
        host, {"robots": {"size": size, "body": head, "tail": "Disallow: /beyond\n"}}
    )
    urls = [mockserver.url(host, p) for p in ("/early", "/beyond", "/ok")]
    # REP's 1 s fetch timeout is no part of this claim, and serving 5 MiB can take longer
    # on a busy machine (parallel test workers): a timeout would mean a second fetch.
    crawler = await run_crawl(urls, settings={**REP, "REP_FETCH_TIMEOUT": 30})
    assert mockserver.count(host, "/robots.txt") == 1
    assert sorted(pages_of(mockserver, host)) == ["/beyond", "/ok"]
    assert crawler.stat("robotstxt/truncated") == 1
    assert crawler.stat("robotstxt/forbidden") == 1
    assert crawler.stat("robotstxt/response_status_count/200") == 1
    assert not crawler.stat("robotstxt/unreachable")


# ---------------------------------------------------------------------------
# Body formats
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "robots",
    [
        pytest.param({"body": DISALLOW_PRIVATE, "gzip": True}, id="gzip"),
        pytest.param({"body_b64": b64(b"\xef\xbb\xbf" + DISALLOW_PRIVATE.encode())}, id="bom"),
        pytest.param(
            {"body_b64": b64(b"User-agent: *\r\nDisallow: /caf\xe9\r\nDisallow: /private\r\n")},
            id="latin1",
        ),
        pytest.param({"body": DISALLOW_PRIVATE, "stall_after": 10, "stall": 0.3}, id="short-stall"),
    ],
)
@pytest_twisted.ensureDeferred
async def test_robots_body_formats(
    mockserver: Any, run_crawl: Any, host: str, robots: dict[str, Any]
) -> None:
    mockserver.configure(host, {"robots": robots})
    urls = [mockserver.url(host, p) for p in ("/public", "/private", "/private/x")]
    crawler = await run_crawl(urls, settings=REP)
    assert mockserver.count(host, "/robots.txt") == 1
    assert pages_of(mockserver, host) == ["/public"]
    assert crawler.stat("robotstxt/forbidden") == 2
    assert not crawler.stat("robotstxt/unreachable")


@pytest_twisted.ensureDeferred
async def test_html_page_as_robots_allows_all(mockserver: Any, run_crawl: Any, host: str) -> None:
    html = (
        "<!DOCTYPE html>\n<html>\n<head><title>Welcome</title></head>\n<body>\n"
        '<h1>Our shop</h1>\n<a href="/private">members</a>\n<p>Disallowed: nothing</p>\n'
        "</body>\n</html>\n"
    )
    mockserver.configure(
        host, {"robots": {"body": html, "headers": {"Content-Type": "text/html; charset=utf-8"}}}
    )
    urls = [mockserver.url(host, p) for p in ("/", "/private", "/a")]
    crawler = await run_crawl(urls, settings=REP)
    assert sorted(pages_of(mockserver, host)) == ["/", "/a", "/private"]
    assert not crawler.stat("robotstxt/forbidden")


@pytest_twisted.ensureDeferred
async def test_robots_that_disallows_itself(mockserver: Any, run_crawl: Any, host: str) -> None:
    """``Disallow: /robots.txt`` neither stops the fetch nor a page request for it."""
    mockserver.configure(
        host, {"robots": {"body": "User-agent: *\nDisallow: /robots.txt\nDisallow: /private\n"}}
    )
    urls = [mockserver.url(host, p) for p in ("/private", "/robots.txt", "/public")]
    crawler = await run_crawl(urls, settings=REP)
    # Once as the robots.txt fetch, once as the spider's own page request.
    assert mockserver.count(host, "/robots.txt") == 2
    assert "/public" in mockserver.paths(host)
    assert "/private" not in mockserver.paths(host)
    assert crawler.stat("robotstxt/forbidden") == 1
    assert sorted(r.url for r in crawler.spider.responses) == [
        mockserver.url(host, "/public"),
        mockserver.url(host, "/robots.txt"),
    ]


# ---------------------------------------------------------------------------
# Caching and refetching
# ---------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_request_after_expiry_is_decided_by_the_refetched_rules(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """``max-age=2``, then the rules change on the server: requests 4.3 s later wait for
    the refetch, as for a first fetch, and are decided by the NEW rules; none is decided
    by the expired copy. (The refetch is answered after 1 s, so a request let through
    by the expired copy would have reached the server before that answer.)"""
    mockserver.configure(
        host,
        {
            "robots": [
                {
                    "body": "User-agent: *\nDisallow: /old\n",
                    "headers": {"Cache-Control": "public, max-age=2"},
                },
                {"body": "User-agent: *\nDisallow: /new\n", "delay": 1},
            ]
        },
    )

    def u(path: str) -> str:
        return mockserver.url(host, path)

    phases = [[u("/old-0"), u("/new-0")], [u("/old-1"), u("/new-1")]]
    crawler = await run_crawl(
        settings={**REP, "REP_MIN_TTL": 1, "REP_FETCH_TIMEOUT": 10},
        spider_cls=PhasedSpider,
        spider_kwargs={"phases": phases, "pauses": [4.3]},
    )
    robots_t = times_of(mockserver, host, "/robots.txt")
    assert len(robots_t) == 2
    assert crawler.stat("robotstxt/refetch") == 1
    # /new-1 was dropped by the new rules, /old-1 allowed by them.
    assert sorted(pages_of(mockserver, host)) == ["/new-0", "/old-1"]
    assert crawler.stat("robotstxt/forbidden") == 2
    # /old-1 waited for the refetch's answer (held 1 s by the server).
    assert times_of(mockserver, host, "/old-1")[0] >= robots_t[1] + 1.0
    assert crawler.stat("robotstxt/delayed") == 4  # two before each fetch's answer
    late = next(r for r in crawler.spider.responses if r.url == u("/old-1"))
    decision = late.meta["robotstxt_decision"]
    assert (decision["source"], decision["allowed"]) == ("fresh", True)
    assert decision["waited"] > 0


@pytest_twisted.ensureDeferred
async def test_audit_mode_waits_only_for_the_first_answer_after_expiry_too(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """REP_ENFORCE = False waits only for an origin's first robots.txt answer: after
    expiry its requests go ahead while the refetch runs, recorded by the expired copy
    (source ``expired``), as audit mode always did."""
    mockserver.configure(
        host,
        {
            "robots": [
                {
                    "body": "User-agent: *\nDisallow: /old\n",
                    "headers": {"Cache-Control": "max-age=1"},
                },
                {"body": "User-agent: *\nDisallow: /new\n", "delay": 1},
            ]
        },
    )

    def u(path: str) -> str:
        return mockserver.url(host, path)

    crawler = await run_crawl(
        settings={**REP, "REP_ENFORCE": False, "REP_MIN_TTL": 1, "REP_FETCH_TIMEOUT": 10},
        spider_cls=PhasedSpider,
        spider_kwargs={"phases": [[u("/a")], [u("/old-1")]], "pauses": [2.0]},
    )
    robots_t = times_of(mockserver, host, "/robots.txt")
    assert len(robots_t) == 2
    assert crawler.stat("robotstxt/delayed") == 1  # /a, before the first answer
    assert times_of(mockserver, host, "/old-1")[0] < robots_t[1] + 1.0
    late = next(r for r in crawler.spider.responses if r.url == u("/old-1"))
    assert late.meta["robotstxt_decision"]["source"] == "expired"
    assert crawler.stat("robotstxt/audit/would_forbid") == 1


class SteadySpider(ListSpider):
    """One origin crawled steadily across its copy's refresh-ahead time and its expiry,
    on ``clock`` (the crawl's REP_CLOCK), which it moves forward:

    1. ``/a``: the first fetch (its copy lives ``lifetime`` seconds);
    2. the clock moves 95 % into that lifetime (its last tenth): ``/b-N``, one at a
       time, until one is decided by the refetched copy (its decision names a line,
       ``Allow: /b-``, that only the refetched file has);
    3. the clock moves past the first copy's expiry: ``/c-0`` to ``/c-4``.
    """

    name = "steady"

    def __init__(self, base: str, clock: ShiftedClock, lifetime: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base = base
        self.clock = clock
        self.lifetime = lifetime

    def request(self, path: str) -> Request:
        return Request(self.base + path, callback=self.parse, errback=self.on_error)

    async def settled(self, count: int) -> None:
        # a condition, bounded generously; the test's assertions tell what went wrong
        for _ in range(600):
            if len(self.responses) + len(self.failures) >= count:
                return
            await asyncio.sleep(0.05)

    async def start(self) -> AsyncIterator[Any]:
        yield self.request("/a")
        await self.settled(1)
        self.clock.offset += 0.95 * self.lifetime
        for number in range(100):
            yield self.request(f"/b-{number}")
            await self.settled(2 + number)
            decision = self.responses[-1].meta.get("robotstxt_decision", {})
            if decision.get("line") is not None:
                break
        self.clock.offset += 0.1 * self.lifetime
        for number in range(5):
            yield self.request(f"/c-{number}")


@pytest_twisted.ensureDeferred
async def test_steady_crawl_refreshes_ahead_of_expiry_and_never_waits(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """A request in the last tenth of the copy's lifetime starts the refetch and is
    decided by the copy that still applies; the refetched copy is in place before the
    first one expires, so no request after the first fetch waits (REP_CLOCK moves the
    crawl's time; the crawl, the server and the fetches are real)."""
    lifetime = 1000.0
    first = "User-agent: *\nDisallow: /private\n"
    refetched = "User-agent: *\nAllow: /b-\nAllow: /c-\nDisallow: /private\n"
    age = {"Cache-Control": f"max-age={lifetime:.0f}"}
    mockserver.configure(
        host, {"robots": [{"body": first, "headers": age}, {"body": refetched, "headers": age}]}
    )
    clock = ShiftedClock()
    base = mockserver.url(host, "/").rstrip("/")
    crawler = await run_crawl(
        settings={**REP, "REP_CLOCK": clock},
        spider_cls=SteadySpider,
        spider_kwargs={"base": base, "clock": clock, "lifetime": lifetime},
    )
    robots_t = times_of(mockserver, host, "/robots.txt")
    assert len(robots_t) == 2
    assert crawler.stat("robotstxt/refetch") == 1
    # Only /a waited (for the first fetch); nothing was sent back to wait either.
    assert crawler.stat("robotstxt/delayed") == 1
    assert not crawler.stat("robotstxt/requeued")
    pages = pages_of(mockserver, host)
    assert pages[0] == "/a" and sorted(pages[-5:]) == [f"/c-{n}" for n in range(5)]
    # The server saw the refetch before any request from after the first copy's expiry.
    assert robots_t[1] < times_of(mockserver, host, "/c-0")[0]
    decisions = {
        r.url.removeprefix(base): r.meta["robotstxt_decision"] for r in crawler.spider.responses
    }
    assert len(decisions) == len(pages)
    # /b-0 started the refetch and was decided by the first copy, which still applied.
    assert (decisions["/b-0"]["source"], decisions["/b-0"]["line"]) == ("fresh", None)
    for path, decision in decisions.items():
        assert decision["source"] == "fresh"
        if path != "/a":
            assert decision["waited"] == 0.0, path
        if path.startswith("/c-"):
            assert decision["line"] == 3, path  # the refetched copy's Allow: /c-


@pytest_twisted.ensureDeferred
async def test_refetch_unreachable_waits_then_uses_last_good_copy(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """200 then 503 after expiry: the origin is unreachable like on a first fetch, so its
    requests wait (not dropped, not allowed by the expired copy) for
    REP_UNREACHABLE_WAIT; then the last good copy applies."""
    mockserver.configure(
        host,
        {
            "robots": [
                {"body": DISALLOW_PRIVATE, "headers": {"Cache-Control": "max-age=1"}},
                {"status": 503},
            ]
        },
    )

    def u(path: str) -> str:
        return mockserver.url(host, path)

    wait = 2.0
    phases = [
        [u("/public-0"), u("/private-0")],
        [u("/public-1")],  # starts the refetch and waits for it: a 503
        [u("/public-2"), u("/private-2")],  # arrive while the origin is unreachable
    ]
    crawler = await run_crawl(
        settings={**REP, "REP_MIN_TTL": 1, "REP_UNREACHABLE_WAIT": wait},
        spider_cls=PhasedSpider,
        spider_kwargs={"phases": phases, "pauses": [1.5, 0.5]},
        log_level=logging.DEBUG,
    )
    robots_t = times_of(mockserver, host, "/robots.txt")
    assert len(robots_t) >= 4  # 200, the 503 and retries with backoff during the wait
    assert crawler.stat("robotstxt/refetch") == 1
    assert sorted(pages_of(mockserver, host)) == ["/public-0", "/public-1", "/public-2"]
    # Waited the whole REP_UNREACHABLE_WAIT from the 503, then the stale copy decided.
    assert times_of(mockserver, host, "/public-2")[0] >= robots_t[1] + wait
    assert crawler.stat("robotstxt/forbidden") == 2
    assert crawler.stat("robotstxt/stale_used") == 1
    assert crawler.stat("robotstxt/unreachable") == 1
    assert crawler.stat("robotstxt/delayed", 0) >= 2
    assert crawler.logged("is unreachable", level=logging.INFO, logger="scrapy_rep")
    assert crawler.logged("using the last good copy", level=logging.INFO, logger="scrapy_rep")


@pytest_twisted.ensureDeferred
async def test_scheduled_requests_wait_when_refetch_turns_unreachable(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """Requests that passed the gate while the copy was fresh, but reach the downloader
    after it expired (its refetch came back 503), are not decided by the expired copy:
    they go back to wait (requeued), then the last good copy decides them after the
    wait."""
    slow = {"delay": 0.3}
    mockserver.configure(
        host,
        {
            "robots": [
                {"body": DISALLOW_PRIVATE, "headers": {"Cache-Control": "max-age=1"}},
                {"status": 503},
            ],
            "default": slow,
        },
    )

    def u(path: str) -> str:
        return mockserver.url(host, path)

    wait = 1.5
    # One download at a time, 0.3 s each: all pass the gate at once under the fresh
    # copy, and the later ones sit in the scheduler until well after it expired (1 s).
    pages = [f"/p{n}" for n in range(8)]
    urls = [u(p) for p in [pages[0], "/private/1", pages[1], "/private/2", *pages[2:]]]
    crawler = await run_crawl(
        urls,
        settings={
            **REP,
            "REP_MIN_TTL": 1,
            "REP_UNREACHABLE_WAIT": wait,
            "CONCURRENT_REQUESTS": 1,
        },
    )
    robots_t = times_of(mockserver, host, "/robots.txt")
    assert crawler.stat("robotstxt/refetch") == 1
    assert crawler.stat("robotstxt/requeued", 0) >= 1
    assert sorted(pages_of(mockserver, host)) == pages
    assert crawler.stat("robotstxt/forbidden") == 2
    assert crawler.stat("robotstxt/stale_used") == 1
    # Only a page already in the downloader when the 503 came back went ahead early.
    early = [
        e["path"]
        for e in mockserver.log(host)
        if e["path"] != "/robots.txt" and robots_t[1] < e["t"] < robots_t[1] + wait
    ]
    assert len(early) <= 1, early
