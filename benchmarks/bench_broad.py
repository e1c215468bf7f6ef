"""A broad crawl: many origins, few pages each. Speed and peak RSS against stock.

    python benchmarks/bench_broad.py [--origins 2000] [--pages 3] [--rounds 3]
                                     [--modes off,stock,rep-sqlite,rep-memory]
                                     [--corpus CORPUS_DIR]

One local fast server (``_fast_server.py``) answers for every origin: each origin is a
host name ``b<i>.test`` on its port, resolved to 127.0.0.1 by the test suite's resolver
(no DNS). Each origin has its own robots.txt: generated (seeded) with sizes spread like
real files (median about 600 B, one in ten 4-30 KB, one in a hundred about 70 KB), or,
with ``--corpus``, the real files of a directory in turn, or with ``--tiny`` two or
three lines each (where per-origin overhead weighs most against stock's). Some of them
disallow one of the crawled pages, so the dropping path runs too; stock and scrapy-rep
must agree on how many pages that leaves.

Every crawl runs in its own subprocess (this script with ``--child``), so each peak RSS
(``ru_maxrss`` of that process) counts one crawl and nothing else. Modes: ``off``
(ROBOTSTXT_OBEY off), ``stock`` (Scrapy's RobotsTxtMiddleware), ``rep-sqlite``
(scrapy-rep with its default store, SQLite, in a temporary file) and ``rep-memory``;
also ``rep-sqlite-nodurable`` (SQLite with REP_DURABLE_WAITING off), on request.
The order of the modes rotates every round; the figures are medians over rounds of the
ratio to ``stock`` in the same round (pages/s and peak RSS), with their range.
Targets: scrapy-rep at least as fast as stock (>= 1.00x), peak RSS <= 1.20x stock.

Settings are those Scrapy's "Broad crawls" page recommends (CONCURRENT_REQUESTS = 100,
DownloaderAwarePriorityQueue, retries and redirects off, cookies off).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from statistics import median

from _harness import (
    OFF,
    REP,
    STOCK,
    LocalServer,
    child_result,
    crawl,
    install_reactor,
    print_result,
    run_on_reactor,
)

MODES = ("off", "stock", "rep-sqlite", "rep-memory")
BROAD = {
    "CONCURRENT_REQUESTS": 100,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
    "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",
    "REACTOR_THREADPOOL_MAXSIZE": 20,
    "RETRY_ENABLED": False,
    "REDIRECT_ENABLED": False,
    "DOWNLOAD_TIMEOUT": 30,
}
# Paths the spider requests on each origin; DISALLOWED is forbidden on some origins.
DISALLOWED = "/p1"


def host(i: int) -> str:
    return f"b{i}.test"


# -- robots.txt bodies -----------------------------------------------------------------

_AGENTS = ("Googlebot", "Bingbot", "AhrefsBot", "MJ12bot", "SemrushBot", "Baiduspider")
_DIRS = ("admin", "cgi-bin", "search", "cart", "checkout", "account", "tmp", "api", "wp-admin")


def _lines(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        roll = rng.random()
        path = f"/{rng.choice(_DIRS)}/{rng.randrange(10_000)}"
        if roll < 0.15:
            out.append(f"Disallow: {path}*.php$")
        elif roll < 0.3:
            out.append(f"Allow: {path}/")
        else:
            out.append(f"Disallow: {path}/")
    return out


def generated_body(i: int) -> str:
    """A robots.txt of a size drawn like the corpus's (seeded by the origin's index)."""
    rng = random.Random(i)
    roll = rng.random()
    if roll < 0.01:
        rules = 2_600  # about 70 KB: off the reactor for scrapy-rep (>= 64 KiB)
    elif roll < 0.10:
        rules = rng.randrange(150, 1_000)  # 4-30 KB
    elif roll < 0.35:
        rules = rng.randrange(30, 150)  # 1-4 KB
    else:
        rules = rng.randrange(3, 25)  # a few hundred bytes
    groups = []
    for agent in rng.sample(_AGENTS, rng.randrange(0, 3)):
        groups.append(f"User-agent: {agent}\nDisallow: /\n")
    star = ["User-agent: *", *_lines(rng, rules)]
    if i % 10 == 3:  # one origin in ten forbids one crawled page
        star.append(f"Disallow: {DISALLOWED}")
    if rng.random() < 0.2:
        star.append(f"Crawl-delay: {rng.choice((0.001, 0.002))}")
    groups.append("\n".join(star) + "\n")
    if rng.random() < 0.5:
        groups.append(f"Sitemap: http://{host(i)}/sitemap.xml\n")
    return "\n".join(groups)


def tiny_body(i: int) -> str:
    extra = f"Disallow: {DISALLOWED}\n" if i % 10 == 3 else ""
    return f"User-agent: *\nDisallow: /private\n{extra}"


def corpus_bodies(directory: Path, count: int) -> list[str]:
    files = sorted(p for p in directory.iterdir() if p.is_file())
    if not files:
        sys.exit(f"no files in {directory}")
    return [files[i % len(files)].read_bytes().decode("utf-8", "replace") for i in range(count)]


# -- one crawl, in a child process -----------------------------------------------------


def mode_settings(mode: str, tmp: Path) -> dict[str, Any]:
    if mode == "off":
        return OFF
    if mode == "stock":
        return STOCK
    if mode == "rep-memory":
        return REP
    if mode == "rep-sqlite":
        return {**REP, "REP_STORAGE": f"sqlite:{tmp / 'robots.db'}"}
    if mode == "rep-sqlite-nodurable":  # what recording waiting requests in it costs
        return {
            **REP,
            "REP_STORAGE": f"sqlite:{tmp / 'robots.db'}",
            "REP_DURABLE_WAITING": False,
        }
    sys.exit(f"unknown mode {mode!r}")


class ThreadCpu:
    """CPU seconds of each thread of this process, by thread name (Linux): sampled
    while the crawl runs, since worker threads end with it."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, int | None], float] = {}

    def sample(self) -> None:
        import threading

        tick = os.sysconf("SC_CLK_TCK")
        for thread in threading.enumerate():
            try:
                stat = Path(f"/proc/self/task/{thread.native_id}/stat").read_bytes()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            cpu = (int(fields[11]) + int(fields[12])) / tick
            self.seen[(thread.name, thread.native_id)] = cpu

    def by_name(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for (name, _), cpu in self.seen.items():
            if name.startswith("PoolThread"):
                name = name.rsplit("-", 1)[0]
            out[name] = out.get(name, 0.0) + cpu
        return out


def child(mode: str, port: int, origins: int, pages: int, profile: str = "") -> None:
    import cProfile

    reactor = install_reactor()
    from twisted.internet import task

    profiler = cProfile.Profile() if profile else None
    tmp = Path(tempfile.mkdtemp(prefix="rep-broad-"))
    urls = [f"http://{host(i)}:{port}/p{j}" for i in range(origins) for j in range(pages)]
    outcome: dict[str, Any] = {}

    async def run() -> None:
        cpu = time.process_time()
        wall = time.perf_counter()
        threads = ThreadCpu()
        sampler = task.LoopingCall(threads.sample)
        if profiler is not None:
            sampler.start(0.5)
            profiler.enable()
        started, spider = await crawl(urls, {**mode_settings(mode, tmp), **BROAD})
        if profiler is not None:
            profiler.disable()
            sampler.stop()
            threads.sample()
            outcome["threads"] = threads.by_name()
        ended = time.perf_counter()
        outcome.update(
            pages=spider.pages,
            seconds=max(spider.done_at.values()) - started,  # spider start to last page
            total_seconds=ended - wall,  # with start-up and close
            cpu=time.process_time() - cpu,
        )

    try:
        ok = run_on_reactor(reactor, run)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not ok:
        sys.exit(1)
    if profiler is not None:
        profiler.dump_stats(f"{profile}-{mode}.pstats")
    # ru_maxrss: KiB on Linux. The peak of this process: imports, the crawl, its close.
    outcome["peak_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print_result(outcome)


def run_child(mode: str, port: int, origins: int, pages: int, profile: str = "") -> dict[str, Any]:
    command = [
        sys.executable, __file__, "--child", mode, "--port", str(port),
        "--origins", str(origins), "--pages", str(pages), "--profile", profile,
    ]  # fmt: skip
    return child_result(command, f"the {mode} crawl")


# -- RAM per origin, without a crawl -------------------------------------------------


def registry_bytes(origins: int, budgets: list[int]) -> None:
    """What the crawl keeps per origin once each was used (a record with its body in
    a runtime, and the parsed rules with the group in use compiled), measured with
    tracemalloc for each REP_MEMORY_MAX_BYTES: the origins as the crawl keeps them."""
    import gc
    import tracemalloc

    from scrapy_rep.crawl.origins import Origins, ParsedCopy
    from scrapy_rep.policy.records import RULES, OriginRecord
    from scrapy_rep.robotstxt import RobotsTxt

    bodies = [generated_body(i).encode() for i in range(origins)]
    for budget in budgets:
        gc.collect()
        tracemalloc.start()
        registry = Origins(10**9, max_bytes=budget)
        for i, body in enumerate(bodies):
            origin = f"http://{host(i)}"
            rt = registry.get(origin)
            rt.record = OriginRecord(kind=RULES, body=body, fetched_at=0.0, expires_at=1e12)
            rt.loaded = True
            registry.note_record(rt)
            robots = RobotsTxt.parse(body)
            robots.allowed(f"{origin}/p0", "Scrapy")
            registry.note_parsed(rt, ParsedCopy(body, robots))
        gc.collect()
        used = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        holding = sum(1 for rt in registry.runtimes() if rt.record and rt.record.body)
        print(
            f"REP_MEMORY_MAX_BYTES {budget / 2**20:>8.0f} MiB: {used / 2**20:7.1f} MiB for "
            f"{origins} origins ({used / origins:6.0f} B each); {holding} keep a copy; "
            f"estimated {registry.resident_bytes / 2**20:.1f} MiB"
        )


# -- the parent: server, rounds, report ------------------------------------------------


def _range(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--origins", type=int, default=2000)
    parser.add_argument("--pages", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--corpus", type=Path, help="a directory of real robots.txt files")
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="every robots.txt two or three lines (worst case for RSS ratio)",
    )
    parser.add_argument(
        "--registry",
        type=int,
        metavar="N",
        help="only measure RAM per origin for N origins (no crawl), at several budgets",
    )
    parser.add_argument(
        "--profile",
        default="",
        metavar="PREFIX",
        help="run each mode once under cProfile (the reactor thread) and write "
        "PREFIX-<mode>.pstats; prints each thread's CPU seconds",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    # Every origin keeps a connection open on both sides of the crawl.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if args.child:
        child(args.child, args.port, args.origins, args.pages, args.profile)
        return
    if args.registry:
        registry_bytes(args.registry, [2**62, 64 * 2**20, 16 * 2**20])
        return
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if "stock" not in modes and not args.profile:
        sys.exit("the figures are ratios to stock: --modes must include it")
    bodies = (
        corpus_bodies(args.corpus, args.origins)
        if args.corpus
        else [tiny_body(i) if args.tiny else generated_body(i) for i in range(args.origins)]
    )
    sizes = sorted(len(b.encode()) for b in bodies)
    server = LocalServer("fast")
    try:
        server.configure({host(i): {"robots": {"body": b}} for i, b in enumerate(bodies)})
        print(
            f"{args.origins} origins x {args.pages} pages; robots.txt bytes: median "
            f"{sizes[len(sizes) // 2]}, mean {sum(sizes) // len(sizes)}, max {sizes[-1]}; "
            f"load average {os.getloadavg()[0]:.2f}"
        )
        if args.profile:
            for mode in modes:
                result = run_child(mode, server.port, args.origins, args.pages, args.profile)
                threads = ", ".join(f"{k} {v:.2f} s" for k, v in result["threads"].items())
                print(f"{mode}: cpu {result['cpu']:.1f} s; threads: {threads}", flush=True)
            return
        results: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
        for run in range(args.rounds):
            shift = run % len(modes)
            order = modes[shift:] + modes[:shift]
            if run % 2:
                order.reverse()  # neither always first nor always after the same mode
            for mode in order:
                result = run_child(mode, server.port, args.origins, args.pages)
                results[mode].append(result)
                print(
                    f"round {run} {mode:<11} {result['pages']:>6} pages "
                    f"{result['pages'] / result['seconds']:>6.0f} pages/s "
                    f"cpu {result['cpu']:5.1f} s  peak RSS "
                    f"{result['peak_rss_kib'] / 1024:6.1f} MiB",
                    flush=True,
                )
    finally:
        server.stop()
    report(results, modes, args.rounds)


def report(results: dict[str, list[dict[str, Any]]], modes: list[str], rounds: int) -> None:
    print(f"\n{rounds} rounds; ratios to stock within each round: median (range)")
    print(
        f"{'mode':<11} {'pages/s':>8} {'vs stock':>16} {'peak RSS MiB':>13} {'vs stock':>16} "
        f"{'CPU/page vs stock':>24}"
    )
    stock = results["stock"]
    for mode in modes:
        rows = results[mode]
        rates = [r["pages"] / r["seconds"] for r in rows]
        rss = [r["peak_rss_kib"] / 1024 for r in rows]
        rate_ratios = [a / (s["pages"] / s["seconds"]) for a, s in zip(rates, stock, strict=True)]
        rss_ratios = [a * 1024 / s["peak_rss_kib"] for a, s in zip(rss, stock, strict=True)]
        # CPU seconds per page: what a loaded machine distorts least (the wall clock
        # moves with other processes' load, CPU time far less)
        cpu_ratios = [
            (r["cpu"] / r["pages"]) / (s["cpu"] / s["pages"])
            for r, s in zip(rows, stock, strict=True)
        ]
        print(
            f"{mode:<11} {median(rates):>8.0f} {median(rate_ratios):>6.2f}x "
            f"({_range(rate_ratios)}) {median(rss):>13.1f} {median(rss_ratios):>6.2f}x "
            f"({_range(rss_ratios)}) {median(cpu_ratios):>12.2f}x ({_range(cpu_ratios)})"
        )
    for mode in modes:
        if not mode.startswith("rep"):
            continue
        counts = {r["pages"] for r in results[mode]} | {r["pages"] for r in stock}
        if len(counts) != 1:
            print(f"WARNING: {mode} and stock crawled different page counts: {counts}")
        pairs = list(zip(results[mode], stock, strict=True))
        speed = median(
            [(r["pages"] / r["seconds"]) / (s["pages"] / s["seconds"]) for r, s in pairs]
        )
        peak = median([r["peak_rss_kib"] / s["peak_rss_kib"] for r, s in pairs])
        print(
            f"{mode}: speed {speed:.2f}x of stock (target >= 1.00x: "
            f"{'PASS' if speed >= 1.0 else 'FAIL'}), peak RSS {peak:.2f}x of stock "
            f"(target <= 1.20x: {'PASS' if peak <= 1.2 else 'FAIL'})"
        )


if __name__ == "__main__":
    main()
