"""A hostile robots.txt cannot stall the reactor (docs/rfc.md, "Hostile files"): a large file
is parsed, and a large group prepared for its first check, in bounded steps on the
reactor's own thread, and the reactor runs other work between them: other origins'
requests are decided and downloaded meanwhile. Real crawls. The tests assert where
and how the work ran (every step on the reactor's thread, several reactor turns
during it, other origins crawled between the steps) and that nothing changes for the
crawl; how long the reactor waits is a timing, so it is measured and printed, never
asserted (``pytest -s``; the figures are in notes/steps.md)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Generator
from typing import Any, ClassVar
from urllib.parse import urljoin

import pytest
import pytest_twisted
from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.test import get_crawler
from twisted.internet.task import LoopingCall

from scrapy_rep.crawl import decide
from scrapy_rep.crawl.origins import Origins, parsed_bytes
from scrapy_rep.policy.config import Config
from scrapy_rep.robotstxt._robotstxt import RobotsTxt
from tests.support.crawl import ListSpider

REP: dict[str, Any] = {
    "ADDONS": {"scrapy_rep.Addon": 0},
    "REP_STORAGE": "memory",
    "RETRY_ENABLED": False,
    "LOG_LEVEL": "INFO",
    "EXTENSIONS": {f"{__name__}.GapWatch": 0},
}
TICK = 0.005


def hostile_file() -> str:
    """bench_adversarial.py's "anchored wildcard allows": 500 KiB of one "*" group
    whose parse and first-check compile are among the slowest shapes."""
    lines = ["User-agent: *\n", "Disallow: /private\n"]
    size = sum(map(len, lines))
    while size < 500 * 1024:
        lines.append(f"Allow: /*x{len(lines)}$\n")
        size += len(lines[-1])
    return "".join(lines)


class GapWatch:
    """Ticks every 5 ms on the reactor and keeps the largest gap between ticks from
    the hostile robots.txt's arrival to the hostile page's (its parse and checks);
    counts the ticks that fell while a preparation's steps were under way."""

    host = ""
    largest = 0.0
    ticks_in_window = 0
    ticks_in_steps = 0
    crawler: Any = None

    def __init__(self) -> None:
        self._last = 0.0
        self._open = False
        self._loop = LoopingCall(self._tick)

    @classmethod
    def from_crawler(cls, crawler: Any) -> GapWatch:
        watch = cls()
        GapWatch.crawler = crawler
        crawler.signals.connect(watch._received, signal=signals.response_received)
        crawler.signals.connect(watch._opened, signal=signals.spider_opened)
        crawler.signals.connect(watch._closed, signal=signals.spider_closed)
        return watch

    def _opened(self, spider: Any) -> None:
        GapWatch.largest, GapWatch.ticks_in_window, GapWatch.ticks_in_steps = 0.0, 0, 0
        self._last = time.perf_counter()
        self._loop.start(TICK)

    def _closed(self, spider: Any) -> None:
        if self._loop.running:
            self._loop.stop()

    def _tick(self) -> None:
        now = time.perf_counter()
        if self._open:
            GapWatch.largest = max(GapWatch.largest, now - self._last)
            GapWatch.ticks_in_window += 1
        if Steps.running:
            GapWatch.ticks_in_steps += 1
        self._last = now

    def _received(self, response: Response, request: Request, spider: Any) -> None:
        if Steps.running:
            Steps.received_meanwhile.append(response.url)
        if GapWatch.host not in response.url:
            return
        if response.url.endswith("/robots.txt"):
            self._open = True
            self._last = time.perf_counter()  # the gap counts from the file's arrival
        elif self._open:
            self._tick()  # (a gap that ends with the page counts too)
            self._open = False


class Steps:
    """Wraps decide._prepared (the steps of one preparation) to record the thread
    each step ran in and whether the steps are under way."""

    running = False
    jobs = 0
    threads: ClassVar[set[int]] = set()
    received_meanwhile: ClassVar[list[str]] = []
    # before its first step, a job may call this (a test's way to start other work)
    on_start: Any = None

    @classmethod
    def reset(cls) -> None:
        cls.running, cls.jobs, cls.on_start = False, 0, None
        cls.threads = set()
        cls.received_meanwhile = []

    @classmethod
    def install(cls, monkeypatch: pytest.MonkeyPatch) -> None:
        real = decide._prepared

        def recorded(*args: Any) -> Generator[None, None, RobotsTxt]:
            cls.jobs += 1
            steps = real(*args)
            cls.running = True
            try:
                if cls.on_start is not None:
                    yield from cls.on_start()
                while True:
                    cls.threads.add(threading.get_ident())
                    try:
                        next(steps)
                    except StopIteration as done:
                        robots: RobotsTxt = done.value
                        return robots
                    yield
            finally:
                cls.running = False

        monkeypatch.setattr(decide, "_prepared", recorded)


@pytest.mark.slow
@pytest_twisted.ensureDeferred
async def test_hostile_file_is_parsed_and_compiled_in_steps_on_the_reactor(
    mockserver: Any, run_crawl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = hostile_file()
    parses: list[int] = []  # the size of each parse in one piece (none of them large)
    real_parse = RobotsTxt.parse.__func__  # type: ignore[attr-defined]

    def counted(cls: type[RobotsTxt], content: Any, *args: Any, **kwargs: Any) -> RobotsTxt:
        parses.append(len(content))
        return real_parse(cls, content, *args, **kwargs)  # type: ignore[no-any-return]

    largest: dict[str, float] = {"at once": float("inf"), "steps": float("inf")}
    # each mode twice, alternating, keeping each mode's smallest largest gap: the
    # machine is shared, and the first crawl of a session also pays for imports
    for mode in ("at once", "steps", "at once", "steps"):
        monkeypatch.undo()
        Steps.reset()
        Steps.install(monkeypatch)
        monkeypatch.setattr(RobotsTxt, "parse", classmethod(counted))
        parses.clear()
        if mode == "at once":  # the synchronous path: nothing is large enough
            monkeypatch.setattr(decide, "STEPPED_OCTETS", sys.maxsize)
            monkeypatch.setattr(decide, "STEPPED_RULES", sys.maxsize)
        hostile = mockserver.unique_host(f"hostile-{mode.replace(' ', '-')}")
        normal = mockserver.unique_host(f"normal-{mode.replace(' ', '-')}")
        mockserver.configure(hostile, {"robots": {"body": body}})
        mockserver.configure(normal, {"robots": {"body": "User-agent: *\nDisallow: /no\n"}})
        GapWatch.host = hostile
        long_path = "/page/" + "a" * 2000
        hostile_paths = [long_path, "/private", "/private/2"]
        normal_paths = [f"/n{i}" for i in range(20)] + ["/no"]
        urls = [mockserver.url(hostile, p) for p in hostile_paths]
        urls += [mockserver.url(normal, p) for p in normal_paths]
        crawler = await run_crawl(urls, settings=REP)
        # nothing lost either way: the same verdicts, every allowed page downloaded
        assert sorted(mockserver.paths(hostile)) == sorted(["/robots.txt", long_path])
        assert sorted(mockserver.paths(normal)) == sorted(["/robots.txt", *normal_paths[:-1]])
        assert crawler.stat("robotstxt/forbidden") == 3
        assert GapWatch.ticks_in_window > 0
        largest[mode] = min(largest[mode], GapWatch.largest)
        if mode == "at once":
            assert Steps.jobs == 0
            continue
        # one preparation for all the hostile origin's requests (the others await
        # it), every step of it on the reactor's thread (the test runs there), and
        # the reactor turned between its steps: its 5 ms timer fired meanwhile
        assert Steps.jobs == 1
        assert Steps.threads == {threading.get_ident()}
        assert GapWatch.ticks_in_steps > 0
        # nothing parsed the large file in one piece: not the checks, not the usage
        # preferences (REP_USAGE_MODE "record" reads them for every request)
        assert all(size < decide.STEPPED_OCTETS for size in parses)
    # The parse and the first check's compile of this file (~30 and ~35 ms of CPU)
    # block the reactor in one piece on the synchronous path; in steps the reactor
    # gets a turn every stepping.STEP_BUDGET (1 ms) plus one step. A timing, so
    # printed for the reader of `pytest -s`, not asserted.
    print(f"largest reactor gap: {largest}")


@pytest_twisted.ensureDeferred
async def test_other_origins_are_crawled_between_the_steps(
    mockserver: Any, run_crawl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the hostile file's steps are under way, other origins' requests are
    decided and downloaded: the preparation, once started, asks the engine for
    another origin's pages and goes on only once they have come back (which could
    never happen if the steps held the reactor), a bounded number of turns."""
    Steps.reset()
    Steps.install(monkeypatch)
    hostile = mockserver.unique_host("hostile-meanwhile")
    normal = mockserver.unique_host("normal-meanwhile")
    mockserver.configure(hostile, {"robots": {"body": hostile_file()}})
    mockserver.configure(normal, {"robots": {"body": "User-agent: *\nDisallow: /no\n"}})
    normal_paths = [f"/n{i}" for i in range(5)]
    wanted = {mockserver.url(normal, p) for p in normal_paths}

    def meanwhile() -> Generator[None, None, None]:
        for url in sorted(wanted):
            GapWatch.crawler.engine.crawl(Request(url, dont_filter=True))
        turns = 0
        while not wanted.issubset(Steps.received_meanwhile) and turns < 200_000:
            turns += 1
            yield

    Steps.on_start = meanwhile
    GapWatch.host = hostile
    crawler = await run_crawl(
        [mockserver.url(hostile, "/page/x"), mockserver.url(hostile, "/private")], settings=REP
    )
    assert Steps.jobs == 1
    assert Steps.threads == {threading.get_ident()}
    # the other origin's robots.txt and pages were fetched while the steps waited
    assert wanted.issubset(Steps.received_meanwhile)
    assert mockserver.url(normal, "/robots.txt") in Steps.received_meanwhile
    assert sorted(mockserver.paths(hostile)) == ["/page/x", "/robots.txt"]
    assert sorted(mockserver.paths(normal)) == sorted(["/robots.txt", *normal_paths])
    assert crawler.stat("robotstxt/forbidden") == 1


class QueryingSpider(ListSpider):
    """A ``robots_parsed`` receiver that queries the parser it gets, as a user's
    extension would: the query must not parse the file again on the reactor."""

    name = "querying"
    answers: ClassVar[list[tuple[bool, bool, int]]] = []

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> QueryingSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.on_robots_parsed, signal=signals.robots_parsed)
        return spider

    def on_robots_parsed(self, robotparser: Any, request: Request) -> None:
        QueryingSpider.answers.append(
            (
                robotparser.allowed(urljoin(request.url, "/page/x"), "MyBot/1.0"),
                robotparser.allowed(urljoin(request.url, "/private"), "MyBot/1.0"),
                threading.get_ident(),
            )
        )


@pytest.mark.skipif(
    not hasattr(signals, "robots_parsed"),
    reason="needs Scrapy 2.18+: the robots_parsed signal is new there",
)
@pytest_twisted.ensureDeferred
async def test_robots_parsed_receivers_get_the_copy_prepared_in_steps(
    mockserver: Any, run_crawl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The RobotParser handed to robots_parsed carries the crawl's own parsed copy: a
    receiver querying it parses nothing, and the file is parsed once, in steps on the
    reactor, with the crawler's group prepared there too; never in one piece."""
    body = hostile_file().encode()
    parses: list[int] = []  # each parse of the hostile file in one piece
    real_parse = RobotsTxt.parse.__func__  # type: ignore[attr-defined]

    def counted(cls: type[RobotsTxt], content: Any, *args: Any, **kwargs: Any) -> RobotsTxt:
        if len(content) >= decide.STEPPED_OCTETS:  # (the hostile file, size-capped)
            parses.append(threading.get_ident())
        return real_parse(cls, content, *args, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(RobotsTxt, "parse", classmethod(counted))
    Steps.reset()
    Steps.install(monkeypatch)
    QueryingSpider.answers = []
    hostile = mockserver.unique_host("hostile-signal")
    mockserver.configure(hostile, {"robots": {"body": body.decode()}})
    settings = {**REP, "USER_AGENT": "MyBot/1.0", "EXTENSIONS": {}}
    crawler = await run_crawl(
        [mockserver.url(hostile, "/page/x"), mockserver.url(hostile, "/private")],
        settings=settings,
        spider_cls=QueryingSpider,
    )
    assert sorted(mockserver.paths(hostile)) == ["/page/x", "/robots.txt"]
    assert crawler.stat("robotstxt/forbidden") == 1
    reactor_thread = threading.get_ident()  # (the test runs on the reactor's thread)
    # the receiver ran on the reactor and got the crawl's verdicts
    assert [a[:2] for a in QueryingSpider.answers] == [(True, False)]
    assert QueryingSpider.answers[0][2] == reactor_thread
    # no parse in one piece; one preparation in steps (the signal's; the checks
    # reused its copy), every step on the reactor's thread
    assert parses == []
    assert Steps.jobs == 1
    assert Steps.threads == {reactor_thread}


@pytest.mark.skipif(
    not hasattr(signals, "robots_parsed"),
    reason="needs Scrapy 2.18+: the robots_parsed signal is new there",
)
@pytest_twisted.ensureDeferred
async def test_robots_parsed_copy_failing_loses_no_request(
    mockserver: Any, run_crawl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If preparing the copy for robots_parsed fails, the receiver still gets a parser
    (parsing on use), the error is logged, and the origin's requests go on."""

    async def broken(*args: Any) -> RobotsTxt:
        raise RuntimeError("boom")

    monkeypatch.setattr(decide.Decider, "parsed_for", broken)
    QueryingSpider.answers = []
    host = mockserver.unique_host("failing-copy")
    mockserver.configure(host, {"robots": {"body": "User-agent: *\nDisallow: /private\n"}})
    settings = {**REP, "USER_AGENT": "MyBot/1.0", "EXTENSIONS": {}}
    crawler = await run_crawl(
        [mockserver.url(host, "/page/x"), mockserver.url(host, "/private")],
        settings=settings,
        spider_cls=QueryingSpider,
    )
    assert sorted(mockserver.paths(host)) == ["/page/x", "/robots.txt"]
    assert crawler.stat("robotstxt/forbidden") == 1
    assert [a[:2] for a in QueryingSpider.answers] == [(True, False)]
    assert any("robots_parsed" in r.getMessage() for r in crawler.log_records)


@pytest_twisted.ensureDeferred
async def test_a_copy_dropped_from_the_cache_is_not_parsed_again_in_one_piece(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Decider.parsed(), which the usage preferences call right after decide(), answers
    with the copy the last steps made even when its origin was unloaded from RAM while
    the steps ran (the request in flight): it never parses a large file in one piece on
    the reactor."""
    crawler = get_crawler(settings_dict=REP)
    origins = Origins(10)
    decider = decide.Decider(crawler, Config.from_settings(crawler.settings), origins)
    body = hostile_file().encode()
    origin = "https://hostile.test"
    rt = origins.get(origin)
    # (run as Scrapy runs a middleware's coroutine: on the asyncio loop)
    preparing = deferred_from_coro(decider.robots_for(rt, body, "MyBot"))
    assert not preparing.called  # the steps are under way
    origins.unload(rt)  # (what REP_MEMORY_MAX_BYTES does to an idle origin)
    robots = await preparing

    def no_parse(*args: Any, **kwargs: Any) -> RobotsTxt:
        raise AssertionError("parsed in one piece")

    monkeypatch.setattr(RobotsTxt, "parse", no_parse)
    assert decider.parsed(rt, body) is robots
    assert decider.parsed(rt, body).allowed(f"{origin}/private", "MyBot") is False
    assert rt.parsed_bytes == parsed_bytes(body)  # kept again, and counted
    origins.unload(rt)  # an unloaded origin's copy is not kept
    assert rt.parsed is None
