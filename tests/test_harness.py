"""Tests of the real-crawl harness itself: mock server, resolver, run_crawl.

They also pin down how Scrapy reports each injected fault (its own exceptions since
2.19, Twisted's before), which the robots.txt fetch logic of scrapy-rep has to map to
"unreachable".
"""

from __future__ import annotations

import base64
import gzip
import http.client
import logging
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from scrapy.http import Request
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.internet import defer
from twisted.internet.error import DNSLookupError
from twisted.web.http import _DataLoss

from tests.support.resolver import RESOLVER_SETTING, LocalResolver, resolve_name
from tests.support.scrapy_compat import (
    DATA_LOSS_FAILURE,
    DNS_FAILURE,
    HAS_DOWNLOAD_EXCEPTIONS,
    NO_RESPONSE_FAILURE,
    RESOLVER_SETTING_NAME,
    TIMEOUT_FAILURE,
)

NO_ROBOTS = {"ROBOTSTXT_OBEY": False, "RETRY_ENABLED": False}


def fetch(
    mockserver: Any, host: str, path: str = "/", method: str = "GET"
) -> tuple[int, dict[str, str], bytes]:
    """One plain HTTP request to the mock server with the given Host header."""
    conn = http.client.HTTPConnection("127.0.0.1", mockserver.port, timeout=10)
    try:
        conn.request(method, path, headers={"Host": f"{host}:{mockserver.port}"})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def by_path(crawler: Any) -> dict[str, Any]:
    """The spider's responses keyed by URL path."""
    return {r.url.split(":", 2)[2].split("/", 1)[1]: r for r in crawler.spider.responses}


def failure_of(crawler: Any, url: str) -> Any:
    matches = [f for f in crawler.spider.failures if f.request.url == url]
    assert len(matches) == 1, (url, crawler.spider.failures)
    return matches[0]


# ---------------------------------------------------------------------------
# Mock server: routing, defaults, control API (direct HTTP)
# ---------------------------------------------------------------------------


def test_unconfigured_host_defaults(mockserver: Any, host: str) -> None:
    status, headers, body = fetch(mockserver, host, "/robots.txt")
    assert status == 404
    status, headers, body = fetch(mockserver, host, "/some/page?q=1")
    assert status == 200
    assert headers["Content-Type"].startswith("text/html")
    assert body == b"<html><body>/some/page</body></html>"


def test_log_records_requests_in_order(mockserver: Any) -> None:
    first, second = mockserver.unique_host("log-a"), mockserver.unique_host("log-b")
    before = mockserver.time()
    fetch(mockserver, first, "/one?x=1")
    fetch(mockserver, second, "/two")
    fetch(mockserver, first, "/three", method="HEAD")
    log = mockserver.log(first)
    assert [(e["method"], e["path"]) for e in log] == [("GET", "/one?x=1"), ("HEAD", "/three")]
    assert all(e["host"] == first for e in log)
    assert before <= log[0]["t"] <= log[1]["t"] <= mockserver.time()
    assert log[0]["headers"]["Host"] == f"{first}:{mockserver.port}"
    everything = [e["path"] for e in mockserver.log() if e["host"] in (first, second)]
    assert everything == ["/one?x=1", "/two", "/three"]
    assert not any(e["path"].startswith("/__mock/") for e in mockserver.log())
    assert mockserver.paths(second) == ["/two"]
    assert mockserver.count(first, "/three") == 1


def test_response_lists_advance_and_last_repeats(mockserver: Any, host: str) -> None:
    mockserver.configure(
        host,
        {
            "robots": [{"status": 503}, {"body": "User-agent: *\nDisallow: /x\n"}],
            "pages": {"/p": [{"status": 500}, {"body": "second"}], "/p?v=2": {"body": "exact"}},
            "default": {"status": 410},
        },
    )
    assert [fetch(mockserver, host, "/robots.txt")[0] for _ in range(3)] == [503, 200, 200]
    assert fetch(mockserver, host, "/robots.txt")[2] == b"User-agent: *\nDisallow: /x\n"
    assert fetch(mockserver, host, "/p")[0] == 500
    assert fetch(mockserver, host, "/p?v=1")[2] == b"second"  # path match ignores the query
    assert fetch(mockserver, host, "/p?v=2")[2] == b"exact"  # exact match wins
    assert fetch(mockserver, host, "/elsewhere")[0] == 410
    # Reconfiguring a host restarts its counters.
    mockserver.configure(host, {"robots": [{"status": 429}, {"status": 200}]})
    assert fetch(mockserver, host, "/robots.txt")[0] == 429


def test_bad_spec_is_rejected(mockserver: Any, host: str) -> None:
    with pytest.raises(ValueError, match="unknown ResponseSpec keys"):
        mockserver.configure(host, {"robots": {"stauts": 200}})
    with pytest.raises(ValueError, match="longer than size"):
        mockserver.configure(host, {"robots": {"size": 5, "body": "User-agent: *\n"}})


def test_unique_hosts(mockserver: Any) -> None:
    names = {mockserver.unique_host("Same Prefix!") for _ in range(50)}
    assert len(names) == 50
    assert all(re.fullmatch(r"same-prefix-\d+-[0-9a-f]{4}\.test", n) for n in names)
    assert mockserver.url("a.test", "x") == f"http://a.test:{mockserver.port}/x"


def test_size_gives_exact_valid_robots_with_tail(mockserver: Any, host: str) -> None:
    size = 600 * 1024
    head = "User-agent: *\nAllow: /\n"
    mockserver.configure(
        host, {"robots": {"size": size, "body": head, "tail": "Disallow: /beyond\n"}}
    )
    status, headers, body = fetch(mockserver, host, "/robots.txt")
    assert status == 200
    assert len(body) == size == int(headers["Content-Length"])
    assert body.startswith(head.encode())
    assert body.endswith(b"\nDisallow: /beyond\n")
    lines = body.decode().splitlines()
    assert all(re.fullmatch(r"(User-agent: \*|(Allow|Disallow): /[\w-]*|#x*|)", ln) for ln in lines)
    for odd in range(100, 130):  # every remainder pads exactly
        mockserver.configure(host, {"robots": {"size": odd}})
        assert len(fetch(mockserver, host, "/robots.txt")[2]) == odd


def test_redirect_headers_and_raw_bytes(mockserver: Any, host: str) -> None:
    raw = bytes(range(256))
    mockserver.configure(
        host,
        {
            "pages": {
                "/moved": {"redirect": "http://other.test/new"},
                "/found": {"redirect": "/new", "status": 302},
                "/raw": {"body_b64": base64.b64encode(raw).decode(), "headers": {"X-A": "b"}},
                "/gz": {"body": "zipped", "gzip": True},
            }
        },
    )
    status, headers, _ = fetch(mockserver, host, "/moved")
    assert (status, headers["Location"]) == (301, "http://other.test/new")
    status, headers, _ = fetch(mockserver, host, "/found")
    assert (status, headers["Location"]) == (302, "/new")
    status, headers, body = fetch(mockserver, host, "/raw")
    assert (body, headers["X-A"]) == (raw, "b")
    status, headers, body = fetch(mockserver, host, "/gz")
    assert headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(body) == b"zipped"


def test_held_connections_do_not_block_others(mockserver: Any, host: str) -> None:
    """Twenty responses held on a gate (spec key ``hold``) until the test opens it:
    other requests are answered meanwhile, and opening the gate releases all twenty."""
    gate = mockserver.unique_host("gate")
    mockserver.configure(host, {"pages": {"/slow": {"hold": gate, "hold_max": 30}}})
    slow = [
        threading.Thread(target=fetch, args=(mockserver, host, "/slow"), daemon=True)
        for _ in range(20)
    ]
    for thread in slow:
        thread.start()
    for _ in range(1000):  # until all twenty have arrived (bounded: 20 s)
        if mockserver.count(host, "/slow") == 20:
            break
        time.sleep(0.02)
    assert mockserver.count(host, "/slow") == 20
    for _ in range(10):
        assert fetch(mockserver, host, "/fast")[0] == 200
    assert all(thread.is_alive() for thread in slow)  # still held: answered /fast first
    mockserver.open_gate(gate)
    for thread in slow:
        thread.join(timeout=20)
    assert not any(thread.is_alive() for thread in slow)


# ---------------------------------------------------------------------------
# Resolver
# ---------------------------------------------------------------------------


def test_resolve_name_rules() -> None:
    assert resolve_name("localhost") == "127.0.0.1"
    assert resolve_name("foo.test") == "127.0.0.1"
    assert resolve_name("A.B.Test.") == "127.0.0.1"
    assert resolve_name("10.1.2.3") == "10.1.2.3"
    assert resolve_name("::1") == "::1"
    assert resolve_name("nxdomain-abc.test") is None
    assert resolve_name("example.com") is None
    assert resolve_name("test") is None


@pytest_twisted.ensureDeferred
async def test_resolver_in_a_real_crawl(mockserver: Any, run_crawl: Any) -> None:
    good = mockserver.unique_host("foo")
    missing = mockserver.unique_host("nxdomain")
    outside = "harness-check.example"
    urls = [mockserver.url(good), mockserver.url(missing), mockserver.url(outside)]
    crawler = await run_crawl(urls, settings=NO_ROBOTS)
    assert crawler.spider.response_urls == [urls[0]]
    assert mockserver.paths(good) == ["/"]
    for url in urls[1:]:
        failure = failure_of(crawler, url)
        assert failure.type is DNS_FAILURE
        if HAS_DOWNLOAD_EXCEPTIONS:
            # Scrapy 2.19 wraps Twisted's DNSLookupError in its own exception.
            assert isinstance(failure.value.__cause__, DNSLookupError)
    assert {missing, outside} <= set(LocalResolver.lookups)
    assert not [e for e in mockserver.log() if e["host"] in (missing, outside)]


def test_resolver_as_scrapy_setting_in_subprocess(
    mockserver: Any, subprocess_env: dict[str, str], tmp_path: Path
) -> None:
    good, missing = mockserver.unique_host("sub"), mockserver.unique_host("nxdomain-sub")
    spider = tmp_path / "spider.py"
    spider.write_text(
        "import scrapy\n\n"
        "class S(scrapy.Spider):\n"
        "    name = 's'\n"
        "    async def start(self):\n"
        f"        for url in [{mockserver.url(good)!r}, {mockserver.url(missing)!r}]:\n"
        "            yield scrapy.Request(url, errback=self.err)\n"
        "    def parse(self, response):\n"
        "        self.logger.info('GOT %s', response.status)\n"
        "    def err(self, failure):\n"
        "        self.logger.info('ERR %s', failure.type.__name__)\n"
    )
    settings = {
        RESOLVER_SETTING_NAME: RESOLVER_SETTING,
        "ROBOTSTXT_OBEY": "False",
        "RETRY_ENABLED": "False",
        "TELNETCONSOLE_ENABLED": "False",
        "REMOTE_CONTROL_ENABLED": "False",
    }
    args = [arg for key, value in settings.items() for arg in ("-s", f"{key}={value}")]
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", "runspider", str(spider), *args],
        cwd=tmp_path,
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "GOT 200" in proc.stderr
    assert f"ERR {DNS_FAILURE.__name__}" in proc.stderr
    assert mockserver.paths(good) == ["/"]


# ---------------------------------------------------------------------------
# ResponseSpec features as Scrapy sees them
# ---------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_crawl_sees_bodies_gzip_size_redirect_links(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    mockserver.configure(
        host,
        {
            "pages": {
                "/gz": {"body": "hello gzip", "gzip": True},
                "/big": {"size": 600 * 1024, "tail": "Disallow: /end\n"},
                "/old": {"redirect": "/new"},
                "/hub": {"links": ["/leaf-1", "leaf-2", mockserver.url(host, "/leaf-3")]},
                "/gone": {"status": 404},
            }
        },
    )
    paths = ["/gz", "/big", "/old", "/hub", "/gone"]
    crawler = await run_crawl(
        [mockserver.url(host, p) for p in paths], settings=NO_ROBOTS, follow_links=True
    )
    got = by_path(crawler)
    assert got["gz"].body == b"hello gzip"
    assert len(got["big"].body) == 600 * 1024
    assert got["big"].body.endswith(b"Disallow: /end\n")
    assert got["new"].body == b"<html><body>/new</body></html>"
    assert {"leaf-1", "leaf-2", "leaf-3"} <= set(got)
    assert failure_of(crawler, mockserver.url(host, "/gone")).type is HttpError
    assert crawler.stat("downloader/response_status_count/301") == 1
    assert mockserver.count(host, "/new") == 1


@pytest_twisted.ensureDeferred
async def test_crawl_sees_connection_faults(mockserver: Any, run_crawl: Any, host: str) -> None:
    body = "x" * 4000
    faults: dict[str, dict[str, Any]] = {
        "/reset": {"body": body, "reset_after": 100},
        "/reset-at-once": {"body": body, "reset_after": -1},
        "/truncated": {"body": body, "truncate_after": 100},
        "/bad-chunks": {"body": body, "bad_chunking": True},
        "/delayed": {"delay": 2},
        "/stalled": {"body": body, "stall_after": 100, "stall": 2},
        "/short-stall": {"body": body, "stall_after": 100, "stall": 0.2},
    }
    mockserver.configure(host, {"pages": faults})
    # No clock on the crawl (a loaded machine may stretch it): the failure types below
    # show that DOWNLOAD_TIMEOUT, not the server's 2 s, ended the slow responses.
    crawler = await run_crawl(
        [mockserver.url(host, p) for p in faults], settings={**NO_ROBOTS, "DOWNLOAD_TIMEOUT": 1}
    )
    expected = {
        "/reset": DATA_LOSS_FAILURE,
        "/reset-at-once": NO_RESPONSE_FAILURE,
        "/truncated": DATA_LOSS_FAILURE,
        "/bad-chunks": DATA_LOSS_FAILURE,
        "/delayed": TIMEOUT_FAILURE,
        "/stalled": TIMEOUT_FAILURE,
    }
    for path, exc_type in expected.items():
        failure = failure_of(crawler, mockserver.url(host, path))
        assert failure.type is exc_type, (path, failure)
        if exc_type is DATA_LOSS_FAILURE:
            # Twisted's ResponseFailed (the __cause__ of Scrapy 2.19's exception) names
            # the data loss among its reasons.
            cause = failure.value.__cause__ if HAS_DOWNLOAD_EXCEPTIONS else failure.value
            assert any(r.check(_DataLoss) for r in cause.reasons), (path, cause)
    assert by_path(crawler)["short-stall"].body == body.encode()


# ---------------------------------------------------------------------------
# run_crawl helper
# ---------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_run_crawl_basics_and_log_capture(
    mockserver: Any, run_crawl: Any, host: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    request = Request(mockserver.url(host, "/given"), meta={"mark": 1})
    crawler = await run_crawl([mockserver.url(host, "/plain"), request])
    assert sorted(crawler.spider.response_urls) == [
        mockserver.url(host, "/given"),
        mockserver.url(host, "/plain"),
    ]
    assert mockserver.paths(host)[0] == "/robots.txt"  # ROBOTSTXT_OBEY is on by default
    assert crawler.stat("robotstxt/response_status_count/404") == 1
    assert crawler.stats.get_value("finish_reason") == "finished"
    assert crawler.logged("Crawled (200)", level=logging.DEBUG, logger="scrapy")
    assert not crawler.messages(level=logging.ERROR)
    # pytest's caplog sees Scrapy's records as well (no Scrapy root handler is installed).
    assert any("Spider closed (finished)" in r.getMessage() for r in caplog.records)


@pytest_twisted.ensureDeferred
async def test_two_crawls_at_once(mockserver: Any, run_crawl: Any) -> None:
    hosts = [mockserver.unique_host("parallel") for _ in range(2)]
    for h in hosts:
        mockserver.configure(h, {"pages": {"/": {"delay": 0.3}}})
    crawlers = await defer.gatherResults(
        [defer.Deferred.fromCoroutine(run_crawl([mockserver.url(h)])) for h in hosts]
    )
    for h, crawler in zip(hosts, crawlers, strict=True):
        assert crawler.spider.response_urls == [mockserver.url(h)]


@pytest_twisted.ensureDeferred
async def test_run_crawl_timeout_guard(mockserver: Any, run_crawl: Any, host: str) -> None:
    mockserver.configure(host, {"pages": {"/": {"delay": 1.5}}})
    crawler = await run_crawl(
        [mockserver.url(host)],
        settings={**NO_ROBOTS, "DOWNLOAD_TIMEOUT": 10},
        timeout=0.3,
        allow_timeout=True,
    )
    assert crawler.timed_out
    assert crawler.stat("finish_reason") == "shutdown"


# ---------------------------------------------------------------------------
# Why scrapy-rep exists
# ---------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_stock_middleware_lets_waiters_skip_the_check(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """Stock RobotsTxtMiddleware: requests that wait for a slow robots.txt are let
    through unchecked (only the first waiter gets the parser), so pages of a
    ``Disallow: /`` site are downloaded."""
    mockserver.configure(host, {"robots": {"body": "User-agent: *\nDisallow: /\n", "delay": 1}})
    urls = [mockserver.url(host, f"/page-{i}") for i in range(30)]
    crawler = await run_crawl(urls, settings={"ROBOTSTXT_OBEY": True})
    leaked = [p for p in mockserver.paths(host) if p != "/robots.txt"]
    forbidden = crawler.stat("robotstxt/forbidden", 0)
    assert mockserver.count(host, "/robots.txt") == 1
    assert forbidden > 0  # the rules were parsed and do forbid everything...
    assert len(leaked) > 0  # ...yet pages got through
    assert len(leaked) + forbidden == len(urls)
