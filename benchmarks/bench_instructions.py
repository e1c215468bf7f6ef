"""Instructions, not seconds: the per-page and per-held-request targets counted exactly.

    python benchmarks/bench_instructions.py steady [--pages 20,120] [--modes off,rep]
    python benchmarks/bench_instructions.py held [--held 40000]

Needs valgrind (``apt-get install valgrind``). Each crawl runs in a process of its own
under callgrind, which counts every instruction the process executes, the garbage
collector's included. The count does not depend on the machine's load: on a shared
2-core machine the timed A/Bs (``bench_ab.py``, ``bench_held.py``) spread ±10-15 %
per round, more than the 3 % and 10 % targets they test, and their medians move by
several per cent from one run to the next. A count shows what the CPU time would be on
a quiet machine with the same instructions per cycle; the timed figures stay the
reference for wall time. Slow: callgrind runs Python about 50x slower (about 5 minutes
for ``steady``, 25 for ``held``, two crawls at a time).

- ``steady``: bench_ab.py's steady shape (10 origins, every origin's first page first,
  then origin by origin) with ``--pages`` pages per origin. Start-up and shutdown cost
  the same whatever the number of pages, so the marginal count between the two sizes,
  divided by the pages between them, is the steady cost of a page. Printed per mode,
  and each mode's ratio to the first (``off``: ``ROBOTSTXT_OBEY = False``).
- ``held``: bench_held.py's crawl (800 healthy origins, 5 pages each, ``--held``
  requests to 200 unreachable ones interleaved), ``held`` against its reference
  ``dropped``, less a crawl with the same settings and no request (start-up and
  shutdown: the same for both). The figure counts the whole crawl, so ``held`` also
  carries the end of the crawl, where it drops its waiting requests in one line: the
  ratio is a little above the timed one, which stops at the last healthy page. The
  robots.txt downloads of each crawl are printed: one per origin, as in the timed
  crawls (bench_held.py sets a retry backoff longer than any crawl, because a crawl
  slowed down 50x would otherwise retry the unreachable origins several times more).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import LocalServer, ServerAt, install_reactor, printed_result, run_on_reactor

COLLECTED = re.compile(r"==\d+== Collected : (\d+)")
STEADY_ORIGINS = 10


def counted(command: list[str], what: str) -> tuple[int, dict[str, Any]]:
    """Instructions executed by *command* (a child of this benchmark) under callgrind,
    and the figures it printed (``print_result``; empty if none)."""
    with tempfile.TemporaryDirectory(prefix="rep-instructions-") as tmp:
        valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out"]
        proc = subprocess.run(
            [*valgrind, sys.executable, *command],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
    found = COLLECTED.search(proc.stderr)
    if proc.returncode != 0 or found is None:
        sys.stderr.write(proc.stderr[-4000:])
        sys.exit(f"{what} failed (exit {proc.returncode})")
    return int(found.group(1)), printed_result(proc.stdout) or {}


def count_children(
    port: int, children: dict[Any, tuple[str, str]]
) -> dict[Any, tuple[int, dict[str, Any]]]:
    """Each child crawl (its ``--child`` spec, and what to call it) counted, two at a
    time, by key: its instructions and the figures it printed."""

    def run(child: tuple[str, str]) -> tuple[int, dict[str, Any]]:
        spec, what = child
        return counted([__file__, "--child", spec, "--port", str(port)], what)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(children, pool.map(run, children.values()), strict=True))


# -- steady ------------------------------------------------------------------------------


def steady_hosts() -> list[str]:
    return [f"count-{i}.test" for i in range(STEADY_ORIGINS)]


def steady_child(mode: str, pages: int, port: int) -> None:
    """One steady crawl of *mode*, *pages* pages per origin (runs under callgrind)."""
    from bench_ab import SETTINGS, crawl, mode_settings, start_order

    urls = start_order(steady_hosts(), pages, ServerAt(port).url)
    # (a directory of its own: a rep-sqlite child must not find another's store)
    tmp = Path(tempfile.mkdtemp(prefix="rep-instructions-"))
    settings = {**mode_settings(mode, tmp, None, 0), **SETTINGS}

    async def one() -> None:
        spider = await crawl(urls, settings, 1, {})
        assert spider.pages == len(urls), (mode, spider.pages, len(urls))

    try:
        if not run_on_reactor(install_reactor(), one):
            sys.exit(1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def steady(args: argparse.Namespace) -> None:
    small, large = (int(n) for n in args.pages.split(","))
    modes = [m for m in args.modes.split(",") if m]
    server = LocalServer("fast")
    try:
        body = {"robots": {"body": "User-agent: *\nDisallow: /x\n"}}
        server.configure({host: body for host in steady_hosts()})
        jobs = {
            (mode, pages): (f"steady:{mode}:{pages}", f"the {mode} crawl of {pages} pages")
            for mode in modes
            for pages in (small, large)
        }
        counts = count_children(server.port, jobs)
    finally:
        server.stop()
    pages_between = (large - small) * STEADY_ORIGINS
    per_page = {m: (counts[(m, large)][0] - counts[(m, small)][0]) / pages_between for m in modes}
    print(f"steady: {STEADY_ORIGINS} origins x {small} and x {large} pages, marginal per page")
    reference = modes[0]
    for mode in modes:
        ratio = per_page[mode] / per_page[reference]
        count = f"{per_page[mode]:>12,.0f} instructions per page"
        print(f"{mode:>8} {count}   {ratio:.3f}x {reference}")


# -- held --------------------------------------------------------------------------------


def held_child(mode: str, held: int, port: int) -> None:
    """One bench_held.py crawl of *mode* (``empty``: its settings, no request)."""
    import bench_held

    if mode != "empty":
        bench_held.crawl_child(
            argparse.Namespace(
                child=mode, round=0, held=held, port=port, memory_bound=100_000,
                store="memory", no_durable=False,
            )
        )  # fmt: skip
        return

    async def one() -> None:
        domains = [bench_held.HEALTHY_DOMAIN, bench_held.DOWN_DOMAIN]
        await bench_held._crawl([], domains, bench_held.base_settings(100_000, "memory", True))

    if not run_on_reactor(install_reactor(), one):
        sys.exit(1)


def held(args: argparse.Namespace) -> None:
    import bench_held

    server = LocalServer("fast")
    try:
        bench_held.configure_round(server, 0)
        modes = ("held", "dropped", "empty")
        jobs = {mode: (f"held:{mode}:{args.held}", f"the {mode} crawl") for mode in modes}
        counts = count_children(server.port, jobs)
    finally:
        server.stop()
    work = {m: counts[m][0] - counts["empty"][0] for m in ("held", "dropped")}
    print(f"held: {args.held} waiting requests, whole crawl less start-up and shutdown")
    for mode in ("held", "dropped"):
        # (the same as in the timed crawls: bench_held.base_settings)
        downloads = counts[mode][1].get("robots_downloads", "?")
        print(f"{mode:>8} {work[mode]:>16,} instructions, {downloads} robots.txt downloads")
    extra = (work["held"] - work["dropped"]) / args.held
    print(
        f"held / dropped: {work['held'] / work['dropped']:.3f}x "
        f"({extra:,.0f} instructions more per waiting request)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("what", nargs="?", choices=("steady", "held"))
    parser.add_argument("--pages", default="20,120", help="pages per origin, two sizes")
    parser.add_argument("--modes", default="off,rep", help="bench_ab.py modes, first = reference")
    parser.add_argument("--held", type=int, default=40_000)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, mode, size = args.child.split(":")
        child = steady_child if kind == "steady" else held_child
        child(mode, int(size), args.port)
        return
    if shutil.which("valgrind") is None:
        sys.exit("needs valgrind on PATH (apt-get install valgrind)")
    if args.what == "held":
        held(args)
    else:
        steady(args)


if __name__ == "__main__":
    main()
