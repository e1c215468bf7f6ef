"""Shared plumbing for the crawl benchmarks: the local server and a crawl runner.

The benchmarks serve from ``_fast_server.py`` (keep-alive, one asyncio loop: fast
enough that the crawler, not the server, sets the pace) or, with ``mock``, the test
suite's scriptable mock server (``tests/support/mockserver.py``, a thread and a connection per
request).  Both take the same ``/__mock/config`` calls, and the test suite's resolver
(``*.test`` names → 127.0.0.1, nothing else resolves) keeps every run off the network.
"""

from __future__ import annotations

import json
import re
import select
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

QUIET = {
    "LOG_LEVEL": "WARNING",
    "TELNETCONSOLE_ENABLED": False,
    "COOKIES_ENABLED": False,
    "HTTPCACHE_ENABLED": False,
}
STOCK = {"ROBOTSTXT_OBEY": True}
OFF = {"ROBOTSTXT_OBEY": False}
REP = {"ROBOTSTXT_OBEY": True, "ADDONS": {"scrapy_rep.Addon": 0}, "REP_STORAGE": "memory"}


class NullMiddleware:
    """A downloader middleware of scrapy-rep's shape that does nothing: a
    ``request_scheduled`` receiver and async ``process_request``/``process_response``
    at the robots.txt middleware's priority. What Scrapy itself charges any middleware
    of that shape, the floor under scrapy-rep's cost (bench_ab.py's ``null`` mode)."""

    @classmethod
    def from_crawler(cls, crawler: Any) -> NullMiddleware:
        from scrapy import signals

        middleware = cls()
        crawler.signals.connect(middleware.scheduled, signal=signals.request_scheduled)
        return middleware

    def scheduled(self, request: Any, spider: Any) -> None:
        return None

    async def process_request(self, request: Any, spider: Any = None) -> None:
        return None

    async def process_response(self, request: Any, response: Any, spider: Any = None) -> Any:
        return response


NULL = {
    "ROBOTSTXT_OBEY": False,
    "DOWNLOADER_MIDDLEWARES": {"_harness.NullMiddleware": 100},
}


SERVERS = {
    "fast": Path(__file__).resolve().parent / "_fast_server.py",
    "mock": REPO_ROOT / "tests" / "support" / "mockserver.py",
}


class ServerAt:
    """A benchmark server's URLs, known from its port (all a child crawl knows)."""

    def __init__(self, port: int) -> None:
        self.port = port

    def url(self, host: str, path: str) -> str:
        return f"http://{host}:{self.port}{path}"


class LocalServer(ServerAt):
    def __init__(self, kind: str = "fast") -> None:
        self.kind = kind
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVERS[kind])],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 20)
        match = re.fullmatch(r"PORT (\d+)\s*", self.proc.stdout.readline() if ready else "")
        if not match:
            self.proc.kill()
            raise RuntimeError("mock server did not start")
        super().__init__(int(match.group(1)))
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def configure(self, hosts: dict[str, Any]) -> None:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/__mock/config",
            data=json.dumps({"hosts": hosts}).encode(),
            method="POST",
        )
        self._opener.open(request, timeout=10).read()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def install_reactor() -> Any:
    from scrapy.utils.reactor import install_reactor as install

    install("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from twisted.internet import reactor

    from tests.support.resolver import LocalResolver

    reactor.installNameResolver(LocalResolver(reactor))
    return reactor


def run_on_reactor(reactor: Any, main: Callable[[], Coroutine[Any, Any, None]]) -> bool:
    """Run the coroutine *main* on the installed reactor until it ends.

    Returns False when it raised (its traceback is printed).
    """
    from scrapy.utils.defer import deferred_from_coro

    succeeded: list[bool] = []

    def finish(result: Any) -> None:
        if hasattr(result, "printTraceback"):
            result.printTraceback()
        else:
            succeeded.append(True)
        reactor.stop()

    reactor.callWhenRunning(lambda: deferred_from_coro(main()).addBoth(finish))
    reactor.run()
    return bool(succeeded)


def run_serving(
    reactor: Any, server: LocalServer, main: Callable[[], Coroutine[Any, Any, None]]
) -> None:
    """run_on_reactor with *server* stopped afterwards whatever happens; exits the
    benchmark when *main* raised (its traceback is printed)."""
    try:
        succeeded = run_on_reactor(reactor, main)
    finally:
        server.stop()
    if not succeeded:
        sys.exit("benchmark failed (see the traceback above)")


def make_spider_class() -> type:
    import scrapy

    class TimingSpider(scrapy.Spider):
        name = "timing"

        def __init__(self, urls: Iterable[str] = (), **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.urls = list(urls)
            self.done_at: dict[str, float] = {}
            self.pages = 0
            self.started_at = 0.0
            # process CPU time at the spider's start and at its last page: the steady
            # state's CPU, without the crawler's start-up and close
            self.cpu_started = 0.0
            self.cpu_done = 0.0

        async def start(self) -> Any:
            # Timing starts when the spider starts asking for pages, so crawler and
            # middleware construction (identical work in every mode) is not counted.
            self.started_at = time.perf_counter()
            self.cpu_started = time.process_time()
            for url in self.urls:
                yield scrapy.Request(url, callback=self.parse, dont_filter=True)

        def parse(self, response: Any) -> None:
            self.pages += 1
            host = response.url.split("/")[2].split(":")[0]
            self.done_at[host] = time.perf_counter()
            self.cpu_done = time.process_time()

    return TimingSpider


async def crawl(urls: list[str], settings: dict[str, Any]) -> tuple[float, Any]:
    """Run one crawl; return (time the spider started, spider)."""
    from scrapy.crawler import Crawler, CrawlerRunner
    from scrapy.utils.defer import maybe_deferred_to_future

    spider_cls = make_spider_class()
    all_settings = {**QUIET, **settings}
    runner = CrawlerRunner(all_settings)
    crawler = Crawler(spider_cls, all_settings)
    await maybe_deferred_to_future(runner.crawl(crawler, urls=urls))
    spider: Any = crawler.spider  # make_spider_class's spider, with started_at
    return spider.started_at, spider


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


# -- a crawl in a process of its own ---------------------------------------------------

_RESULT = "RESULT "


def print_result(outcome: dict[str, Any]) -> None:
    """In a child process: its figures, for ``child_result`` to read."""
    print(_RESULT + json.dumps(outcome), flush=True)


def printed_result(stdout: str) -> dict[str, Any] | None:
    """The figures a child printed with ``print_result``, if it printed them."""
    for line in stdout.splitlines():
        if line.startswith(_RESULT):
            result: dict[str, Any] = json.loads(line[len(_RESULT) :])
            return result
    return None


def child_result(command: list[str], what: str) -> dict[str, Any]:
    """Run *command* (a benchmark's own child crawl) and return the figures it printed
    with ``print_result``; exit with its stderr's tail if it printed none."""
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    result = printed_result(proc.stdout)
    if result is not None:
        return result
    sys.stderr.write(proc.stderr[-4000:])
    sys.exit(f"{what} failed (exit {proc.returncode})")
