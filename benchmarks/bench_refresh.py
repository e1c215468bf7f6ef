"""Refresh ahead: a long crawl over many origins with a short TTL never waits on a refresh.

    python benchmarks/bench_refresh.py [--origins 25] [--rounds 150] [--interval 0.2]
                                       [--ttl 10] [--repeat 2] [--server fast|mock]

A steady crawl: every ``--interval`` seconds the spider asks for one new page of each of
``--origins`` origins, ``--rounds`` times (25 x 150 pages over 30 s by default). With
scrapy-rep each robots.txt copy lives ``--ttl`` seconds (``REP_CACHE_TTL``; 10 s where a
crawl's default is 24 h and the shortest ``max-age`` it honours 60 s), so every origin's
copy expires several times during the crawl. A request in the last tenth of a copy's
lifetime starts its refetch while the copy still applies (docs/behaviour.md, "Caching"),
so a request arriving later finds the refetched copy in place.

Figures, per mode, medians of ``--repeat`` rounds (the two modes interleaved):

- requests that waited on a refresh: pages asked for after their origin's first page
  was crawled whose decision says they waited (``robotstxt_decision["waited"] > 0``:
  held at the gate, or sent back from the downloader to wait, which
  ``robotstxt/requeued`` counts apart). **Target: 0.**
- robots.txt fetches and refetches (``robotstxt/refetch``);
- crawl time, from the spider's start to its last page, against the same crawl with
  Scrapy's stock RobotsTxtMiddleware (which fetches each robots.txt once and never
  refreshes it). The spider sets the pace, so the ratio is about 1.0 unless requests
  wait; a refresh that made requests wait would show as a longer tail.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import QUIET, REP, STOCK, LocalServer, install_reactor, median, run_serving

ROBOTS = {"body": "User-agent: *\nDisallow: /private\n"}


def make_steady_spider() -> type:
    import scrapy

    class SteadySpider(scrapy.Spider):
        """One new page of each origin every ``interval`` seconds, ``rounds`` times."""

        name = "steady"

        def __init__(
            self, base_urls: list[str], rounds: int, interval: float, **kwargs: Any
        ) -> None:
            super().__init__(**kwargs)
            self.base_urls = base_urls
            self.rounds = rounds
            self.interval = interval
            self.started_at = 0.0
            self.last_page_at = 0.0
            self.pages = 0
            # origins whose first page was crawled: a later request's wait is a refresh's
            self.decided: set[str] = set()
            self.refresh_waits = 0

        async def start(self) -> Any:
            self.started_at = time.perf_counter()
            for number in range(self.rounds):
                if number:
                    await asyncio.sleep(self.interval)
                for base in self.base_urls:
                    yield scrapy.Request(
                        f"{base}/p{number}",
                        callback=self.parse,
                        meta={"after_first": base in self.decided},
                    )

        def parse(self, response: Any) -> None:
            self.pages += 1
            self.last_page_at = time.perf_counter()
            base = response.url.rsplit("/", 1)[0]
            self.decided.add(base)
            decision = response.meta.get("robotstxt_decision") or {}
            if response.meta.get("after_first") and decision.get("waited"):
                self.refresh_waits += 1

    return SteadySpider


async def steady_crawl(
    server: LocalServer, settings: dict[str, Any], hosts: list[str], args: Any
) -> dict[str, float]:
    from scrapy.crawler import Crawler, CrawlerRunner
    from scrapy.utils.defer import maybe_deferred_to_future

    spider_cls = make_steady_spider()
    all_settings = {
        **QUIET,
        **settings,
        "CONCURRENT_REQUESTS": 64,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
        "REP_CACHE_TTL": args.ttl,
    }
    crawler = Crawler(spider_cls, all_settings)
    bases = [server.url(host, "") for host in hosts]
    await maybe_deferred_to_future(
        CrawlerRunner(all_settings).crawl(
            crawler, base_urls=bases, rounds=args.rounds, interval=args.interval
        )
    )
    spider: Any = crawler.spider
    stats: Any = crawler.stats
    expected = len(hosts) * args.rounds
    assert spider.pages == expected, f"{spider.pages} pages crawled of {expected}"
    return {
        "time": spider.last_page_at - spider.started_at,
        "refresh_waits": spider.refresh_waits,  # (a requeued request waited too)
        "requeued": stats.get_value("robotstxt/requeued", 0),
        "robots_fetches": stats.get_value("robotstxt/request_count", 0),
        "refetches": stats.get_value("robotstxt/refetch", 0),
    }


async def run(server: LocalServer, args: Any) -> None:
    rounds: dict[str, list[dict[str, float]]] = {"stock": [], "scrapy-rep": []}
    for repeat in range(args.repeat):
        order: list[tuple[str, dict[str, Any]]] = [("stock", STOCK), ("scrapy-rep", REP)]
        if repeat % 2:
            order.reverse()
        for name, mode in order:
            hosts = [f"o{i}-{name}-r{repeat}.test" for i in range(args.origins)]
            server.configure({host: {"robots": ROBOTS} for host in hosts})
            rounds[name].append(await steady_crawl(server, mode, hosts, args))
            print(f"round {repeat + 1} {name}: {rounds[name][-1]}", flush=True)
    pages = args.origins * args.rounds
    print(
        f"\n{args.origins} origins x {args.rounds} pages, one page per origin every "
        f"{args.interval:g} s; scrapy-rep's copies live {args.ttl:g} s (REP_CACHE_TTL); "
        f"medians of {args.repeat} round(s)"
    )
    print(
        f"{'':<12} {'time (s)':>9} {'refresh waits':>14} {'requeued':>9} {'robots.txt':>11} "
        f"{'refetches':>10}"
    )
    for name, results in rounds.items():
        print(
            f"{name:<12} {median([r['time'] for r in results]):>9.2f} "
            f"{median([r['refresh_waits'] for r in results]):>14.0f} "
            f"{median([r['requeued'] for r in results]):>9.0f} "
            f"{median([r['robots_fetches'] for r in results]):>11.0f} "
            f"{median([r['refetches'] for r in results]):>10.0f}"
        )
    ratios = [
        rep["time"] / stock["time"]
        for rep, stock in zip(rounds["scrapy-rep"], rounds["stock"], strict=True)
    ]
    worst = max(r["refresh_waits"] for r in rounds["scrapy-rep"])
    print(
        f"\nscrapy-rep / stock crawl time: {median(ratios):.3f}x "
        f"(rounds: {', '.join(f'{r:.3f}' for r in ratios)}); "
        f"requests that waited on a refresh, worst round: {worst:.0f} of {pages} "
        f"(target 0: {'PASS' if worst == 0 else 'FAIL'})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--origins", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=150)
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument("--ttl", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--server", choices=["fast", "mock"], default="fast")
    args = parser.parse_args()
    reactor = install_reactor()
    server = LocalServer(args.server)
    run_serving(reactor, server, lambda: run(server, args))


if __name__ == "__main__":
    main()
