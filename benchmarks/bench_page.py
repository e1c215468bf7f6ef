"""What recording page-level directives costs a crawl of pages that have none.

    python benchmarks/bench_page.py --rounds 15
    python benchmarks/bench_page.py --rounds 15 --links       # callbacks that yield requests
    python benchmarks/bench_page.py --instructions            # counted (needs valgrind)

Two modes of the same scrapy-rep crawl (memory store, robots.txt obeyed):
``off`` (``REP_PAGE_MODE = "off"``: the spider middleware is not even enabled) and
``record`` (the default: every response's head is searched for a robots meta tag and
its headers for ``X-Robots-Tag``, and ``response.meta["rep_page"]`` is written). The
pages are the fast server's HTML pages, with a head and no directive: the case the
docs promise costs no HTML parse (docs/page.md, target: within 2 % of ``off``).
``--mode`` compares another mode against ``off`` instead (``audit``, ``enforce``).

``--instructions`` counts the instructions of the two crawls under callgrind instead (as
bench_instructions.py ``steady`` does: 20 and 120 pages per origin, the marginal count
per page), which the machine's load does not move.

As in bench_ab.py the modes alternate, A first in even rounds and B first in odd ones,
and the figure is the median of the per-round ratios record / off, for pages/s and for
crawler CPU time per page (``time.process_time()`` from the spider's start to its last
page, in the steady window after ``--warm`` of the pages). The machine's load average
before and after is printed: on a shared machine a single round moves by several per
cent, so read the median and its quartiles, not one round.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import REP, LocalServer, install_reactor, median, run_serving
from bench_ab import SETTINGS, crawl, start_order

N_ORIGINS, N_PAGES = 10, 300
LINKS = 8  # --links: each page links to the page LINKS further on (bench_ab.py "links")

# pages/s, CPU per page in the steady window
Figures = tuple[float, float]


def mode_settings(mode: str) -> dict[str, Any]:
    return {**REP, "REP_PAGE_MODE": mode, **SETTINGS}


async def one_crawl(server: LocalServer, mode: str, run: int, warm: float, links: bool) -> Figures:
    hosts = [f"page{run}-{mode}-{i}.test" for i in range(N_ORIGINS)]
    server.configure({h: {"robots": {"body": "User-agent: *\nDisallow: /x\n"}} for h in hosts})
    total = N_ORIGINS * N_PAGES
    warm_pages = max(1, int(total * warm))
    follow: dict[str, str] = {}
    if links:
        pages = [[server.url(h, f"/p{i}") for i in range(N_PAGES)] for h in hosts]
        urls = [origin[i] for i in range(LINKS) for origin in pages]
        follow = {p: origin[i + LINKS] for origin in pages for i, p in enumerate(origin[:-LINKS])}
    else:
        urls = start_order(hosts, N_PAGES, server.url)
    gc.collect()
    spider = await crawl(urls, mode_settings(mode), warm_pages, follow)
    assert spider.pages == total, f"{mode}: {spider.pages} of {total} pages"
    rate = spider.pages / (max(spider.done_at.values()) - spider.started_at)
    steady = (spider.cpu_done - spider.cpu_warm) / (total - warm_pages)
    return rate, steady


def counted_child(spec: str, port: int) -> None:
    """``--child MODE:PAGES``: one crawl, under callgrind (``--instructions``)."""
    from _harness import ServerAt, run_on_reactor

    mode, pages = spec.split(":")
    hosts = [f"count-{i}.test" for i in range(N_ORIGINS)]
    urls = start_order(hosts, int(pages), ServerAt(port).url)

    async def one() -> None:
        spider = await crawl(urls, mode_settings(mode), 1, {})
        assert spider.pages == len(urls), (mode, spider.pages, len(urls))

    if not run_on_reactor(install_reactor(), one):
        sys.exit(1)


def instructions(mode: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from bench_instructions import counted

    small, large = 20, 120
    server = LocalServer("fast")
    try:
        body = {"robots": {"body": "User-agent: *\nDisallow: /x\n"}}
        server.configure({f"count-{i}.test": body for i in range(N_ORIGINS)})
        jobs = [(m, n) for m in ("off", mode) for n in (small, large)]

        def run(job: tuple[str, int]) -> int:
            command = [__file__, "--child", f"{job[0]}:{job[1]}", "--port", str(server.port)]
            return counted(command, f"the {job[0]} crawl of {job[1]} pages")[0]

        with ThreadPoolExecutor(max_workers=2) as pool:
            counts = dict(zip(jobs, pool.map(run, jobs), strict=True))
    finally:
        server.stop()
    between = (large - small) * N_ORIGINS
    per_page = {m: (counts[(m, large)] - counts[(m, small)]) / between for m in ("off", mode)}
    print(f"{N_ORIGINS} origins x {small} and x {large} pages without directives, per page:")
    for m in ("off", mode):
        print(f"{m:>8} {per_page[m]:>12,.0f} instructions per page")
    print(f"{mode} / off: {per_page[mode] / per_page['off']:.4f}x (target: within 1.02x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--mode", default="record", choices=("record", "audit", "enforce"))
    parser.add_argument("--warm", type=float, default=0.1)
    parser.add_argument(
        "--links", action="store_true", help="callbacks yield a request per page (follow)"
    )
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        counted_child(args.child, args.port)
        return
    if args.instructions:
        instructions(args.mode)
        return
    modes = ("off", args.mode)
    load_before = os.getloadavg()
    reactor = install_reactor()
    server = LocalServer("fast")
    results: dict[str, list[Figures]] = {mode: [] for mode in modes}

    async def run() -> None:
        for round_ in range(args.rounds):
            for mode in modes if round_ % 2 == 0 else modes[::-1]:
                results[mode].append(await one_crawl(server, mode, round_, args.warm, args.links))

    run_serving(reactor, server, run)
    print(
        f"{N_ORIGINS} origins x {N_PAGES} pages without directives"
        f"{', each page yielding a request' if args.links else ''}, {args.rounds} rounds; "
        f"load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    for mode in modes:
        rates = [rate for rate, _ in results[mode]]
        cpus = [cpu * 1e6 for _, cpu in results[mode]]
        print(f"{mode:<8} {median(rates):7.0f} pages/s   {median(cpus):7.0f} us CPU/page steady")
    pairs = list(zip(results["off"], results[args.mode], strict=True))
    cpu_ratios = sorted(b[1] / a[1] for a, b in pairs)
    rate_ratios = sorted(b[0] / a[0] for a, b in pairs)
    print("per-round CPU per page ratios: " + " ".join(f"{r:.3f}" for r in cpu_ratios))
    print(
        f"{args.mode} / off: CPU per page {statistics.median(cpu_ratios):.3f}x "
        f"(quartiles {_quartiles(cpu_ratios)}); pages/s {statistics.median(rate_ratios):.3f}x "
        f"(quartiles {_quartiles(rate_ratios)}); medians of per-round ratios (target: CPU "
        "within 1.02x)"
    )


def _quartiles(ordered: list[float]) -> str:
    if len(ordered) < 4:
        return "-"
    q1, _, q3 = statistics.quantiles(ordered, n=4)
    return f"{q1:.3f}-{q3:.3f}"


if __name__ == "__main__":
    main()
