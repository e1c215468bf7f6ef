"""A focused A/B of two crawl modes: pages/s and crawler CPU time per page.

    python benchmarks/bench_ab.py off rep --rounds 7                  # steady state
    python benchmarks/bench_ab.py rep rep-redis --shape many --rounds 8

Modes: off (ROBOTSTXT_OBEY off), null (off plus a downloader middleware of scrapy-rep's
shape that does nothing: what Scrapy charges any such middleware), stock, rep
(scrapy-rep, memory store), rep-usage-off (rep with ``REP_USAGE_MODE = "off"``),
rep-sqlite, rep-redis (needs redis-server on PATH). The two modes alternate, A first in
even rounds and B first in odd ones; the figure is the median of the per-round ratios
B / A, for pages/s (wall clock) and for CPU time per page (``time.process_time()`` of this
process, which runs the crawler; the server is another process), counted from the
spider's start to its last page, so start-up and close are left out. With only two modes
per round the pairs sit closer in time than in bench_crawl.py, so the machine's drift
cancels better; CPU time per page does not count waits at all.

Two CPU windows are printed, side by side, from the same crawls:
- *from start*: the spider's start to its last page (start-up and close left out),
  which includes each origin's first contact: robots.txt fetches, and the requests
  that arrive before their origin's robots.txt is known and wait for it;
- *steady*: from the page at which ``--warm`` of the pages (default 10 %) are done to
  the last page, once every origin is decided: the per-request path alone.
The spider asks for each origin's first page first, then the rest origin by origin, so
that every origin's first contact falls before the steady window. (Scrapy takes start
requests as it needs them, one origin at a time here: in plain origin-by-origin order,
nine of the ten robots.txt fetches, their waiting requests and their release fell inside
the steady window.) Each mode's robots.txt requests inside the window are counted and
printed; the steady figure is only the per-request path when that count is 0.
Every round's ratio is printed, then the median and quartiles; and the machine's load
average before and after (the figures are only as steady as the machine).

``--side-by-side`` runs each round's two crawls at the same time instead, each in a
process of its own with its own server (``--child``): on a shared machine whose load
comes and goes, the two then meet the same load at the same moments, where one after
the other they meet whatever load each ~7 s slot brings. ``bench_instructions.py
steady`` counts the same crawls in instructions instead, which the load does not move.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import (
    NULL,
    OFF,
    QUIET,
    REP,
    STOCK,
    LocalServer,
    child_result,
    install_reactor,
    make_spider_class,
    median,
    print_result,
    run_on_reactor,
    run_serving,
)

SHAPES = {"steady": (10, 300), "links": (10, 300), "many": (100, 10)}
# links: each origin's first LINKS pages are the start requests, and every page links to
# the one LINKS further on, as a crawl that follows links keeps its downloader busy: up to
# CONCURRENT_REQUESTS_PER_DOMAIN in flight per origin. In the other shapes every request
# is a start request, which Scrapy takes one per turn of its loop, so with this fast
# server only 2-3 requests are in flight, one origin at a time.
LINKS = 8
SETTINGS = {"CONCURRENT_REQUESTS": 32, "CONCURRENT_REQUESTS_PER_DOMAIN": 8}


def mode_settings(name: str, tmp: Path, redis_url: str | None, run: int) -> dict[str, Any]:
    if name == "off":
        return OFF
    if name == "null":
        return NULL
    if name == "stock":
        return STOCK
    if name == "rep":
        return REP
    if name == "rep-usage-off":  # without the usage doc in every request's meta
        return {**REP, "REP_USAGE_MODE": "off"}
    if name == "rep-sqlite":
        return {**REP, "REP_STORAGE": f"sqlite:{tmp / f'{run}.db'}"}
    if name == "rep-redis":
        if redis_url is None:
            sys.exit("rep-redis needs redis-server on PATH")
        import redis

        redis.Redis.from_url(redis_url).flushdb()  # a warm store would skip the fetches
        return {**REP, "REP_STORAGE": redis_url}
    sys.exit(f"unknown mode {name!r}")


# one crawl's figures: pages/s, CPU per page from start, CPU per page in the steady
# part, robots.txt requests made in the steady part
Figures = tuple[float, float, float, int]

# robots.txt requests so far (scrapy-rep's and the stock middleware's fetches both count)
ROBOTS_REQUESTS = "robotstxt/request_count"


def start_order(hosts: list[str], n_pages: int, url: Any) -> list[str]:
    """Every origin's first page, then the rest origin by origin: each origin's first
    contact (its robots.txt fetch, the requests that wait for it) comes before the
    steady window, and the steady part keeps the origin-by-origin shape."""
    first = [url(h, "/p0") for h in hosts]
    return first + [url(h, f"/p{i}") for h in hosts for i in range(1, n_pages)]


async def crawl(
    urls: list[str], settings: dict[str, Any], warm_pages: int, links: dict[str, str]
) -> Any:
    """_harness.crawl's spider, which also notes the process CPU time at its
    ``warm_pages``-th page (``cpu_warm``), and follows *links* (page -> next page)."""
    from scrapy import Request
    from scrapy.crawler import Crawler, CrawlerRunner
    from scrapy.utils.defer import maybe_deferred_to_future

    base: Any = make_spider_class()

    class SteadySpider(base):  # type: ignore[misc]
        cpu_warm = 0.0
        robots_warm = 0
        robots_done = 0

        def parse(self, response: Any) -> Any:
            super().parse(response)
            if self.pages == warm_pages:
                self.cpu_warm = self.cpu_done
                self.robots_warm = self.crawler.stats.get_value(ROBOTS_REQUESTS, 0)
            self.robots_done = self.crawler.stats.get_value(ROBOTS_REQUESTS, 0)
            follow = links.get(response.url)
            if follow is not None:
                return [Request(follow, callback=self.parse, dont_filter=True)]
            return None

    all_settings = {**QUIET, **settings}
    crawler = Crawler(SteadySpider, all_settings)
    await maybe_deferred_to_future(CrawlerRunner(all_settings).crawl(crawler, urls=urls))
    return crawler.spider


async def one_crawl(
    server: LocalServer,
    name: str,
    shape: str,
    run: int,
    tmp: Path,
    redis_url: str | None,
    warm: float,
) -> Figures:
    """One crawl of mode *name* (its own host names) and its figures."""
    n_origins, n_pages = SHAPES[shape]
    total = n_origins * n_pages
    warm_pages = max(1, int(total * warm))
    hosts = [f"ab{run}-{name}-{i}.test" for i in range(n_origins)]
    robots = {"robots": {"body": "User-agent: *\nDisallow: /x\n"}}
    server.configure({host: robots for host in hosts})
    links: dict[str, str] = {}
    if shape == "links":
        pages = [[server.url(h, f"/p{i}") for i in range(n_pages)] for h in hosts]
        # (round robin: every origin's first contact comes first)
        urls = [origin[i] for i in range(LINKS) for origin in pages]
        links = {
            page: origin[i + LINKS] for origin in pages for i, page in enumerate(origin[:-LINKS])
        }
    else:
        urls = start_order(hosts, n_pages, server.url)
    settings = {**mode_settings(name, tmp, redis_url, run), **SETTINGS}
    gc.collect()
    spider = await crawl(urls, settings, warm_pages, links)
    assert spider.pages == total, f"{name}: {spider.pages} of {total} pages"
    rate = spider.pages / (max(spider.done_at.values()) - spider.started_at)
    # CPU from the spider's start to its last page: the crawler's start-up and close
    # (fixed costs that differ run to run) are left out
    cpu = spider.cpu_done - spider.cpu_started
    steady = (spider.cpu_done - spider.cpu_warm) / (total - warm_pages)
    in_window = spider.robots_done - spider.robots_warm
    return (rate, cpu / spider.pages, steady, in_window)


async def ab(
    server: LocalServer,
    modes: tuple[str, str],
    shape: str,
    rounds: int,
    redis_url: str | None,
    warm: float,
) -> dict[str, list[Figures]]:
    """The two modes one after the other in this process, A first in even rounds."""
    results: dict[str, list[Figures]] = {name: [] for name in modes}
    tmp = Path(tempfile.mkdtemp(prefix="rep-ab-"))
    try:
        for run in range(rounds):
            order = modes if run % 2 == 0 else modes[::-1]
            for name in order:
                figures = await one_crawl(server, name, shape, run, tmp, redis_url, warm)
                results[name].append(figures)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return results


def side_by_side(args: argparse.Namespace, redis_url: str | None) -> dict[str, list[Figures]]:
    """The two modes at the same time, each in a process of its own with its own
    server, every round: both crawls meet the same load on the machine at the same
    moments, so a busy machine moves their ratio far less than one after the other."""
    modes = (args.a, args.b)
    results: dict[str, list[Figures]] = {name: [] for name in modes}

    def child(name: str, run: int) -> Figures:
        command = [sys.executable, __file__, name, name, "--child", "--run", str(run)]
        command += ["--shape", args.shape, "--warm", str(args.warm)]
        if redis_url is not None:
            command += ["--redis-url", redis_url]
        found = child_result(command, f"the {name} crawl")
        return (found["rate"], found["cpu"], found["steady"], found["in_window"])

    with ThreadPoolExecutor(max_workers=2) as pool:
        for run in range(args.rounds):
            pending = {name: pool.submit(child, name, run) for name in modes}
            for name, future in pending.items():
                results[name].append(future.result())
    return results


def one_process(args: argparse.Namespace, redis_url: str | None) -> dict[str, list[Figures]]:
    """``ab`` on this process's reactor."""
    reactor = install_reactor()
    server = LocalServer("fast")
    outcome: dict[str, dict[str, list[Figures]]] = {}

    async def run() -> None:
        outcome["r"] = await ab(
            server, (args.a, args.b), args.shape, args.rounds, redis_url, args.warm
        )

    run_serving(reactor, server, run)
    return outcome["r"]


def run_child(args: argparse.Namespace) -> None:
    """``--child``: one crawl of mode ``a`` in this process; its figures printed."""
    reactor = install_reactor()
    server = LocalServer("fast")
    outcome: dict[str, Figures] = {}
    tmp = Path(tempfile.mkdtemp(prefix="rep-ab-"))

    async def run() -> None:
        outcome["f"] = await one_crawl(
            server, args.a, args.shape, args.run, tmp, args.redis_url, args.warm
        )

    try:
        succeeded = run_on_reactor(reactor, run)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if not succeeded:
        sys.exit("crawl failed (see the traceback above)")
    rate, cpu, steady, in_window = outcome["f"]
    print_result({"rate": rate, "cpu": cpu, "steady": steady, "in_window": in_window})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="steady")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--warm",
        type=float,
        default=0.1,
        help="share of the pages before the steady window starts (default 0.1)",
    )
    parser.add_argument(
        "--side-by-side",
        action="store_true",
        help="run the two modes at the same time, each in a process of its own, every "
        "round (steadier on a busy machine)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--run", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--redis-url", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(args)
        return
    load_before = os.getloadavg()
    redis = None
    if "rep-redis" in (args.a, args.b) and shutil.which("redis-server"):
        from tests.support.redis_server import RedisServer

        redis = RedisServer(shutil.which("redis-server") or "redis-server")
        redis.start()
    redis_url = redis.url if redis is not None else None
    try:
        res = side_by_side(args, redis_url) if args.side_by_side else one_process(args, redis_url)
    finally:
        if redis is not None:
            redis.stop()
    n_origins, n_pages = SHAPES[args.shape]
    print(
        f"{args.shape}: {n_origins} origins x {n_pages} pages, {args.rounds} rounds; "
        f"load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    for name in (args.a, args.b):
        rates = [r for r, _, _, _ in res[name]]
        cpus = [c * 1e6 for _, c, _, _ in res[name]]
        steady = [c * 1e6 for _, _, c, _ in res[name]]
        fetches = max(n for _, _, _, n in res[name])
        print(
            f"{name:<12} {median(rates):7.0f} pages/s   {median(cpus):7.0f} us CPU/page "
            f"from start   {median(steady):7.0f} us CPU/page steady   "
            f"robots.txt requests in the steady window: {fetches} (most in a round)"
        )
    pairs = list(zip(res[args.a], res[args.b], strict=True))
    rate_ratios = sorted(b[0] / a[0] for a, b in pairs)
    windows = (("from start", 1), (f"steady (after {args.warm:.0%} of the pages)", 2))
    for label, i in windows:
        ratios = sorted(b[i] / a[i] for a, b in pairs)
        print(f"per-round CPU per page ratios, {label}: " + " ".join(f"{r:.3f}" for r in ratios))
    summary = [
        f"pages/s {statistics.median(rate_ratios):.3f}x (quartiles {_quartiles(rate_ratios)})"
    ]
    for label, i in windows:
        ratios = sorted(b[i] / a[i] for a, b in pairs)
        summary.append(
            f"CPU per page {label} {statistics.median(ratios):.3f}x "
            f"(quartiles {_quartiles(ratios)})"
        )
    print(f"{args.b} / {args.a}: " + "; ".join(summary) + "; medians of per-round ratios")


def _quartiles(ordered: list[float]) -> str:
    if len(ordered) < 4:
        return "-"
    q1, _, q3 = statistics.quantiles(ordered, n=4)
    return f"{q1:.3f}-{q3:.3f}"


if __name__ == "__main__":
    main()
