"""Held requests: what each costs, and what holding many costs the healthy crawl.

    python benchmarks/bench_held.py [--only bytes|crawl] [--held 40000] [--rounds 3]
        [--memory-bound N] [--store memory|sqlite|redis://...] [--no-durable]
        [--modes none,held,dropped,stock] [--profile]

1. Bytes per held request (no crawl): ``--count`` requests (a spider-method callback,
   cb_kwargs, a small meta, like a followed link) are held in a ``WaitingRoom``; the
   figure is tracemalloc's growth divided by the count, with everything in memory and
   with ``REP_MEMORY_MAX_HELD = 1`` (all spilled to Scrapy's disk queue: memory left in
   RAM, and bytes on disk per request). Also the time to hold and to take them back.
2. The healthy part of a crawl with many held requests. 1,000 origins: 800 healthy
   (5 pages each, ``*.up.test``) and 200 unreachable (``nxdomain*.down.test``: the
   names do not resolve, so robots.txt fails and their requests wait; one attempt
   each, as ``REP_RETRY_BACKOFF`` is an hour: retries run on the wall clock, and a
   slowed crawl would make more of them); ``--held`` requests spread over the 200 are
   yielded interleaved with the healthy pages. The figure is the time from the spider's
   start until its last healthy page. Each round crawls once in each mode, each crawl
   in a process of its own (no crawl inherits another's heap or garbage), in a rotating
   order (reversed every other round):

   - ``none``: the healthy pages only;
   - ``held``: the healthy pages and the extra requests, which scrapy-rep holds;
   - ``dropped``: the same spider yielding the same requests, which Scrapy itself drops
     at scheduling: ``allowed_domains`` leaves out ``down.test``, so OffsiteMiddleware's
     ``request_scheduled`` receiver rejects them, and scrapy-rep sees them only to learn
     that Offsite drops them (it holds none and fetches no robots.txt for them). Every
     request still goes through the spider, ``engine.crawl``, the signal and the engine's
     start loop, so this is "the same work minus holding": Scrapy's share. What holding
     adds beyond it is scrapy-rep's gate, the room, the robots.txt fetches of the 200
     origins, and the scheduler's dupefilter asked for each held request (dedup at hold
     time; the scheduler would ask it for them too if they were ever scheduled, but the
     dropped requests never reach it). **The target, <= 1.10x, is held / dropped.**
   - ``stock``: Scrapy's stock middleware on the ``held`` crawl (it lets the 40,000 go to
     the downloader, where their host names fail): what a user has today.

   ``held / none`` is printed as well (the spider's and Scrapy's own cost of 40,000
   extra requests included). Per-round ratios, their median and range, of the wall
   time and of the crawl process's CPU time to the same point (steadier on a shared
   machine: other processes' load moves the wall clock far more). ``--memory-bound``
   sets REP_MEMORY_MAX_HELD (default 100,000: nothing spills; 10,000 spills 30,000);
   ``--store sqlite`` uses a SQLite store per crawl, where durable waiting records each
   held request in the store (``--no-durable`` turns that off). ``REP_IDLE_WAIT = 0``
   ends the crawl as soon as only held requests remain; the time to then drop them all
   is printed too. ``--profile`` runs one held crawl under cProfile instead and lists
   scrapy-rep's own functions.
"""

from __future__ import annotations

import argparse
import functools
import gc
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import (
    QUIET,
    REP,
    STOCK,
    LocalServer,
    ServerAt,
    child_result,
    install_reactor,
    median,
    print_result,
    run_on_reactor,
)


def _spider_and_crawler(tmp: Path | None) -> tuple[Any, Any]:
    import scrapy
    from scrapy.utils.test import get_crawler

    class LinkSpider(scrapy.Spider):
        name = "links"

        def parse_item(self, response: Any, page: int) -> None:
            pass

    settings = {"JOBDIR": str(tmp)} if tmp is not None else {}
    crawler = get_crawler(LinkSpider, settings)
    crawler.spider = crawler._create_spider()
    return crawler.spider, crawler


def bytes_per_held(count: int) -> None:
    from scrapy import Request

    from scrapy_rep.crawl.durable_waiting import DurableWaiting
    from scrapy_rep.crawl.request_codec import RequestCodec
    from scrapy_rep.crawl.waiting_room import Spill, WaitingRoom, spill_root

    for label, bound in (("in memory", 10**9), ("spilled", 1)):
        tmp = Path(tempfile.mkdtemp(prefix="bench-held-"))
        spider, crawler = _spider_and_crawler(tmp)
        room = WaitingRoom(
            DurableWaiting(),
            time.time,
            lambda *a: None,
            lambda *a: None,
            memory_bound=bound,
            make_spill=functools.partial(Spill, spill_root(crawler.settings)),
            codec=RequestCodec(crawler),
        )
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        started = time.perf_counter()
        for i in range(count):
            # built here, so what stays in RAM (the request itself, or nothing once
            # spilled) is counted
            request = Request(
                f"http://site{i % 200}.test/section/{i}/page.html?ref=list&n={i}",
                callback=spider.parse_item,
                cb_kwargs={"page": i},
                meta={"depth": 2},
            )
            room.hold(f"http://site{i % 200}.test", request)
        del request
        held_s = time.perf_counter() - started
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        disk = sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file())
        started = time.perf_counter()
        taken = sum(len(room.take(f"http://site{i}.test")) for i in range(200))
        take_s = time.perf_counter() - started
        assert taken == count, (taken, count)
        room.close()
        shutil.rmtree(tmp, ignore_errors=True)
        print(
            f"{label:>10}: {grown / count:7.0f} B of RAM per held request (the request "
            f"included), {disk / count:6.0f} B on disk; build and hold "
            f"{held_s / count * 1e6:5.1f} us, "
            f"take back {take_s / count * 1e6:5.1f} us per request"
        )


HEALTHY_DOMAIN = "up.test"
DOWN_DOMAIN = "down.test"
# What each crawl of a round is (see the module docstring):
#   none    the healthy pages only (scrapy-rep)
#   held    + the extra requests, which scrapy-rep holds (their robots.txt is unreachable)
#   dropped + the same extra requests, dropped by Scrapy itself at scheduling
#           (OffsiteMiddleware: their domain is not in allowed_domains): Scrapy's share
#   stock   + the same extra requests, with Scrapy's stock middleware instead of scrapy-rep
MODES = ("none", "held", "dropped", "stock")


def _bench_spider_class() -> type:
    import scrapy

    class HeldBenchSpider(scrapy.Spider):
        """Yields its URLs as plain requests (no ``dont_filter``, which OffsiteMiddleware
        would honour), and records when each healthy host's last page arrived, in wall
        time and in this process's CPU time."""

        name = "held-bench"

        def __init__(self, urls: list[str], domains: list[str], **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.urls = urls
            self.allowed_domains = domains
            self.done_at = 0.0
            self.cpu_done_at = 0.0
            self.pages = 0
            self.failed = 0
            self.started_at = 0.0
            self.cpu_started_at = 0.0

        async def start(self) -> Any:
            self.started_at = time.perf_counter()
            self.cpu_started_at = time.process_time()
            for url in self.urls:
                yield scrapy.Request(url, callback=self.parse, errback=self.failure)

        def parse(self, response: Any) -> None:
            self.pages += 1
            self.done_at = time.perf_counter()
            self.cpu_done_at = time.process_time()

        def failure(self, failure: Any) -> None:
            # the stock middleware lets the unreachable origins' requests through; their
            # downloads fail (no address): counted, not logged one by one
            self.failed += 1

    return HeldBenchSpider


async def _crawl(urls: list[str], domains: list[str], settings: dict[str, Any]) -> Any:
    from scrapy.crawler import Crawler, CrawlerRunner
    from scrapy.utils.defer import maybe_deferred_to_future

    all_settings = {**QUIET, **settings}
    crawler = Crawler(_bench_spider_class(), all_settings)
    await maybe_deferred_to_future(
        CrawlerRunner(all_settings).crawl(crawler, urls=urls, domains=domains)
    )
    return crawler


def _mode_settings(mode: str, base: dict[str, Any], tmp: Path, tag: str) -> dict[str, Any]:
    if mode == "stock":
        return {**STOCK, "CONCURRENT_REQUESTS": base["CONCURRENT_REQUESTS"]}
    settings = dict(base)
    if settings["REP_STORAGE"] == "sqlite":
        # a store of its own per crawl: no crawl finds what another one fetched
        settings["REP_STORAGE"] = f"sqlite:{tmp / f'{tag}-{mode}.sqlite'}"
    return settings


def _round_urls(server: ServerAt, held: int, run: int) -> tuple[list[str], list[str]]:
    """(the healthy pages, the pages with the waiting requests interleaved) of a round:
    its own host names, so no crawl finds another's robots.txt in a store."""
    healthy = [f"ok{i}.r{run}.{HEALTHY_DOMAIN}" for i in range(800)]
    # "nxdomain" names fail to resolve (tests/support/resolver.py): robots.txt unreachable
    down = [f"nxdomain{i}.r{run}.{DOWN_DOMAIN}" for i in range(200)]
    pages = [server.url(h, f"/p{j}") for j in range(5) for h in healthy]
    waiting = [server.url(down[i % 200], f"/w{i}") for i in range(held)]
    # interleaved, as links to unreachable sites turn up among healthy ones
    step = max(len(waiting) // len(pages), 1)
    mixed: list[str] = []
    for index, page in enumerate(pages):
        mixed.append(page)
        mixed.extend(waiting[index * step : (index + 1) * step])
    mixed.extend(waiting[len(pages) * step :])
    return pages, mixed


def base_settings(memory_bound: int, store: str, durable: bool) -> dict[str, Any]:
    """The settings of every scrapy-rep crawl of the benchmark."""
    return {
        **REP,
        "CONCURRENT_REQUESTS": 64,
        "REP_IDLE_WAIT": 0,
        "REP_FETCH_TIMEOUT": 5,
        # One robots.txt attempt per unreachable origin in every crawl. The retries run
        # on the wall clock (10 s, doubling): a crawl slowed down, under cProfile or
        # callgrind (50x), would make several times the attempts of the timed crawl it
        # stands for, and count them as the cost of holding.
        "REP_RETRY_BACKOFF": 3600,
        "REP_MAX_RETRY_BACKOFF": 3600,
        "REP_MEMORY_MAX_HELD": memory_bound,
        "REP_STORAGE": store,
        "REP_DURABLE_WAITING": durable,
    }


def configure_round(server: LocalServer, run: int) -> None:
    """The healthy origins of round *run* serve their robots.txt."""
    pages, _ = _round_urls(server, 0, run)
    hosts = sorted({url.split("/")[2].split(":")[0] for url in pages})
    robots = {"robots": {"body": "User-agent: *\nDisallow: /private\n"}}
    server.configure({host: robots for host in hosts})


def crawl_child(args: argparse.Namespace) -> None:
    """One crawl of one mode (``--child``), in a process of its own: no crawl inherits
    another's heap, garbage or warmed caches. Prints one RESULT line."""

    mode, run, held = args.child, args.round, args.held
    tmp = Path(tempfile.mkdtemp(prefix="bench-held-crawl-"))
    base = base_settings(args.memory_bound, args.store, not args.no_durable)
    pages, mixed = _round_urls(ServerAt(args.port), held, run)
    domains = [HEALTHY_DOMAIN] if mode == "dropped" else [HEALTHY_DOMAIN, DOWN_DOMAIN]
    outcome: dict[str, Any] = {}

    async def one() -> None:
        urls = pages if mode == "none" else mixed
        gc.collect()
        crawler = await _crawl(urls, domains, _mode_settings(mode, base, tmp, f"r{run}"))
        spider = crawler.spider
        assert spider.pages >= len(pages), (mode, spider.pages)
        outcome["wall"] = spider.done_at - spider.started_at
        outcome["cpu"] = spider.cpu_done_at - spider.cpu_started_at
        outcome["robots_downloads"] = crawler.stats.get_value("robotstxt/download_count", 0)
        if mode == "held":
            stats = crawler.stats.get_stats()
            dropped = stats.get("robotstxt/dropped_at_close", 0)
            kept = stats.get("robotstxt/kept_in_store", 0)
            assert dropped + kept == held, (dropped, kept, held)
            outcome["stop"] = time.perf_counter() - spider.done_at
        if mode == "dropped":
            filtered = crawler.stats.get_value("offsite/filtered", 0)
            assert filtered == held, (filtered, held)

    try:
        ok = run_on_reactor(install_reactor(), one)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not ok:
        sys.exit(1)
    print_result(outcome)


def _run_child(args: argparse.Namespace, mode: str, run: int, port: int) -> dict[str, Any]:
    command = [
        sys.executable, __file__, "--child", mode, "--round", str(run), "--port", str(port),
        "--held", str(args.held), "--memory-bound", str(args.memory_bound),
        "--store", args.store,
    ]  # fmt: skip
    if args.no_durable:
        command.append("--no-durable")
    return child_result(command, f"the {mode} crawl of round {run}")


def healthy_part(server: LocalServer, args: argparse.Namespace, modes: tuple[str, ...]) -> None:
    """Rounds of one crawl per mode, each crawl in a process of its own, the order
    rotated (and reversed every other round) so no mode is always first or always
    after the same one; ratios are taken within a round, then their median."""
    import os

    results: dict[str, list[tuple[float, float]]] = {mode: [] for mode in modes}
    stops: list[float] = []
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    for run in range(args.rounds):
        configure_round(server, run)
        shift = run % len(modes)
        order = list(modes[shift:] + modes[:shift])
        if run % 2:
            order.reverse()
        times: dict[str, tuple[float, float]] = {}
        for mode in order:
            result = _run_child(args, mode, run, server.port)
            times[mode] = (result["wall"], result["cpu"])
            results[mode].append(times[mode])
            if "stop" in result:
                stops.append(result["stop"])
        print(f"round {run}: " + _round_line(times), flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(_summary(results, stops, args.held))


def _ratios(results: dict[str, list[tuple[float, float]]], a: str, b: str, i: int) -> list[float]:
    return [x[i] / y[i] for x, y in zip(results[a], results[b], strict=True)]


def _round_line(times: dict[str, tuple[float, float]]) -> str:
    parts = [f"{mode} {wall:.2f} s (cpu {cpu:.2f} s)" for mode, (wall, cpu) in times.items()]
    line = ", ".join(parts)
    if "held" in times:
        for ref in ("dropped", "none"):
            if ref in times:
                line += f"; held/{ref} {times['held'][0] / times[ref][0]:.3f}x"
    if "stock" in times and "dropped" in times:
        line += f"; stock/dropped {times['stock'][0] / times['dropped'][0]:.3f}x"
    return line


def _summary(results: dict[str, list[tuple[float, float]]], stops: list[float], held: int) -> str:
    lines = [
        "healthy part, median (range) of the per-round ratios, wall clock and the CPU "
        "time of the crawl's own process, from the spider's start to its last healthy page:"
    ]
    pairs = (
        ("held", "dropped", "with held / Scrapy's share (the fair reference); target <= 1.10x"),
        ("held", "none", "with held / none held at all"),
        ("dropped", "none", "Scrapy's share: extra requests dropped by Scrapy / none"),
        ("stock", "dropped", "stock middleware on the same crawl / Scrapy's share"),
    )
    for a, b, label in pairs:
        if results.get(a) and results.get(b):
            wall = _ratios(results, a, b, 0)
            cpu = _ratios(results, a, b, 1)
            lines.append(
                f"  {a}/{b}: wall {median(wall):.3f}x ({min(wall):.3f}-{max(wall):.3f}); "
                f"cpu {median(cpu):.3f}x ({min(cpu):.3f}-{max(cpu):.3f})  ({label})"
            )
    if stops:
        lines.append(
            f"from the last healthy page to the end of the crawl (idle close, {held} "
            f"waiting requests dropped or kept): median {median(stops):.2f} s"
        )
    return "\n".join(lines)


def profile_held(server: LocalServer, held: int, bound: int, store: str, durable: bool) -> None:
    """One held crawl under cProfile: scrapy-rep's own functions, by total time."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()

    async def one() -> None:
        tmp = Path(tempfile.mkdtemp(prefix="bench-held-prof-"))
        healthy = [f"ok{i}.rp.{HEALTHY_DOMAIN}" for i in range(800)]
        down = [f"nxdomain{i}.rp.{DOWN_DOMAIN}" for i in range(200)]
        pages = [server.url(h, f"/p{j}") for j in range(5) for h in healthy]
        waiting = [server.url(down[i % 200], f"/w{i}") for i in range(held)]
        step = max(len(waiting) // len(pages), 1)
        mixed = []
        for index, page in enumerate(pages):
            mixed.append(page)
            mixed.extend(waiting[index * step : (index + 1) * step])
        settings = {
            **REP,
            "CONCURRENT_REQUESTS": 64,
            "REP_IDLE_WAIT": 0,
            "REP_MEMORY_MAX_HELD": bound,
            "REP_STORAGE": store,
            "REP_DURABLE_WAITING": durable,
        }
        profiler.enable()
        await _crawl(
            mixed, [HEALTHY_DOMAIN, DOWN_DOMAIN], _mode_settings("held", settings, tmp, "p")
        )
        profiler.disable()
        shutil.rmtree(tmp, ignore_errors=True)

    reactor = install_reactor()
    run_on_reactor(reactor, one)
    stats = pstats.Stats(profiler)
    total = sum(row[2] for row in stats.stats.values())  # type: ignore[attr-defined]
    ours = {k: v for k, v in stats.stats.items() if "scrapy_rep" in k[0]}  # type: ignore[attr-defined]
    own = sum(row[2] for row in ours.values())
    print(
        f"profile: {total:.2f} s in all, {own:.2f} s in scrapy-rep's own functions "
        f"({own / max(held, 1) * 1e6:.1f} us per held request, profiler overhead included)"
    )
    for key, row in sorted(ours.items(), key=lambda kv: -kv[1][2])[:15]:
        print(
            f"  {row[2]:7.3f} s own {row[3]:7.3f} s cumulative {row[1]:8d} calls  "
            f"{key[2]} ({Path(key[0]).name}:{key[1]})"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=("bytes", "crawl"))
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--held", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--memory-bound", type=int, default=100_000, help="REP_MEMORY_MAX_HELD")
    parser.add_argument(
        "--store", default="memory", help="REP_STORAGE: memory (default), sqlite, redis://..."
    )
    parser.add_argument(
        "--no-durable", action="store_true", help="REP_DURABLE_WAITING = False (shared stores)"
    )
    parser.add_argument(
        "--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}"
    )
    parser.add_argument(
        "--profile", action="store_true", help="one held crawl under cProfile instead"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        crawl_child(args)
        return
    if args.only != "crawl" and not args.profile:
        bytes_per_held(args.count)
    if args.only == "bytes":
        return
    server = LocalServer("fast")
    try:
        if args.profile:
            profile_held(server, args.held, args.memory_bound, args.store, not args.no_durable)
            return
        modes = tuple(m for m in args.modes.split(",") if m)
        assert set(modes) <= set(MODES), modes
        healthy_part(server, args, modes)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
