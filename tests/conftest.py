"""Real-crawl test harness: a local multi-origin HTTP server and a crawl helper.

Fixtures (see /work/fragments/harness.md for a guide):

* ``mockserver`` (session): the running ``tests/mockserver.py`` subprocess (a
  ``tests.mockserver_client.MockServer``).
* ``host`` (function): a fresh ``<test-name>-<n>-<hex>.test`` hostname.
* ``run_crawl`` (session): ``await run_crawl(urls, settings=..., ...)`` runs a whole
  Scrapy crawl and returns the finished ``HarnessCrawler``.
* ``list_spider`` (session): the default ``ListSpider`` class, to subclass.
* ``subprocess_env`` (session): environment for ``scrapy`` subprocesses.

An autouse session fixture installs ``tests.resolver.LocalResolver`` on the reactor,
so ``*.test`` names reach the mock server and nothing else resolves.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest
import scrapy
from scrapy.crawler import Crawler, CrawlerRunner
from scrapy.http import Request, Response, TextResponse
from scrapy.utils.defer import deferred_from_coro
from twisted.internet import defer
from twisted.python.failure import Failure

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent

# Make ``tests.resolver`` importable the same way here and in subprocesses.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.mockserver_client import MockServer  # noqa: E402
from tests.resolver import LocalResolver  # noqa: E402

#: Value for the DNS resolver setting in ``scrapy`` subprocesses; the setting's name is
#: ``tests.scrapy_compat.RESOLVER_SETTING_NAME`` (``TWISTED_DNS_RESOLVER`` since Scrapy
#: 2.19, ``DNS_RESOLVER`` before).
RESOLVER_SETTING = "tests.resolver.LocalResolver"

PROXY_ENV_VARS = (
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
)

#: Settings every harness crawl starts from; ``run_crawl(settings=...)`` overrides them.
DEFAULT_CRAWL_SETTINGS: dict[str, Any] = {
    "TELNETCONSOLE_ENABLED": False,
    "ROBOTSTXT_OBEY": True,
    "DOWNLOAD_TIMEOUT": 5,
    "LOG_LEVEL": "DEBUG",
    "HTTPCACHE_ENABLED": False,
    "COOKIES_ENABLED": False,
    "REMOTE_CONTROL_ENABLED": False,
}

# ---------------------------------------------------------------------------
# Spider and crawler
# ---------------------------------------------------------------------------


def _reactor() -> Any:
    """The installed reactor (pytest-twisted installed it before collection)."""
    from twisted.internet import reactor

    return reactor


class ListSpider(scrapy.Spider):
    """Requests the given URLs (or Request objects) and records what comes back.

    * ``responses``: every response that reached a callback, in order,
    * ``failures``: every errback ``Failure`` (non-2xx statuses arrive here as
      ``HttpError``, as in any Scrapy spider),
    * ``follow_links=True`` follows every ``<a href>`` of HTML responses.

    Given Request objects are used as they are, except that one without an
    errback gets ``errback=self.on_error`` (Request.replace: a copy).
    """

    name = "list"

    def __init__(
        self,
        start_items: Iterable[str | Request] = (),
        follow_links: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.start_items: list[str | Request] = list(start_items)
        self.follow_links = follow_links
        self.responses: list[Response] = []
        self.failures: list[Failure] = []

    @property
    def response_urls(self) -> list[str]:
        return [response.url for response in self.responses]

    @property
    def failure_types(self) -> list[type[BaseException]]:
        return [failure.type for failure in self.failures]  # type: ignore[misc]

    async def start(self) -> AsyncIterator[Any]:
        for item in self.start_items:
            if isinstance(item, Request):
                yield item if item.errback is not None else item.replace(errback=self.on_error)
            else:
                yield Request(item, callback=self.parse, errback=self.on_error)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Request]:
        self.responses.append(response)
        if self.follow_links and isinstance(response, TextResponse):
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, callback=self.parse, errback=self.on_error)

    def on_error(self, failure: Failure) -> None:
        self.failures.append(failure)


class CrawlTimeout(AssertionError):
    pass


class HarnessCrawler(Crawler):
    """A Crawler that also keeps the log records emitted while it ran."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.log_records: list[logging.LogRecord] = []
        self.timed_out = False

    def stat(self, key: str, default: Any = None) -> Any:
        return self.stats.get_value(key, default)

    def messages(self, level: int = logging.NOTSET, logger: str = "") -> list[str]:
        """Formatted log messages at ``level`` or above from loggers under ``logger``."""
        return [
            record.getMessage()
            for record in self.log_records
            if record.levelno >= level
            and (not logger or record.name == logger or record.name.startswith(logger + "."))
        ]

    def logged(self, text: str, level: int = logging.NOTSET, logger: str = "") -> bool:
        """Whether some captured message contains ``text``."""
        return any(text in message for message in self.messages(level, logger))


class _RecordList(logging.Handler):
    def __init__(self, target: list[logging.LogRecord], level: int) -> None:
        super().__init__(level)
        self.target = target

    def emit(self, record: logging.LogRecord) -> None:
        self.target.append(record)


def _settle(d: defer.Deferred[Any], seconds: float) -> defer.Deferred[bool]:
    """Fires True once ``d`` has a result, or False after ``seconds``.

    Does not consume ``d``'s result: await ``d`` afterwards to get it.
    """
    reactor: Any = _reactor()
    waiter: defer.Deferred[bool] = defer.Deferred()

    def done(result: Any) -> Any:
        if not waiter.called:
            if call.active():
                call.cancel()
            waiter.callback(True)
        return result

    def expired() -> None:
        if not waiter.called:
            waiter.callback(False)

    call = reactor.callLater(seconds, expired)
    d.addBoth(done)
    return waiter


class RunCrawl(Protocol):
    def __call__(
        self,
        urls: Iterable[str | Request] = (),
        settings: dict[str, Any] | None = None,
        spider_cls: type[scrapy.Spider] | None = None,
        spider_kwargs: dict[str, Any] | None = None,
        follow_links: bool = False,
        timeout: float = 30.0,
        allow_timeout: bool = False,
        log_level: int = logging.DEBUG,
    ) -> Awaitable[HarnessCrawler]: ...


async def run_crawl(
    urls: Iterable[str | Request] = (),
    settings: dict[str, Any] | None = None,
    spider_cls: type[scrapy.Spider] | None = None,
    spider_kwargs: dict[str, Any] | None = None,
    follow_links: bool = False,
    timeout: float = 30.0,
    allow_timeout: bool = False,
    log_level: int = logging.DEBUG,
) -> HarnessCrawler:
    """Run one whole crawl in the test's reactor and return the finished crawler.

    ``settings`` are layered over ``DEFAULT_CRAWL_SETTINGS``. ``spider_cls`` defaults
    to ``ListSpider`` (which gets ``urls`` as its start items); another spider class
    gets the URLs as ``start_urls``. After ``timeout`` seconds the crawler is stopped
    and ``CrawlTimeout`` raised, unless ``allow_timeout`` (then ``crawler.timed_out``
    is True). Log records at ``log_level`` and above, from every logger, are kept in
    ``crawler.log_records``.
    """
    all_settings = {**DEFAULT_CRAWL_SETTINGS, **(settings or {})}
    spidercls = spider_cls or ListSpider
    kwargs = dict(spider_kwargs or {})
    items = list(urls)
    if issubclass(spidercls, ListSpider):
        kwargs.setdefault("start_items", items)
        kwargs.setdefault("follow_links", follow_links)
    elif items:
        kwargs.setdefault("start_urls", [i.url if isinstance(i, Request) else i for i in items])

    runner = CrawlerRunner(all_settings)
    crawler = HarnessCrawler(spidercls, all_settings)
    root = logging.getLogger()
    handler = _RecordList(crawler.log_records, log_level)
    old_level = root.level
    root.addHandler(handler)
    if root.getEffectiveLevel() > log_level:
        root.setLevel(log_level)
    try:
        d = runner.crawl(crawler, **kwargs)
        if not await _settle(d, timeout):
            crawler.timed_out = True
            await deferred_from_coro(crawler.stop_async())
            if not await _settle(d, 15.0):
                raise CrawlTimeout(f"crawl did not stop within 15 s after a {timeout} s timeout")
        await d
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    if crawler.timed_out and not allow_timeout:
        raise CrawlTimeout(f"crawl still running after {timeout} s; stopped it")
    return crawler


# ---------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------


@pytest.fixture(scope="session", autouse=True)
def _offline_session() -> Iterator[None]:
    """No proxies from the environment; names resolve only through LocalResolver."""
    reactor = _reactor()
    saved = {name: os.environ.pop(name) for name in PROXY_ENV_VARS if name in os.environ}
    previous = reactor.installNameResolver(LocalResolver(reactor))
    yield
    reactor.installNameResolver(previous)
    os.environ.update(saved)


@pytest.fixture(scope="session")
def mockserver() -> Iterator[MockServer]:
    server = MockServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def host(mockserver: MockServer, request: pytest.FixtureRequest) -> str:
    """A fresh hostname named after the test."""
    return mockserver.unique_host(request.node.name.removeprefix("test_"))


@pytest.fixture(scope="session", name="run_crawl")
def run_crawl_fixture() -> RunCrawl:
    return run_crawl


@pytest.fixture(scope="session")
def list_spider() -> type[ListSpider]:
    return ListSpider


@pytest.fixture(scope="session")
def subprocess_env() -> dict[str, str]:
    """Environment for ``scrapy`` subprocesses: repo root on PYTHONPATH, no proxies.

    Pass ``-s TWISTED_DNS_RESOLVER=tests.resolver.LocalResolver`` (``DNS_RESOLVER`` before
    Scrapy 2.19: ``f"{RESOLVER_SETTING_NAME}={RESOLVER_SETTING}"``) so the subprocess
    resolves ``*.test`` names too.
    """
    env = {k: v for k, v in os.environ.items() if k not in PROXY_ENV_VARS}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    return env


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A local port that refuses connections for the whole test: bound but never
    listening (Linux answers a SYN to it with RST). Kept bound, so no other process,
    e.g. another pytest-xdist worker's server, can take it meanwhile."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        yield port
