"""Real crawls for the robots.txt body (size limit, encodings) and for caching.

SPEC section 2: the size limit, max-age driven refetches (the expired rules apply
while the refetch is in flight), a refetch that ends unreachable (requests wait, then
the last good copy applies), and the implicit allow of /robots.txt.
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

from tests.conftest import ListSpider
from tests.crawl_helpers import DISALLOW_PRIVATE, REP, pages_of, times_of


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
async def test_max_age_expiry_refetches_mid_crawl(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """``max-age=1``: the copy expires mid-crawl and is refetched once. While the refetch
    is in flight (the server holds it 1 s) the old rules apply; later requests get the
    new rules."""
    mockserver.configure(
        host,
        {
            "robots": [
                {
                    "body": "User-agent: *\nDisallow: /old\n",
                    "headers": {"Cache-Control": "public, max-age=1"},
                },
                {"body": "User-agent: *\nDisallow: /new\n", "delay": 1},
            ]
        },
    )

    def u(path: str) -> str:
        return mockserver.url(host, path)

    phases = [[u("/old-0"), u("/new-0")], [u("/old-1"), u("/new-1")], [u("/old-2"), u("/new-2")]]
    crawler = await run_crawl(
        settings={**REP, "REP_MIN_TTL": 1, "REP_FETCH_TIMEOUT": 3},
        spider_cls=PhasedSpider,
        spider_kwargs={"phases": phases, "pauses": [1.5, 1.5]},
    )
    robots_t = times_of(mockserver, host, "/robots.txt")
    assert len(robots_t) == 2
    assert crawler.stat("robotstxt/refetch") == 1
    assert sorted(pages_of(mockserver, host)) == ["/new-0", "/new-1", "/old-2"]
    assert crawler.stat("robotstxt/forbidden") == 3
    # /new-1 was decided by the old rules: it is the request that found the copy expired
    # and started the refetch, and it reached the server before the refetch was answered
    # (the answer was held 1 s). It races the refetch to the server, so only the upper
    # bound is certain.
    new_1 = times_of(mockserver, host, "/new-1")[0]
    assert new_1 < robots_t[1] + 1.0
    assert times_of(mockserver, host, "/old-2")[0] >= robots_t[1] + 1.0


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
        [u("/public-1")],  # starts the refetch (decided before or after the 503)
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
    """Requests that passed the gate under the expired copy, but reach the downloader
    after the refetch came back 503, are not decided by the expired copy: they go back
    to wait (requeued), then the last good copy decides them after the wait."""
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
    later = [u("/p1"), u("/private/1"), u("/p2"), u("/private/2"), u("/p3")]
    crawler = await run_crawl(
        settings={
            **REP,
            "REP_MIN_TTL": 1,
            "REP_UNREACHABLE_WAIT": wait,
            # One download at a time: the later requests sit in the scheduler, already
            # past the gate, while the refetch fails.
            "CONCURRENT_REQUESTS": 1,
        },
        spider_cls=PhasedSpider,
        spider_kwargs={"phases": [[u("/p0")], later], "pauses": [1.5]},
    )
    robots_t = times_of(mockserver, host, "/robots.txt")
    assert crawler.stat("robotstxt/refetch") == 1
    assert crawler.stat("robotstxt/requeued", 0) >= 1
    assert sorted(pages_of(mockserver, host)) == ["/p0", "/p1", "/p2", "/p3"]
    assert crawler.stat("robotstxt/forbidden") == 2
    assert crawler.stat("robotstxt/stale_used") == 1
    # Only a page already in the downloader when the 503 came back went ahead early.
    early = [
        e["path"]
        for e in mockserver.log(host)
        if e["path"] != "/robots.txt" and robots_t[1] < e["t"] < robots_t[1] + wait
    ]
    assert len(early) <= 1, early
