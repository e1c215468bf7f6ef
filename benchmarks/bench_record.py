"""What the compliance record costs (REP_RECORD, docs/record.md): CPU per page against the
same crawl without it, and the record's bytes per decision.

    python benchmarks/bench_record.py ab [--rounds 9]       # timed A/B, as bench_ab.py
    python benchmarks/bench_record.py size                  # bytes per decision
    python benchmarks/bench_record.py instructions          # callgrind counts (valgrind)
    python benchmarks/bench_record.py micro                 # a decision's two halves

- ``ab``: bench_ab.py's steady shape (10 origins x 300 pages), ``rep`` (memory store)
  against ``rep-record`` (the same, with REP_RECORD), alternating which goes first;
  the median of per-round ratios of CPU time per page (``time.process_time()``: the
  record's writer thread included), from the spider's start to its last page.
- ``size``: the record of the steady shape (a site crawled deeply) and of a broad crawl
  (1,000 origins x 5 pages, a robots.txt copy per origin), after close: file bytes
  (header and copies included) per decision line.
- ``instructions``: bench_instructions.py's method (marginal instructions per page
  between 20 and 120 pages per origin, under callgrind, all threads counted) for both
  modes; not moved by the machine's load.
- ``micro``: 100,000 decisions through the reactor thread's hook, and as many lines
  through the writer thread's encoding and write, each timed apart.
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

from _harness import REP, LocalServer, ServerAt, install_reactor, run_on_reactor, run_serving

ROBOTS = {"robots": {"body": "User-agent: *\nDisallow: /x\nAllow: /p\n"}}
MODES = ("rep", "rep-record")


def settings_for(mode: str, tmp: Path, run: int) -> dict[str, Any]:
    from bench_ab import SETTINGS

    settings = {**REP, **SETTINGS}
    if mode == "rep-record":
        settings["REP_RECORD"] = str(tmp / f"record-{run}.jsonl.gz")
    return settings


async def one_crawl(
    server: ServerAt, mode: str, hosts: list[str], pages: int, tmp: Path, run: int
) -> tuple[float, Any]:
    """CPU seconds per page of one crawl, and its spider."""
    from bench_ab import crawl, start_order

    urls = start_order(hosts, pages, server.url)
    gc.collect()
    spider = await crawl(urls, settings_for(mode, tmp, run), 1, {})
    assert spider.pages == len(urls), (mode, spider.pages, len(urls))
    return (spider.cpu_done - spider.cpu_started) / spider.pages, spider


def ab(args: argparse.Namespace) -> None:
    reactor = install_reactor()
    server = LocalServer("fast")
    tmp = Path(tempfile.mkdtemp(prefix="rep-record-"))
    cpu: dict[str, list[float]] = {mode: [] for mode in MODES}

    async def rounds() -> None:
        for run in range(args.rounds):
            for mode in MODES if run % 2 == 0 else MODES[::-1]:
                # (each crawl its own hosts: each fetches its robots.txt alike)
                hosts = [f"{mode}-{run}-{i}.test" for i in range(10)]
                server.configure({host: ROBOTS for host in hosts})
                figure, _ = await one_crawl(server, mode, hosts, 300, tmp, run)
                cpu[mode].append(figure)

    load = os.getloadavg()[0]
    try:
        run_serving(reactor, server, rounds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ratios = sorted(b / a for a, b in zip(cpu["rep"], cpu["rep-record"], strict=True))
    print(f"steady: 10 origins x 300 pages, {args.rounds} rounds; load average {load:.1f}")
    for mode in MODES:
        print(f"{mode:<11} {statistics.median(cpu[mode]) * 1e6:7.0f} us CPU/page")
    print("per-round ratios rep-record / rep: " + " ".join(f"{r:.3f}" for r in ratios))
    print(f"rep-record / rep: CPU per page {statistics.median(ratios):.3f}x (median)")


def size(args: argparse.Namespace) -> None:
    reactor = install_reactor()
    server = LocalServer("fast")
    tmp = Path(tempfile.mkdtemp(prefix="rep-record-"))
    shapes = {"steady (10 origins x 300 pages)": (10, 300), "broad (1,000 x 5)": (1000, 5)}
    found: dict[str, tuple[int, int]] = {}

    async def crawls() -> None:
        for run, (label, (n_origins, pages)) in enumerate(shapes.items()):
            hosts = [f"size{run}-{i}.test" for i in range(n_origins)]
            server.configure({host: ROBOTS for host in hosts})
            _, spider = await one_crawl(server, "rep-record", hosts, pages, tmp, run)
            stats = spider.crawler.stats
            found[label] = (
                (tmp / f"record-{run}.jsonl.gz").stat().st_size,
                stats.get_value("rep/record/decisions"),
            )

    try:
        run_serving(reactor, server, crawls)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for label, (size_bytes, decisions) in found.items():
        print(
            f"{label:<34} {decisions:6d} decision lines  {size_bytes:8d} bytes  "
            f"{size_bytes / decisions:5.1f} bytes/decision"
        )


def instructions(args: argparse.Namespace) -> None:
    from bench_instructions import STEADY_ORIGINS, counted, steady_hosts

    small, large = 20, 120
    server = LocalServer("fast")
    jobs = [(mode, pages) for mode in MODES for pages in (small, large)]

    def count(job: tuple[str, int]) -> int:
        mode, pages = job
        command = [__file__, "--child", f"{mode}:{pages}", "--port", str(server.port)]
        return counted(command, f"the {mode} crawl of {pages} pages")[0]

    try:
        server.configure({host: ROBOTS for host in steady_hosts()})
        with ThreadPoolExecutor(max_workers=2) as pool:
            counts = dict(zip(jobs, pool.map(count, jobs), strict=True))
    finally:
        server.stop()
    between = (large - small) * STEADY_ORIGINS
    per_page = {m: (counts[(m, large)] - counts[(m, small)]) / between for m in MODES}
    for mode in MODES:
        print(f"{mode:<11} {per_page[mode]:12,.0f} instructions per page (marginal)")
    print(f"rep-record / rep: {per_page['rep-record'] / per_page['rep']:.3f}x instructions")


def micro(args: argparse.Namespace) -> None:
    """The two halves of a decision's cost, apart: the reactor thread's hook, and the
    writer thread's JSON, compression and write."""
    import time

    from scrapy import Request
    from scrapy.utils.test import get_crawler

    from scrapy_rep.crawl.record import ALLOWED, Recorder
    from scrapy_rep.policy.config import Config
    from scrapy_rep.policy.records import RULES, OriginRecord
    from scrapy_rep.policy.robots_policy import Evaluation

    n = 100_000
    tmp = Path(tempfile.mkdtemp(prefix="rep-record-"))
    crawler = get_crawler(settings_dict={"REP_RECORD": str(tmp / "micro.jsonl.gz")})
    recorder = Recorder(crawler, Config.from_settings(crawler.settings), time.time)
    body = b"User-agent: *\nDisallow: /x\n"
    record = OriginRecord(kind=RULES, body=body, fetched_at=1.0, expires_at=2.0)
    evaluation = Evaluation(ready=True, kind=RULES, body=body, source="fresh")
    decision = {"allowed": True, "reason": "no-matching-rule", "source": "fresh"}
    decision.update(line=None, rule=None, groups=["*"], origin="http://a.test")
    decision.update(product_token="Scrapy", robots="200", waited=0.0)
    requests = [Request(f"http://a.test/p{i}") for i in range(n)]
    started = time.process_time()
    for request in requests:
        recorder.decided(request, decision, evaluation, record)
        if len(recorder._batch) >= 8000:
            recorder._batch.clear()  # (measured apart, below)
    hook = (time.process_time() - started) / n
    batch = [(ALLOWED, 1.234, 3, f"/p{i}", 0.0) for i in range(n)]
    started = time.process_time()
    recorder.writer._write_lines([recorder.writer._encode(entry) for entry in batch])
    writer = (time.process_time() - started) / n
    recorder.close()
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"reactor thread: {hook * 1e6:.2f} us per decision (the hook)")
    print(f"writer thread:  {writer * 1e6:.2f} us per decision (JSON, gzip, write)")


def child(spec: str, port: int) -> None:
    """One crawl under callgrind: ``MODE:PAGES``."""
    from bench_instructions import steady_hosts

    mode, pages = spec.split(":")
    tmp = Path(tempfile.mkdtemp(prefix="rep-record-"))

    async def one() -> None:
        await one_crawl(ServerAt(port), mode, steady_hosts(), int(pages), tmp, 0)

    try:
        if not run_on_reactor(install_reactor(), one):
            sys.exit(1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("what", nargs="?", choices=("ab", "size", "instructions", "micro"))
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.port)
        return
    run = {"ab": ab, "size": size, "instructions": instructions, "micro": micro}
    run[args.what or "ab"](args)


if __name__ == "__main__":
    main()
