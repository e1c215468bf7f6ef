"""scrapy-rep's own CPU per request in the steady state, hook by hook.

    python benchmarks/bench_hotpath.py               # 7 rounds of 3,000 requests
    python benchmarks/bench_hotpath.py --usage       # a robots.txt stating usage preferences

bench_ab.py gives the figure that counts (CPU per page against ROBOTSTXT_OBEY off),
but a 3 % question needs a quiet machine there. This one times only scrapy-rep's
work, in a loop that a busy machine disturbs less: a real crawl is started (memory
store, one origin, its robots.txt fetched), and once it is in its steady state the
middleware's hooks are called directly on fresh requests of that origin, each loop
timed with ``time.process_time()`` and the minimum of the rounds kept:

- the scheduling gate (``request_scheduled`` receiver) and Scrapy's dispatch of the
  signal to it (with minus without the receiver connected);
- ``process_request`` and ``process_response``, and the same two through Scrapy's
  downloader-middleware chain (with minus without them in it);
- the parts of the decision: ``RobotsTxt.explain`` against ``allowed`` (the engine's
  two checks of one URL), the stats call, the usage preferences.

A loop keeps its objects in the CPU caches, so a crawl spends more per request than
these figures: read them as where the time goes, and bench_ab.py for the total.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import QUIET, REP, LocalServer, install_reactor, run_serving

N_REQUESTS = 3_000
SETTINGS = {"CONCURRENT_REQUESTS": 32, "CONCURRENT_REQUESTS_PER_DOMAIN": 8}
ROBOTS = "User-agent: *\nDisallow: /x\n"
# --usage: the same rules with usage preferences (draft-ietf-aipref-attach), as a site
# that states them writes them: a group-wide Content-Usage, one path-scoped rule and a
# file-wide Content-Signal, so every request's usage document has sources to carry.
USAGE_ROBOTS = (
    "Content-Signal: search=yes, ai-train=no\n"
    "User-agent: *\nDisallow: /x\nContent-Usage: train-ai=n\nContent-Usage: /p/ search=y\n"
)


def drive(result: Any) -> Any:
    """The value of a coroutine that never waits (a plain value as it is)."""
    if not inspect.iscoroutine(result):
        return result
    try:
        while True:
            result.send(None)
    except StopIteration as done:
        return done.value


def cpu_per_item(loop: Callable[[list[Any]], None], items: list[Any]) -> float:
    """µs of CPU per item of one run of *loop*, the collector off while it runs."""
    gc.collect()
    gc.disable()
    try:
        started = time.process_time()
        loop(items)
        return (time.process_time() - started) / len(items) * 1e6
    finally:
        gc.enable()


def kept_per_item(loop: Callable[[list[Any]], None], items: list[Any]) -> float:
    """Objects of the collector's types (dicts, lists, tuples, ...) that one run of
    *loop* leaves alive per item: what the hooks add to a request for its whole life.
    Deterministic; each such object moves the collector towards its next collection
    while the request lives (the young generation's count, ``gc.get_count()``). The
    requests have no headers yet, as at this middleware's priority in a crawl: the
    product token's look-up makes the request's Headers, which Scrapy's own header
    middlewares would make next (one of process_request's objects, not an extra)."""
    gc.collect()
    gc.disable()
    try:
        before = gc.get_count()[0]
        loop(items)
        return (gc.get_count()[0] - before) / len(items)
    finally:
        gc.enable()


def each(call: Callable[[Any], Any]) -> Callable[[list[Any]], None]:
    def loop(items: list[Any]) -> None:
        for item in items:
            drive(call(item))

    return loop


def measure(spider: Any) -> dict[str, float]:
    """One round of every figure (µs per request), in the running crawl."""
    import scrapy
    from scrapy import signals
    from scrapy.http import HtmlResponse

    from scrapy_rep.crawl.sitemap import copy_response
    from scrapy_rep.middleware import RobotsTxtMiddleware

    crawler = spider.crawler
    manager = crawler.engine.downloader.middleware
    mw = next(m for m in manager.middlewares if isinstance(m, RobotsTxtMiddleware))
    urls = [f"{spider.base}/q{i}" for i in range(N_REQUESTS)]

    def fresh(*, gated: bool = False, decided: bool = False) -> list[Any]:
        requests = [scrapy.Request(u, callback=spider.parse, dont_filter=True) for u in urls]
        for request in requests:
            if gated or decided:
                mw._on_request_scheduled(request)
            if decided:
                drive(mw.process_request(request))
        return requests

    def respond(request: Any) -> Any:
        # with a header, as the download handler builds it (Response.headers is made on
        # first use: without one, process_response would pay for making it)
        headers = {"Content-Type": "text/html"}
        return HtmlResponse(request.url, body=b"<html></html>", headers=headers, request=request)

    figures: dict[str, float] = {}
    figures["gate"] = cpu_per_item(each(mw._on_request_scheduled), fresh())
    figures["process_request"] = cpu_per_item(each(mw.process_request), fresh(gated=True))
    pairs = [(r, respond(r)) for r in fresh(decided=True)]
    figures["process_response"] = cpu_per_item(each(lambda pair: mw.process_response(*pair)), pairs)
    # objects kept per request (counts, not µs; the same in every round)
    figures["objects kept: gate"] = kept_per_item(each(mw._on_request_scheduled), fresh())
    figures["objects kept: process_request"] = kept_per_item(
        each(mw.process_request), fresh(gated=True)
    )
    pairs = [(r, respond(r)) for r in fresh(decided=True)]
    figures["objects kept: process_response"] = kept_per_item(
        each(lambda pair: mw.process_response(*pair)), pairs
    )

    # Scrapy's dispatch: the signal and the middleware chain, with minus without us
    def send(request: Any) -> Any:
        return crawler.signals.send_catch_log(
            signals.request_scheduled, request=request, spider=spider
        )

    with_gate = cpu_per_item(each(send), fresh())
    crawler.signals.disconnect(mw._on_request_scheduled, signal=signals.request_scheduled)
    try:
        without_gate = cpu_per_item(each(send), fresh())
    finally:
        crawler.signals.connect(mw._on_request_scheduled, signal=signals.request_scheduled)
    figures["gate + signal dispatch"] = with_gate - without_gate

    responses: dict[Any, Any] = {}

    async def download(request: Any) -> Any:
        return responses[request]

    def chain(request: Any) -> Any:
        return manager.download_async(download, request)

    requests = fresh(gated=True)
    responses.update((r, respond(r)) for r in requests)
    with_us = cpu_per_item(each(chain), requests)
    hooks = manager.methods
    saved = {name: list(hooks[name]) for name in ("process_request", "process_response")}
    hooks["process_request"].remove(mw.process_request)
    hooks["process_response"].remove(mw.process_response)
    try:
        requests = fresh(gated=True)
        responses.update((r, respond(r)) for r in requests)
        without_us = cpu_per_item(each(chain), requests)
    finally:
        for name, methods in saved.items():
            hooks[name].clear()
            hooks[name].extend(methods)
    figures["both hooks + chain dispatch"] = with_us - without_us

    # parts of the decision
    sample = fresh()[0]
    origin = mw._origin_to_check(sample)
    assert origin is not None
    evaluation = mw.coordinator.evaluate(origin)
    rt = mw.coordinator.runtime(origin)
    robots = mw.decider.parsed(rt, evaluation.body)
    token = mw.decider.token_for(sample)
    requests = fresh()
    figures["  RobotsTxt.explain"] = cpu_per_item(
        each(lambda r: robots.explain(r.url, token)), requests
    )
    figures["  RobotsTxt.allowed"] = cpu_per_item(
        each(lambda r: robots.allowed(r.url, token)), requests
    )
    figures["  usage.on_request"] = cpu_per_item(
        each(lambda r: mw.usage.on_request(r, rt, evaluation)), requests
    )
    figures["  origin of the URL"] = cpu_per_item(each(mw._origin_to_check), requests)
    figures["  origins.fresh"] = cpu_per_item(
        each(lambda r: mw.origins.fresh(origin, mw.clock())), requests
    )
    figures["  product token"] = cpu_per_item(each(mw.decider.token_for), requests)
    figures["  decide_now (token, verdict, meta)"] = cpu_per_item(
        each(lambda r: mw.decider.decide_now(r, evaluation, rt)), fresh()
    )
    figures["  sitemap copy check"] = cpu_per_item(
        each(lambda r: copy_response(crawler, r, evaluation, rt.record)), requests
    )
    figures["  stats.inc_value"] = cpu_per_item(
        each(lambda r: crawler.stats.inc_value("bench/x")), requests
    )
    crawler.stats.set_value("bench/x", 0)
    return figures


def make_spider(rounds: int, found: list[dict[str, float]]) -> type:
    import scrapy

    class HotPathSpider(scrapy.Spider):
        name = "hotpath"

        def __init__(self, base: str = "", **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.base = base
            self.pages = 0

        async def start(self) -> Any:
            # warm-up pages: the origin's robots.txt fetched and its group compiled
            for i in range(20):
                yield scrapy.Request(f"{self.base}/w{i}", callback=self.parse, dont_filter=True)

        def parse(self, response: Any) -> None:
            self.pages += 1
            if self.pages == 20:
                found.extend(measure(self) for _ in range(rounds))

    return HotPathSpider


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--usage", action="store_true", help="a robots.txt that states usage preferences"
    )
    args = parser.parse_args()
    reactor = install_reactor()
    server = LocalServer("fast")
    found: list[dict[str, float]] = []

    async def run() -> None:
        from scrapy.crawler import Crawler, CrawlerRunner
        from scrapy.utils.defer import maybe_deferred_to_future

        robots = USAGE_ROBOTS if args.usage else ROBOTS
        server.configure({"hot.test": {"robots": {"body": robots}}})
        settings = {**QUIET, **REP, **SETTINGS}
        crawler = Crawler(make_spider(args.rounds, found), settings)
        base = server.url("hot.test", "")
        await maybe_deferred_to_future(CrawlerRunner(settings).crawl(crawler, base=base))

    run_serving(reactor, server, run)
    if len(found) != args.rounds:
        sys.exit("benchmark failed (see the traceback above)")
    print(f"{N_REQUESTS} requests of one origin, {args.rounds} rounds: µs of CPU per request")
    for name in found[0]:
        print(f"{name:<30} {_summary(r[name] for r in found)}")


def _summary(values: Iterable[float]) -> str:
    ordered = sorted(values)
    return f"min {ordered[0]:6.2f}  median {statistics.median(ordered):6.2f}"


if __name__ == "__main__":
    main()
