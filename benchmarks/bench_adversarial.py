"""Adversarial robots.txt files of 500 KiB against scrapy_rep and Protego.

Usage: python benchmarks/bench_adversarial.py

Synthetic files built to be slow: thousands of wildcard rules that every path must
match in full, a rule repeated thousands of times, thousands of plain prefixes.  For
each library: the parse, the first check, the slowest step until checks are fast
(scrapy_rep scans, then compiles the group; Protego indexes on its first check) and a
later check.  These bound what one hostile site can cost a crawl's reactor; the
corpus benchmark (bench_parser.py) measures real files.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from protego import Protego

from scrapy_rep import RobotsTxt

SIZE = 500 * 1024
URL = "https://example.com/" + "a" * 50 + "b" * 50 + "c" * 50 + "x"
AGENT = "bot"
CASES = {
    "wildcards matched in full": "Disallow: /*a{}\n",
    "wildcards of three pieces": "Disallow: /*a*b*c{}\n",
    "anchored wildcard allows": "Allow: /*x{}$\n",
    "one slow rule repeated": "Disallow: /*a*a*a*a*a*a*a*a*a*a*b\n",
    "plain prefixes": "Disallow: /{}\n",
}


def build(rule: str) -> bytes:
    lines, size = ["User-agent: *\n"], 14
    while size < SIZE:
        lines.append(rule.format(len(lines)))
        size += len(lines[-1])
    return "".join(lines).encode()


def timed(call: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    call()
    return (time.perf_counter() - t0) * 1000


def ours(body: bytes) -> tuple[float, float, float, float]:
    """Parse, first check, slowest check until compiled, a compiled check (ms)."""
    robots: list[RobotsTxt] = []
    parse = timed(lambda: robots.append(RobotsTxt.parse(body)))
    rt = robots[0]
    first = timed(lambda: rt.allowed(URL, AGENT))
    slowest = first
    while isinstance(rt._groups["*"], list):  # (private: only to know when it compiled)
        slowest = max(slowest, timed(lambda: rt.allowed(URL, AGENT)))
    return parse, first, slowest, timed(lambda: rt.allowed(URL, AGENT))


def protego(body: bytes) -> tuple[float, float, float, float]:
    parsers: list[Protego] = []
    parse = timed(lambda: parsers.append(Protego.parse(body.decode("utf-8", "ignore"))))
    rp = parsers[0]
    first = timed(lambda: rp.can_fetch(URL, AGENT))
    return parse, first, first, timed(lambda: rp.can_fetch(URL, AGENT))


def main() -> int:
    head = f"{'file (500 KiB)':<28}{'':>11}{'parse':>9}{'1st check':>11}{'slowest':>9}{'later':>9}"
    print(head + "   (ms)")
    for label, rule in CASES.items():
        body = build(rule)
        mine, theirs = ours(body), protego(body)
        for name, row in (("scrapy_rep", mine), ("Protego", theirs)):
            cells = "".join(f"{v:>{w}.2f}" for v, w in zip(row, (9, 11, 9, 9), strict=True))
            print(f"{label if name == 'scrapy_rep' else '':<28}{name:>11}{cells}")
        ratios = "".join(
            f"{b / a:>{w}.1f}x" for a, b, w in zip(mine, theirs, (8, 10, 8, 8), strict=True)
        )
        print(f"{'':<28}{'ratio':>11}{ratios}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
