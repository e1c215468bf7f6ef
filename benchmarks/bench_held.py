"""Held requests: what each costs, and what holding many costs the healthy crawl.

    python benchmarks/bench_held.py [--only bytes|crawl] [--held 40000] [--rounds 3]

1. Bytes per held request (no crawl): ``--count`` requests (a spider-method callback,
   cb_kwargs, a small meta, like a followed link) are held in a ``WaitingRoom``; the
   figure is tracemalloc's growth divided by the count, with everything in memory and
   with ``REP_MEMORY_MAX_HELD = 1`` (all spilled to Scrapy's disk queue: memory left in
   RAM, and bytes on disk per request). Also the time to hold and to take them back.
2. The healthy part of a crawl with many held requests. 1,000 origins: 800 healthy
   (5 pages each) and 200 unreachable (their names do not resolve: robots.txt fails
   with a DNS error, so their requests wait); ``--held`` requests spread over the 200
   are yielded interleaved with the healthy pages. The figure is the time until every
   healthy page is crawled, divided by the same crawl without the unreachable
   origins, in the same round. Target: <= 1.10x. ``--memory-bound`` sets
   REP_MEMORY_MAX_HELD (default 100,000: nothing spills; 10,000 spills 30,000).
   ``REP_IDLE_WAIT = 0`` ends the crawl as soon as only held requests remain; the time
   to then drop them all is printed too.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import REP, LocalServer, crawl, install_reactor, median, run_on_reactor


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

    from scrapy_rep.crawl.ledger import NullLedger
    from scrapy_rep.crawl.spill import Spill
    from scrapy_rep.crawl.waiting_room import WaitingRoom

    for label, bound in (("in memory", 10**9), ("spilled", 1)):
        tmp = Path(tempfile.mkdtemp(prefix="bench-held-"))
        spider, crawler = _spider_and_crawler(tmp)
        room = WaitingRoom(
            NullLedger(),
            time.time,
            lambda *a: None,
            lambda *a: None,
            memory_bound=bound,
            make_spill=lambda crawler=crawler: Spill(crawler),
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


async def healthy_part(server: LocalServer, held: int, rounds: int, bound: int) -> None:
    ratios: list[float] = []
    stops: list[float] = []
    for run in range(rounds):
        healthy = [f"ok{i}-r{run}.test" for i in range(800)]
        down = [f"nxdomain-down{i}-r{run}.test" for i in range(200)]
        server.configure(
            {h: {"robots": {"body": "User-agent: *\nDisallow: /private\n"}} for h in healthy}
        )
        pages = [server.url(h, f"/p{j}") for j in range(5) for h in healthy]
        waiting = [server.url(down[i % 200], f"/w{i}") for i in range(held)]
        # interleaved, as links to unreachable sites turn up among healthy ones
        step = max(len(waiting) // len(pages), 1)
        mixed: list[str] = []
        for index, page in enumerate(pages):
            mixed.append(page)
            mixed.extend(waiting[index * step : (index + 1) * step])
        mixed.extend(waiting[len(pages) * step :])
        settings = {
            **REP,
            "CONCURRENT_REQUESTS": 64,
            "REP_IDLE_WAIT": 0,
            "REP_FETCH_TIMEOUT": 5,
            "REP_MEMORY_MAX_HELD": bound,
        }
        times: dict[str, float] = {}
        order = (("none", pages), ("held", mixed)) if run % 2 == 0 else (
            ("held", mixed), ("none", pages))  # fmt: skip
        for name, urls in order:
            gc.collect()
            started, spider = await crawl(urls, settings)
            done = max(spider.done_at[h] for h in healthy) - started
            assert spider.pages >= len(pages), spider.pages
            times[name] = done
            if name == "held":
                stops.append(time.perf_counter() - started - done)
        ratios.append(times["held"] / times["none"])
        print(
            f"round {run}: healthy part {times['none']:.2f} s with nothing held, "
            f"{times['held']:.2f} s with {held} held: {ratios[-1]:.3f}x"
        )
    print(
        f"median: {median(ratios):.3f}x (target <= 1.10x); from the last healthy page to "
        f"the end of the crawl (idle close, dropping {held}): median {median(stops):.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=("bytes", "crawl"))
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--held", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--memory-bound", type=int, default=100_000, help="REP_MEMORY_MAX_HELD")
    args = parser.parse_args()
    if args.only != "crawl":
        bytes_per_held(args.count)
    if args.only == "bytes":
        return
    reactor = install_reactor()
    server = LocalServer("fast")
    try:
        ok = run_on_reactor(
            reactor, lambda: healthy_part(server, args.held, args.rounds, args.memory_bound)
        )
    finally:
        server.stop()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
