"""A focused A/B of two crawl modes: pages/s and crawler CPU time per page.

    python benchmarks/bench_ab.py off rep --rounds 7                  # steady state
    python benchmarks/bench_ab.py rep rep-redis --shape many --rounds 8

Modes: off (ROBOTSTXT_OBEY off), stock, rep (scrapy-rep, memory store), rep-sqlite,
rep-redis (needs redis-server on PATH). The two modes alternate, A first in even rounds
and B first in odd ones; the figure is the median of the per-round ratios B / A, for
pages/s (wall clock) and for CPU time per page (``time.process_time()`` of this process,
which runs the crawler; the server is another process), counted from the spider's start
to its last page, so start-up and close are left out. With only two modes per round
the pairs sit closer in time than in bench_crawl.py, so the machine's drift cancels
better; CPU time per page does not count waits at all.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import (
    OFF,
    REP,
    STOCK,
    LocalServer,
    crawl,
    install_reactor,
    median,
    run_on_reactor,
)

SHAPES = {"steady": (10, 300), "many": (100, 10)}
SETTINGS = {"CONCURRENT_REQUESTS": 32, "CONCURRENT_REQUESTS_PER_DOMAIN": 8}


def mode_settings(name: str, tmp: Path, redis_url: str | None, run: int) -> dict[str, Any]:
    if name == "off":
        return OFF
    if name == "stock":
        return STOCK
    if name == "rep":
        return REP
    if name == "rep-sqlite":
        return {**REP, "REP_STORAGE": f"sqlite:{tmp / f'{run}.db'}"}
    if name == "rep-redis":
        if redis_url is None:
            sys.exit("rep-redis needs redis-server on PATH")
        import redis

        redis.Redis.from_url(redis_url).flushdb()  # a warm store would skip the fetches
        return {**REP, "REP_STORAGE": redis_url}
    sys.exit(f"unknown mode {name!r}")


async def ab(
    server: LocalServer, modes: tuple[str, str], shape: str, rounds: int, redis_url: str | None
) -> dict[str, list[tuple[float, float]]]:
    n_origins, n_pages = SHAPES[shape]
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in modes}
    tmp = Path(tempfile.mkdtemp(prefix="rep-ab-"))
    try:
        for run in range(rounds):
            order = modes if run % 2 == 0 else modes[::-1]
            for name in order:
                hosts = [f"ab{run}-{name}-{i}.test" for i in range(n_origins)]
                robots = {"robots": {"body": "User-agent: *\nDisallow: /x\n"}}
                server.configure({host: robots for host in hosts})
                urls = [server.url(h, f"/p{i}") for h in hosts for i in range(n_pages)]
                settings = {**mode_settings(name, tmp, redis_url, run), **SETTINGS}
                gc.collect()
                started, spider = await crawl(urls, settings)
                rate = spider.pages / (max(spider.done_at.values()) - started)
                # CPU from the spider's start to its last page: the crawler's start-up
                # and close (fixed costs that differ run to run) are left out
                cpu = spider.cpu_done - spider.cpu_started
                results[name].append((rate, cpu / spider.pages))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="steady")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    reactor = install_reactor()
    server = LocalServer("fast")
    redis = None
    if "rep-redis" in (args.a, args.b) and shutil.which("redis-server"):
        from tests.redis_server import RedisServer

        redis = RedisServer(shutil.which("redis-server") or "redis-server")
        redis.start()
    outcome: dict[str, Any] = {}

    async def run() -> None:
        url = redis.url if redis is not None else None
        outcome["r"] = await ab(server, (args.a, args.b), args.shape, args.rounds, url)

    try:
        succeeded = run_on_reactor(reactor, run)
    finally:
        server.stop()
        if redis is not None:
            redis.stop()
    if not succeeded:
        sys.exit("benchmark failed (see the traceback above)")
    res = outcome["r"]
    n_origins, n_pages = SHAPES[args.shape]
    print(f"{args.shape}: {n_origins} origins x {n_pages} pages, {args.rounds} rounds")
    for name in (args.a, args.b):
        rates = [r for r, _ in res[name]]
        cpus = [c * 1e6 for _, c in res[name]]
        print(f"{name:<12} {median(rates):7.0f} pages/s   {median(cpus):7.0f} us CPU/page")
    pairs = list(zip(res[args.a], res[args.b], strict=True))
    rate_ratios = sorted(b[0] / a[0] for a, b in pairs)
    cpu_ratios = sorted(b[1] / a[1] for a, b in pairs)
    print("per-round CPU per page ratios: " + " ".join(f"{r:.3f}" for r in cpu_ratios))
    print(
        f"{args.b} / {args.a}: pages/s {statistics.median(rate_ratios):.3f}x "
        f"(quartiles {_quartiles(rate_ratios)}), CPU per page "
        f"{statistics.median(cpu_ratios):.3f}x (quartiles {_quartiles(cpu_ratios)}); "
        "medians of per-round ratios"
    )


def _quartiles(ordered: list[float]) -> str:
    if len(ordered) < 4:
        return "-"
    q1, _, q3 = statistics.quantiles(ordered, n=4)
    return f"{q1:.3f}-{q3:.3f}"


if __name__ == "__main__":
    main()
