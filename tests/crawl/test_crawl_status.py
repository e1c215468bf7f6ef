"""Real crawls for every fetch-outcome row of docs/behaviour.md.

Each test runs a whole Scrapy crawl against the mock server with scrapy-rep enabled
through its add-on and asserts on what the server received (paths, server-side
timestamps) and on crawl stats.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import pytest
import pytest_twisted
from scrapy.exceptions import IgnoreRequest

from tests.support.crawl import DISALLOW_PRIVATE, REP, pages_of, times_of
from tests.support.scrapy_compat import DNS_FAILURE

# Long enough that faults can cut it in the middle of the body.
PADDED_RULES = DISALLOW_PRIVATE + "# " + "x" * 3000 + "\n"


# ---------------------------------------------------------------------------
# 2xx
# ---------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_2xx_rules_apply(mockserver: Any, run_crawl: Any, host: str) -> None:
    mockserver.configure(host, {"robots": {"body": DISALLOW_PRIVATE}})
    urls = [mockserver.url(host, p) for p in ("/public", "/private", "/private/x")]
    crawler = await run_crawl(urls, settings=REP)
    assert mockserver.paths(host)[0] == "/robots.txt"
    assert mockserver.count(host, "/robots.txt") == 1
    assert pages_of(mockserver, host) == ["/public"]
    assert crawler.stat("robotstxt/forbidden") == 2
    assert crawler.stat("robotstxt/response_status_count/200") == 1
    assert crawler.stat("robotstxt/request_count") == 1
    assert crawler.logged("Forbidden by robots.txt", level=logging.DEBUG)
    assert [f.type for f in crawler.spider.failures] == [IgnoreRequest, IgnoreRequest]


# ---------------------------------------------------------------------------
# 3xx
# ---------------------------------------------------------------------------


def _redirect_chain(mockserver: Any, host: str, hops: int) -> tuple[str, str]:
    """robots.txt of ``host`` redirects ``hops`` times, alternating between two other
    hosts, ending at ``/final`` (a 200 with DISALLOW_PRIVATE). Returns the two hosts."""
    a, b = mockserver.unique_host("chain-a"), mockserver.unique_host("chain-b")
    specs: dict[str, dict[str, Any]] = {a: {"pages": {}}, b: {"pages": {}}}
    targets = [(a if i % 2 else b, f"/hop{i}") for i in range(1, hops)]
    targets.append((a if hops % 2 else b, "/final"))
    mockserver.configure(host, {"robots": {"redirect": mockserver.url(*targets[0])}})
    for (h, path), nxt in itertools.pairwise(targets):
        specs[h]["pages"][path] = {"redirect": mockserver.url(*nxt), "status": 302}
    final_host, final_path = targets[-1]
    specs[final_host]["pages"][final_path] = {"body": DISALLOW_PRIVATE}
    mockserver.configure_many(specs)
    return a, b


@pytest_twisted.ensureDeferred
async def test_3xx_five_hops_across_hosts_apply_to_original_origin(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    a, b = _redirect_chain(mockserver, host, hops=5)
    urls = [mockserver.url(host, "/private"), mockserver.url(host, "/public")]
    urls.append(mockserver.url(a, "/private"))  # a's own robots.txt is a 404
    crawler = await run_crawl(urls, settings=REP)
    assert pages_of(mockserver, host) == ["/public"]
    assert mockserver.count(host, "/robots.txt") == 1
    hops = [p for h in (a, b) for p in mockserver.paths(h) if p.startswith("/hop")]
    assert sorted(hops) == ["/hop1", "/hop2", "/hop3", "/hop4"]
    assert mockserver.count(a, "/final") == 1  # odd hop count: the chain ends on a
    # The rules of the final body apply to the original origin, not to a.
    assert "/private" in mockserver.paths(a)
    assert crawler.stat("robotstxt/forbidden") == 1
    # Each hop in scrapy-rep's own keys; Scrapy's keys see one download ending in a 200.
    assert crawler.stat("robotstxt/download_status_count/301") == 1
    assert crawler.stat("robotstxt/download_status_count/302") == 4
    assert crawler.stat("robotstxt/redirect_count") == 5
    assert crawler.stat("robotstxt/response_status_count/200") == 1
    assert not crawler.stat("robotstxt/response_status_count/301")


@pytest_twisted.ensureDeferred
async def test_3xx_six_hops_is_allow_all(mockserver: Any, run_crawl: Any, host: str) -> None:
    a, b = _redirect_chain(mockserver, host, hops=6)
    urls = [mockserver.url(host, "/private"), mockserver.url(host, "/public")]
    crawler = await run_crawl(urls, settings=REP)
    assert sorted(pages_of(mockserver, host)) == ["/private", "/public"]
    hops = [p for h in (a, b) for p in mockserver.paths(h)]
    # robots.txt + 5 followed hops; the 6th redirect is not followed.
    assert sorted(hops) == ["/hop1", "/hop2", "/hop3", "/hop4", "/hop5"]
    assert crawler.stat("robotstxt/download_count") == 6
    assert crawler.stat("robotstxt/request_count") == 1
    assert not crawler.stat("robotstxt/forbidden")


@pytest_twisted.ensureDeferred
async def test_3xx_redirect_loop_is_allow_all(mockserver: Any, run_crawl: Any, host: str) -> None:
    mockserver.configure(
        host,
        {
            "robots": {"redirect": "/loop"},
            "pages": {"/loop": {"redirect": "/robots.txt"}},
        },
    )
    urls = [mockserver.url(host, "/private"), mockserver.url(host, "/public")]
    crawler = await run_crawl(urls, settings=REP)
    assert mockserver.count(host, "/robots.txt") == 1
    assert mockserver.count(host, "/loop") == 1
    assert sorted(p for p in pages_of(mockserver, host) if p != "/loop") == [
        "/private",
        "/public",
    ]
    assert not crawler.stat("robotstxt/forbidden")


@pytest_twisted.ensureDeferred
async def test_3xx_ending_in_404_is_allow_all(mockserver: Any, run_crawl: Any, host: str) -> None:
    other = mockserver.unique_host("end404")
    mockserver.configure(host, {"robots": {"redirect": mockserver.url(other, "/gone")}})
    mockserver.configure(other, {"pages": {"/gone": {"status": 404}}})
    crawler = await run_crawl([mockserver.url(host, "/private")], settings=REP)
    assert pages_of(mockserver, host) == ["/private"]
    assert mockserver.paths(other) == ["/gone"]
    assert crawler.stat("robotstxt/response_status_count/404") == 1


@pytest_twisted.ensureDeferred
async def test_3xx_ending_in_503_is_unreachable(mockserver: Any, run_crawl: Any, host: str) -> None:
    """The end of the chain decides: a 503 there delays the origin's requests."""
    other = mockserver.unique_host("end503")
    mockserver.configure(host, {"robots": {"redirect": mockserver.url(other, "/r")}})
    mockserver.configure(other, {"pages": {"/r": [{"status": 503}, {"body": DISALLOW_PRIVATE}]}})
    urls = [mockserver.url(host, "/private"), mockserver.url(host, "/public")]
    crawler = await run_crawl(urls, settings=REP)
    assert mockserver.paths(other) == ["/r", "/r"]
    assert mockserver.count(host, "/robots.txt") == 2
    assert pages_of(mockserver, host) == ["/public"]
    second_fetch = times_of(mockserver, other, "/r")[1]
    assert mockserver.log(host)[-1]["t"] >= second_fetch
    assert crawler.stat("robotstxt/unreachable") == 1
    assert crawler.stat("robotstxt/forbidden") == 1


# ---------------------------------------------------------------------------
# 4xx
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 451])
@pytest_twisted.ensureDeferred
async def test_4xx_is_allow_all(mockserver: Any, run_crawl: Any, host: str, status: int) -> None:
    # The body would forbid everything if it were (wrongly) parsed.
    mockserver.configure(host, {"robots": {"status": status, "body": "User-agent: *\nDisallow: /"}})
    urls = [mockserver.url(host, p) for p in ("/", "/private", "/a/b")]
    crawler = await run_crawl(urls, settings=REP)
    assert mockserver.count(host, "/robots.txt") == 1
    assert sorted(pages_of(mockserver, host)) == ["/", "/a/b", "/private"]
    assert crawler.stat(f"robotstxt/response_status_count/{status}") == 1
    assert not crawler.stat("robotstxt/forbidden")
    assert not crawler.stat("robotstxt/unreachable")


# ---------------------------------------------------------------------------
# 429 and 5xx: delayed, robots.txt retried with backoff
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 500, 503])
@pytest_twisted.ensureDeferred
async def test_429_and_5xx_delay_and_retry_with_backoff(
    mockserver: Any, run_crawl: Any, host: str, status: int
) -> None:
    mockserver.configure(
        host, {"robots": [{"status": status}, {"status": status}, {"body": DISALLOW_PRIVATE}]}
    )
    urls = [mockserver.url(host, p) for p in ("/public", "/private", "/other")]
    crawler = await run_crawl(urls, settings=REP)
    robots_t = times_of(mockserver, host, "/robots.txt")
    assert len(robots_t) == 3
    # Backoff: first retry after REP_RETRY_BACKOFF (0.2 s), then doubled (0.4 s).
    assert robots_t[1] - robots_t[0] >= 0.19
    assert robots_t[2] - robots_t[1] >= 0.39
    # Nothing was dropped while unreachable, nothing slipped through before the rules.
    log = mockserver.log(host)
    assert sorted(e["path"] for e in log if e["path"] != "/robots.txt") == ["/other", "/public"]
    assert all(e["t"] >= robots_t[2] for e in log if e["path"] != "/robots.txt")
    assert crawler.stat("robotstxt/forbidden") == 1
    assert crawler.stat("robotstxt/unreachable") == 1
    assert crawler.stat("robotstxt/recovered") == 1
    assert crawler.stat("robotstxt/delayed") == 3
    assert crawler.stat("robotstxt/released") == 3
    # Scrapy's keys count the first download; the two backoff retries have their own.
    assert crawler.stat(f"robotstxt/response_status_count/{status}") == 1
    assert crawler.stat(f"robotstxt/download_status_count/{status}") == 2
    assert crawler.stat("robotstxt/retry_count") == 2
    assert crawler.stat("robotstxt/request_count") == 1
    assert crawler.logged("is unreachable", level=logging.INFO, logger="scrapy_rep")


@pytest.mark.parametrize(("status", "retry_after", "minimum"), [(503, "2", 2.0), (429, "0", 1.0)])
@pytest_twisted.ensureDeferred
async def test_retry_after_sets_next_retry(
    mockserver: Any, run_crawl: Any, host: str, status: int, retry_after: str, minimum: float
) -> None:
    """Retry-After replaces the (0.2 s) backoff; it is clamped to at least 1 s."""
    mockserver.configure(
        host,
        {
            "robots": [
                {"status": status, "headers": {"Retry-After": retry_after}},
                {"body": DISALLOW_PRIVATE},
            ]
        },
    )
    urls = [mockserver.url(host, "/public"), mockserver.url(host, "/private")]
    crawler = await run_crawl(urls, settings=REP)
    robots_t = times_of(mockserver, host, "/robots.txt")
    assert len(robots_t) == 2
    assert robots_t[1] - robots_t[0] >= minimum - 0.05
    assert pages_of(mockserver, host) == ["/public"]
    assert crawler.stat("robotstxt/forbidden") == 1


# ---------------------------------------------------------------------------
# Network failures: unreachable, exactly like 5xx
# ---------------------------------------------------------------------------

FAULTS: dict[str, dict[str, Any]] = {
    "reset-mid-body": {"body": PADDED_RULES, "reset_after": 20},
    "reset-before-status": {"body": PADDED_RULES, "reset_after": -1},
    "truncated": {"body": PADDED_RULES, "truncate_after": 20},
    "bad-chunking": {"body": PADDED_RULES, "bad_chunking": True},
    "timeout": {"body": PADDED_RULES, "delay": 2},
    "body-stalls": {"body": PADDED_RULES, "stall_after": 20, "stall": 2.5},
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest_twisted.ensureDeferred
async def test_network_fault_is_unreachable_then_rules(
    mockserver: Any, run_crawl: Any, host: str, fault: str
) -> None:
    """The faulty fetch neither allows all (a partial body is not a robots.txt) nor
    drops requests: they wait for the retry, whose rules then apply."""
    mockserver.configure(host, {"robots": [FAULTS[fault], {"body": PADDED_RULES}]})
    urls = [mockserver.url(host, p) for p in ("/public", "/private", "/private/2")]
    crawler = await run_crawl(urls, settings={**REP, "REP_FETCH_TIMEOUT": 0.5})
    robots_t = times_of(mockserver, host, "/robots.txt")
    assert len(robots_t) == 2
    assert pages_of(mockserver, host) == ["/public"]
    assert mockserver.log(host)[-1]["t"] >= robots_t[1]
    assert crawler.stat("robotstxt/unreachable") == 1
    assert crawler.stat("robotstxt/forbidden") == 2
    # Scrapy's keys: one download, which failed; the retry's 200 is in scrapy-rep's keys.
    assert not crawler.stat("robotstxt/response_count")
    assert crawler.stat("robotstxt/download_status_count/200") == 1
    exceptions = [k for k in crawler.stats.get_stats() if k.startswith("robotstxt/exception_")]
    assert len(exceptions) == 1, exceptions


def _unreachable_target(mockserver: Any, kind: str) -> str:
    if kind == "dns":
        return mockserver.unique_host("nxdomain-rep")
    return mockserver.unique_host("refused")  # resolves; its port is closed


@pytest.mark.parametrize("kind", ["dns", "refused"])
@pytest_twisted.ensureDeferred
async def test_unreachable_host_waits_then_fallback_allow(
    mockserver: Any, run_crawl: Any, kind: str, refused_port: int
) -> None:
    """DNS failure / refused connection: requests wait REP_UNREACHABLE_WAIT while
    robots.txt is retried, then (no good copy) the default fallback allows them.

    A refused fetch takes about 0.3 s to fail (0.5 s before Scrapy 2.19, see
    tests/support/scrapy_compat.py); with backoffs of 0.2 s and 0.4 s the third try starts 0.9 s
    (1.1 s) after the first failure, so a 1.5 s wait leaves room for it on a quiet
    machine. The claim is that robots.txt is retried meanwhile, so one retry is enough
    to show it: on a loaded machine (CI with -n 4) the third try may not fit."""
    wait = 1.5
    name = _unreachable_target(mockserver, kind)
    port = refused_port if kind == "refused" else mockserver.port
    urls = [f"http://{name}:{port}/page-{i}" for i in range(3)]
    settings = {**REP, "REP_UNREACHABLE_WAIT": wait}
    crawler = await run_crawl(urls, settings=settings)
    # The pages were released (not dropped) and their own downloads then failed.
    assert sorted(f.request.url for f in crawler.spider.failures) == urls
    assert not any(f.check(IgnoreRequest) for f in crawler.spider.failures)
    if kind == "dns":
        assert all(f.check(DNS_FAILURE) for f in crawler.spider.failures)
    assert crawler.stat("robotstxt/retry_count") >= 1  # retried with backoff meanwhile
    assert crawler.stat("robotstxt/request_count") == 1
    assert crawler.stat("robotstxt/unreachable") == 1
    assert crawler.stat("robotstxt/fallback/allow-all") == 1
    assert crawler.stat("robotstxt/released") == 3
    assert not crawler.stat("robotstxt/forbidden")
    records = {r.getMessage(): r.created for r in crawler.log_records}
    went = next(t for m, t in records.items() if "is unreachable" in m)
    fell_back = next(t for m, t in records.items() if "REP_UNREACHABLE_FALLBACK applies" in m)
    assert fell_back - went >= wait - 0.1  # waited about REP_UNREACHABLE_WAIT, then fell back


@pytest.mark.parametrize("kind", ["dns", "refused", "503"])
@pytest_twisted.ensureDeferred
async def test_unreachable_fallback_disallow_drops(
    mockserver: Any, run_crawl: Any, host: str, kind: str, refused_port: int
) -> None:
    if kind == "503":
        mockserver.configure(host, {"robots": {"status": 503}})
        base = mockserver.origin(host)
    else:
        name = _unreachable_target(mockserver, kind)
        port = refused_port if kind == "refused" else mockserver.port
        base = f"http://{name}:{port}"
    urls = [f"{base}/page-{i}" for i in range(4)]
    settings = {**REP, "REP_UNREACHABLE_WAIT": 1, "REP_UNREACHABLE_FALLBACK": "disallow"}
    crawler = await run_crawl(urls, settings=settings)
    assert crawler.stat("robotstxt/forbidden") == 4
    assert crawler.stat("robotstxt/forbidden/unreachable_fallback") == 4
    assert crawler.stat("robotstxt/fallback/disallow-all") == 1
    summary = next(
        r.getMessage() for r in crawler.log_records if "scrapy-rep summary" in r.getMessage()
    )
    assert "REP_UNREACHABLE_FALLBACK applied (disallow-all)" in summary  # shown per origin
    assert all(f.check(IgnoreRequest) for f in crawler.spider.failures)
    assert len(crawler.spider.failures) == 4
    if kind == "503":
        assert pages_of(mockserver, host) == []
        assert mockserver.count(host, "/robots.txt") >= 3
