"""Benchmark scrapy_rep's robots.txt engine against Protego on a corpus.

Usage: python benchmarks/bench_parser.py CORPUS_DIR [--repeat N] [--curve-only] [--first-checks]
       [--cpu-time]

Measures, for both libraries in the same run: parse time per file, parse plus the
first check of each agent (both libraries build parts lazily: Protego its per-agent
index, scrapy_rep compiles a group at its first check), allowed() time per check,
memory per file with every group in use compiled (tracemalloc, all parsed objects
kept alive), and the worst single parse with its first checks, and the worst compile
of a file's groups (each blocks a crawl's reactor).  Prints a table and PASS/FAIL for
each target.

Then the curve of where crawls live: parse plus k checks per agent per file (a crawl of
k pages per site) for k in K_CURVE, against Protego; and steady-state checks.
Large k run on every n-th file of the corpus (said in the table) to bound the run.

--cpu-time times with this process's CPU time (time.process_time) instead of the wall
clock, for both libraries alike: on a machine shared with other work the wall clock
also counts the time this process waited for a core, which lands on whichever library
was running then.
"""

from __future__ import annotations

import argparse
import gc
import re
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from protego import Protego

from scrapy_rep import RobotsTxt

COMMON_PATHS = ("/", "/index.html", "/search?q=x", "/wp-admin/", "/a/b/c.html")
USER_AGENTS = ("Googlebot", "MyCrawler/1.0")
BASE = "https://example.com"
RULE_LINE = re.compile(rb"^\s*(?:dis)?allow\s*:\s*(/[^\s#]*)", re.I | re.M)
MAX_RULE_URLS = 10
# Targets (ratios are Protego / scrapy_rep, so bigger is better).
PARSE_SPEEDUP = 3.0
CHECK_SPEEDUP = 3.0
MEMORY_RATIO = 3.0
WORST_PARSE_MS = 25.0
WORST_PARSE_SIZE = 500 * 1024
K_CURVE = (1, 5, 20, 100, 1000)
CURVE_SPEEDUP = 3.0
# k -> use every n-th file (the checks of k = 1000 on all 4,231 files take minutes)
K_STRIDE = {1: 1, 5: 1, 20: 1, 100: 4, 1000: 20}
# what every timing reads (see --cpu-time)
clock: Callable[[], float] = time.perf_counter


def load(corpus: Path) -> list[tuple[str, bytes]]:
    return sorted((p.name, p.read_bytes()) for p in corpus.iterdir() if p.is_file())


def urls_for(body: bytes) -> list[str]:
    """URLs drawn from the file's own rules (wildcards filled in) plus common paths."""
    paths = []
    for m in RULE_LINE.finditer(body[:WORST_PARSE_SIZE]):
        path = m.group(1).decode("utf-8", "replace").replace("*", "x").rstrip("$")
        paths.append(path)
        if len(paths) >= MAX_RULE_URLS:
            break
    return [BASE + p for p in (*paths, *COMMON_PATHS)]


def protego_parse(body: bytes) -> Any:
    return Protego.parse(body.decode("utf-8", "ignore"))


def time_parse(
    files: list[tuple[str, bytes]], parse: Callable[[bytes], Any], per_file: dict[str, float]
) -> tuple[float, list[Any]]:
    """One timed pass; *per_file* keeps each file's best time over the passes."""
    parsed: list[Any] = []
    total = 0.0
    for name, body in files:
        t0 = clock()
        obj = parse(body)
        dt = clock() - t0
        total += dt
        per_file[name] = min(per_file.get(name, dt), dt)
        parsed.append(obj)
    return total, parsed


def time_first_use(
    files: list[tuple[str, bytes]],
    urls: list[list[str]],
    parse: Callable[[bytes], Any],
    method: str,
    per_file: dict[str, float],
) -> None:
    """Parse plus the first check of each agent, per file (best over the passes)."""
    for (name, body), file_urls in zip(files, urls, strict=True):
        t0 = clock()
        check = getattr(parse(body), method)
        for agent in USER_AGENTS:
            check(file_urls[0], agent)
        dt = clock() - t0
        per_file[name] = min(per_file.get(name, dt), dt)


def compile_groups(robots: RobotsTxt) -> RobotsTxt:
    """Compile the groups both agents obey now, as their first checks would."""
    for agent in USER_AGENTS:
        robots.prepare(agent)
    return robots


def time_compile(files: list[tuple[str, bytes]], per_file: dict[str, float]) -> None:
    """scrapy_rep's compile of the groups both agents obey, per file (best over the
    passes)."""
    for name, body in files:
        robots = RobotsTxt.parse(body)
        t0 = clock()
        compile_groups(robots)
        dt = clock() - t0
        per_file[name] = min(per_file.get(name, dt), dt)


def time_bare(files: list[tuple[str, bytes]], parse: Callable[[bytes], Any]) -> float:
    """Parse time per file when each result is dropped at once."""
    t0 = clock()
    for _, body in files:
        parse(body)
    return (clock() - t0) / len(files)


def worst(files: list[tuple[str, bytes]], per_file: dict[str, float]) -> tuple[float, str]:
    """Slowest single parse (ms) of a file of at most 500 KiB, and its name."""
    name = max((n for n, b in files if len(b) <= WORST_PARSE_SIZE), key=per_file.__getitem__)
    return per_file[name] * 1000, name


def time_checks(objs: list[Any], urls: list[list[str]], method: str) -> float:
    """One timed pass of every check (the bound method is called directly)."""
    t0 = clock()
    for obj, file_urls in zip(objs, urls, strict=True):
        check = getattr(obj, method)
        for ua in USER_AGENTS:
            for url in file_urls:
                check(url, ua)
    return clock() - t0


def memory(
    files: list[tuple[str, bytes]],
    parse: Callable[[bytes], Any],
    check: Callable[[Any, str, str], bool] | None = None,
) -> float:
    """Traced memory per parsed file, all kept alive; after one check per agent when
    *check* is given (the parts both libraries build lazily included)."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    kept = [parse(body) for _, body in files]
    if check is not None:
        for obj in kept:
            for agent in USER_AGENTS:
                check(obj, BASE + "/", agent)
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    del kept
    return used / len(files)


def parse_and_first_check(
    files: list[tuple[str, bytes]],
    urls: list[list[str]],
    parse: Callable[[bytes], Any],
    method: str,
) -> float:
    """One pass of parse plus the first check of both agents per file: what a crawler
    pays per robots.txt, with the lazily built parts (scrapy_rep compiles a group, and
    Protego indexes a rule set, on first use) included."""
    t0 = clock()
    for (_, body), file_urls in zip(files, urls, strict=True):
        check = getattr(parse(body), method)
        for agent in USER_AGENTS:
            check(file_urls[0], agent)
    return (clock() - t0) / len(files)


def ours_check_one(robots: RobotsTxt, url: str, agent: str) -> bool:
    return robots.allowed(url, agent)


def parse_and_k_checks(
    files: list[tuple[str, bytes]],
    urls: list[list[str]],
    parse: Callable[[bytes], Any],
    method: str,
    k: int,
) -> float:
    """Seconds per file: parse, then k checks per agent, over the file's own URLs."""
    plans = [
        (body, [u[i % len(u)] for i in range(k)]) for (_, body), u in zip(files, urls, strict=True)
    ]
    t0 = clock()
    for body, plan in plans:
        check = getattr(parse(body), method)
        for agent in USER_AGENTS:
            for url in plan:
                check(url, agent)
    return (clock() - t0) / len(files)


def curve(
    files: list[tuple[str, bytes]], urls: list[list[str]], repeat: int
) -> list[tuple[int, int, float, float]]:
    """(k, files used, scrapy_rep s/file, Protego s/file) for each k of K_CURVE."""
    rows = []
    for k in K_CURVE:
        stride = K_STRIDE[k]
        some, some_urls = files[::stride], urls[::stride]
        ours = prot = float("inf")
        for _ in range(repeat):
            gc.collect()
            ours = min(ours, parse_and_k_checks(some, some_urls, RobotsTxt.parse, "allowed", k))
            gc.collect()
            prot = min(prot, parse_and_k_checks(some, some_urls, protego_parse, "can_fetch", k))
        rows.append((k, len(some), ours, prot))
    return rows


def print_curve(
    files: list[tuple[str, bytes]], urls: list[list[str]], repeat: int
) -> list[tuple[str, bool]]:
    print(f"parse + k checks per agent per file ({len(USER_AGENTS)} agents), us per file")
    print(f"{'k':>6} {'files':>6} {'scrapy_rep':>12} {'Protego':>12} {'ratio':>8}")
    results = []
    for k, used, ours, prot in curve(files, urls, repeat):
        print(f"{k:>6} {used:>6} {ours * 1e6:>12.1f} {prot * 1e6:>12.1f} {prot / ours:>7.1f}x")
        results.append(
            (f"parse + {k} checks >= {CURVE_SPEEDUP:g}x faster", prot / ours >= CURVE_SPEEDUP)
        )
    print()
    allowed, explain, prot = explain_vs_allowed(files, urls, repeat)
    print(
        f"groups compiled, per check: allowed() {allowed * 1e6:.2f} us, explain() "
        f"{explain * 1e6:.2f} us (+{(explain - allowed) * 1e6:.2f} us), Protego can_fetch() "
        f"{prot * 1e6:.2f} us ({prot / explain:.1f}x explain)\n"
    )
    return results


def explain_vs_allowed(
    files: list[tuple[str, bytes]], urls: list[list[str]], repeat: int
) -> tuple[float, float, float]:
    """Seconds per check of allowed() and explain() (a crawl explains every request,
    see crawl/decide.py) on the compiled groups, and of Protego's can_fetch(), over the
    same checks."""
    ours = [compile_groups(RobotsTxt.parse(body)) for _, body in files]
    prot = [protego_parse(body) for _, body in files]
    n_checks = sum(len(u) for u in urls) * len(USER_AGENTS)
    allowed = explain = prot_check = float("inf")
    for _ in range(repeat):
        allowed = min(allowed, time_checks(ours, urls, "allowed") / n_checks)
        explain = min(explain, time_checks(ours, urls, "explain") / n_checks)
        prot_check = min(prot_check, time_checks(prot, urls, "can_fetch") / n_checks)
    return allowed, explain, prot_check


# --first-checks: groups of growing size, and crawls of a few pages per site
FIRST_CHECK_RULES = (10, 100, 500, 1000, 2000, 5000)
FIRST_CHECK_K = (1, 2, 5, 10, 20)


def synthetic_group(rules: int, wildcards: bool) -> bytes:
    """One "*" group of *rules* plain prefixes, every 4th a wildcard rule if asked."""
    lines = [b"User-agent: *"]
    for i in range(rules):
        wild = wildcards and i % 4 == 0
        lines.append(b"Disallow: /p%d/*.pdf$" % i if wild else b"Disallow: /dir%d/sub" % i)
    return b"\n".join(lines) + b"\n"


def first_check(body: bytes, repeat: int) -> float:
    """Seconds of one file's first allowed() (its parse excluded), best of *repeat*."""
    best = float("inf")
    for _ in range(repeat):
        robots = RobotsTxt.parse(body)
        t0 = clock()
        robots.allowed(BASE + "/dir5/sub/page.html", "MyCrawler/1.0")
        best = min(best, clock() - t0)
    return best


def print_first_checks(files: list[tuple[str, bytes]], urls: list[list[str]], repeat: int) -> None:
    """What a site's first checks cost: the first check of one group of growing size
    (parse excluded), and parse plus k checks per agent per corpus file for small k.
    Run it on two versions of the engine to compare them (see docs/benchmarks.md)."""
    print("first check of one group, parse excluded, us")
    print(f"{'rules':>6} {'plain':>10} {'1/4 wild':>10}")
    for rules in FIRST_CHECK_RULES:
        plain = first_check(synthetic_group(rules, False), 20 * repeat)
        wild = first_check(synthetic_group(rules, True), 20 * repeat)
        print(f"{rules:>6} {plain * 1e6:>10.1f} {wild * 1e6:>10.1f}")
    print(f"\nparse + k checks per agent per file ({len(USER_AGENTS)} agents), us per file")
    print(f"{'k':>6} {'scrapy_rep':>12}")
    for k in FIRST_CHECK_K:
        best = float("inf")
        for _ in range(repeat):
            gc.collect()
            best = min(best, parse_and_k_checks(files, urls, RobotsTxt.parse, "allowed", k))
        print(f"{k:>6} {best * 1e6:>12.1f}")


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--curve-only", action="store_true", help="only the k-checks curve")
    ap.add_argument(
        "--first-checks",
        action="store_true",
        help="only what a site's first checks cost (groups of growing size, small k)",
    )
    ap.add_argument(
        "--cpu-time", action="store_true", help="time with process CPU time (see the docstring)"
    )
    args = ap.parse_args(argv)
    global clock
    clock = time.process_time if args.cpu_time else time.perf_counter
    files = load(args.corpus)
    if not files:
        print(f"no files in {args.corpus}")
        return 2
    urls = [urls_for(body) for _, body in files]
    print(
        f"corpus: {len(files)} files, {sum(len(b) for _, b in files) / 1e6:.1f} MB, "
        f"timed by {'CPU time' if args.cpu_time else 'wall clock'}"
    )
    if args.first_checks:
        print_first_checks(files, urls, args.repeat)
        return 0
    curve_results = print_curve(files, urls, args.repeat)
    if args.curve_only:
        for label, ok in curve_results:
            print(f"{verdict(ok)}  {label}")
        return 0 if all(ok for _, ok in curve_results) else 1

    # Every timing is interleaved (scrapy_rep, then Protego, --repeat times) and the
    # best pass counts, so load from other processes hits both libraries alike.
    ours_files: dict[str, float] = {}
    prot_files: dict[str, float] = {}
    ours_parse = prot_parse = float("inf")
    # Each pass starts with no parsed objects alive (they would make the garbage
    # collector's passes, which both libraries trigger, slower for the other).
    for _ in range(args.repeat):
        # ([0]: the parsed objects are dropped before the other library's pass)
        gc.collect()
        total = time_parse(files, RobotsTxt.parse, {})[0]
        ours_parse = min(ours_parse, total / len(files))
        gc.collect()
        total = time_parse(files, protego_parse, {})[0]
        prot_parse = min(prot_parse, total / len(files))
    # The worst single parse (with its first checks) is its own time: measured with
    # the collector off, since a collection lands on whichever file triggers it.
    compile_files: dict[str, float] = {}
    gc.disable()
    try:
        for _ in range(args.repeat):
            time_first_use(files, urls, RobotsTxt.parse, "allowed", ours_files)
            time_first_use(files, urls, protego_parse, "can_fetch", prot_files)
            time_compile(files, compile_files)
    finally:
        gc.enable()
    # The same without keeping the results: no live objects for the collector to
    # walk, which favours libraries that allocate many objects per file.
    ours_bare = prot_bare = float("inf")
    for _ in range(args.repeat):
        gc.collect()
        ours_bare = min(ours_bare, time_bare(files, RobotsTxt.parse))
        gc.collect()
        prot_bare = min(prot_bare, time_bare(files, protego_parse))
    ours = [compile_groups(RobotsTxt.parse(body)) for _, body in files]
    prot = [protego_parse(body) for _, body in files]
    ours_worst, ours_worst_name = worst(files, ours_files)
    prot_worst, prot_worst_name = worst(files, prot_files)
    compile_worst, compile_worst_name = worst(files, compile_files)
    n_checks = sum(len(u) for u in urls) * len(USER_AGENTS)
    ours_check = prot_check = float("inf")
    for _ in range(args.repeat):
        ours_check = min(ours_check, time_checks(ours, urls, "allowed") / n_checks)
        prot_check = min(prot_check, time_checks(prot, urls, "can_fetch") / n_checks)
    del ours, prot
    # Memory is counted once each agent's group is compiled: what a crawler holds for
    # a site it keeps crawling, lazily built parts (Protego's index) included.
    ours_mem = memory(files, lambda body: compile_groups(RobotsTxt.parse(body)), ours_check_one)
    prot_mem = memory(files, protego_parse, lambda o, u, a: o.can_fetch(u, a))
    ours_mem_first = memory(files, RobotsTxt.parse, ours_check_one)
    ours_mem_parsed = memory(files, RobotsTxt.parse)
    ours_first = prot_first = float("inf")
    for _ in range(args.repeat):
        gc.collect()
        ours_first = min(ours_first, parse_and_first_check(files, urls, RobotsTxt.parse, "allowed"))
        gc.collect()
        prot_first = min(prot_first, parse_and_first_check(files, urls, protego_parse, "can_fetch"))

    rows = [
        ("parse / file (us)", ours_parse * 1e6, prot_parse * 1e6),
        ("  same, results dropped (us)", ours_bare * 1e6, prot_bare * 1e6),
        ("parse + first checks (us)", ours_first * 1e6, prot_first * 1e6),
        ("allowed() / check (us)", ours_check * 1e6, prot_check * 1e6),
        ("memory / file, compiled (KiB)", ours_mem / 1024, prot_mem / 1024),
        ("worst parse+checks (ms)", ours_worst, prot_worst),
    ]
    print(f"checks: {n_checks} ({len(USER_AGENTS)} user agents)\n")
    print(f"{'metric':<28} {'scrapy_rep':>12} {'Protego':>12} {'ratio':>8}")
    for label, mine, theirs in rows:
        print(f"{label:<28} {mine:>12.2f} {theirs:>12.2f} {theirs / mine:>7.1f}x")
    print(f"{'memory, first checks (KiB)':<28} {ours_mem_first / 1024:>12.2f}")
    print(f"{'memory, parsed only (KiB)':<28} {ours_mem_parsed / 1024:>12.2f}")
    print(f"{'worst compile (ms)':<28} {compile_worst:>12.2f}")
    print(f"worst file: scrapy_rep {ours_worst_name}, Protego {prot_worst_name}")
    print(f"worst compile: {compile_worst_name}\n")

    results = [
        *curve_results,
        (f"parse >= {PARSE_SPEEDUP:g}x faster", prot_parse / ours_parse >= PARSE_SPEEDUP),
        (
            f"parse + first checks >= {PARSE_SPEEDUP:g}x faster",
            prot_first / ours_first >= PARSE_SPEEDUP,
        ),
        (f"steady check >= {CHECK_SPEEDUP:g}x faster", prot_check / ours_check >= CHECK_SPEEDUP),
        (f"memory <= 1/{MEMORY_RATIO:g} of Protego", prot_mem / ours_mem >= MEMORY_RATIO),
        (
            f"no parse (+ first checks) or compile of a <=500 KiB file over {WORST_PARSE_MS:g} ms",
            max(ours_worst, compile_worst) <= WORST_PARSE_MS,
        ),
    ]
    for label, ok in results:
        print(f"{verdict(ok)}  {label}")
    return 0 if all(ok for _, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main())
