"""Adversarial robots.txt files of 500 KiB against scrapy_rep and Protego.

Usage: python benchmarks/bench_adversarial.py [--repeat N] [--stat median|best|worst]

Synthetic files built to be slow (the shapes of issue 12 and earlier ones): a group
of thousands of user-agent lines times thousands of extension lines, thousands of
wildcard rules whose probe is absent from the path but costly to look for, tens of
thousands of short absent probes, rules of thousands of "$" or "%7e", thousands of
one-rule groups, thousands of plain prefixes or full-match wildcards.  Every URL is
2,080 characters long.  For each library and file: the parse, the first check, the
slowest check until the group is compiled (scrapy_rep scans, then compiles; Protego
indexes on its first check), a later check and an explain (scrapy_rep only), and
the largest single step of the parse and of the first check's preparation when they
run in bounded steps (RobotsTxt.parse_steps, prepare_steps: what a crawl runs on its
reactor for a large file, see scrapy_rep/crawl/stepping.py), with PASS/FAIL against
the documented bound of 25 ms (docs/rfc.md, "Hostile files"): each the median (or
best, or worst) of N runs, each on a fresh object.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Generator

from protego import Protego

from scrapy_rep import RobotsTxt

SIZE = 500 * 1024
AGENT = "bot"
BOUND_MS = 25.0


def _url(path: str) -> str:
    head = "https://example.com"
    return head + (path + "z" * 2080)[: 2080 - len(head)]


A_PATH = _url("/" + "a" * 3000)
MIXED_PATH = _url("/" + "abc" * 1000)


def fill(head: str, rule: Callable[[int], str]) -> bytes:
    lines, size = [head], len(head)
    while size < SIZE:
        lines.append(rule(len(lines)))
        size += len(lines[-1])
    return "".join(lines).encode()


def _short_probe(n: int) -> str:
    # distinct 3-letter probes none of which is in MIXED_PATH ("abcabc...zzz")
    letters = "defghijklmnopqrstuvwxy"
    return letters[n % 22] + letters[n // 22 % 22] + letters[n // 484 % 22]


def _agents_and_signals() -> bytes:
    agents = "".join(f"useragent: bot{n}\n" for n in range(18_285))
    signals = "content-signal: search=yes, ai-train=no\n" * 16_000
    return (agents + signals).encode()[:SIZE]


def group(rule: Callable[[int], str]) -> bytes:
    """One "*" group filled with rule(n) lines to 500 KiB."""
    return fill("User-agent: *\n", rule)


# label -> (file, URL)
CASES: dict[str, tuple[bytes, str]] = {
    "18,285 agents x 16,000 signals": (_agents_and_signals(), A_PATH),
    "4,000 costly absent probes": (
        group(lambda n: f"Disallow: /{'a' * 40}*{'a' * 40}X{n}{'a' * 40}\n"),
        A_PATH,
    ),
    "30,000 short absent probes": (
        group(lambda n: f"Disallow: /*{_short_probe(n)}\n"),
        MIXED_PATH,
    ),
    "rules of 16,000 '$'": (group(lambda n: f"Disallow: /{n}{'$' * 16_000}\n"), A_PATH),
    "rules of 5,000 '%7e'": (group(lambda n: f"Disallow: /{n}{'%7e' * 5_000}\n"), A_PATH),
    "17,680 one-rule groups": (fill("", lambda n: f"User-agent: bot{n}\nDisallow: /{n}\n"), A_PATH),
    "wildcards matched in full": (group(lambda n: f"Disallow: /*a{n}\n"), A_PATH),
    "wildcards of three pieces": (group(lambda n: f"Disallow: /*a*b*c{n}\n"), A_PATH),
    "anchored wildcard allows": (group(lambda n: f"Allow: /*x{n}$\n"), A_PATH),
    "one slow rule repeated": (
        group(lambda n: "Disallow: /*a*a*a*a*a*a*a*a*a*a*b\n"),
        A_PATH,
    ),
    "plain prefixes": (group(lambda n: f"Disallow: /{n}\n"), A_PATH),
    "escaped prefixes": (group(lambda n: f"Disallow: /%7e{n}\n"), A_PATH),
    "full-match wildcards": (group(lambda n: f"Disallow: /{n}*$\n"), A_PATH),
}


def timed(call: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    call()
    return (time.perf_counter() - t0) * 1000


# what the largest step is timed with: wall time (what the reactor waits), or the
# thread's CPU time (--cpu: what a busy machine does not inflate)
STEP_CLOCK: list[Callable[[], float]] = [time.perf_counter]


def largest_step(steps: Generator[None, None, object]) -> float:
    """The longest single next() of *steps*, run to its end (ms)."""
    clock = STEP_CLOCK[0]
    largest = 0.0
    while True:
        t0 = clock()
        try:
            next(steps)
        except StopIteration:
            return max(largest, (clock() - t0) * 1000)
        largest = max(largest, (clock() - t0) * 1000)


def stepped(body: bytes, url: str) -> tuple[float, float]:
    """The largest step of a parse in steps and of the first check's preparation."""
    parse = largest_step(RobotsTxt.parse_steps(body))
    prepare = largest_step(RobotsTxt.parse(body).prepare_steps(AGENT))
    return parse, prepare


def ours(body: bytes, url: str) -> tuple[float, float, float, float, float]:
    """Parse, first check, slowest check until compiled, a compiled check, explain."""
    rt = RobotsTxt.parse(body)
    parse = timed(lambda: RobotsTxt.parse(body))
    first = timed(lambda: rt.allowed(url, AGENT))
    slowest = first
    token = rt._token(AGENT)
    # (private: only to know when the group is compiled)
    while token is not None and isinstance(rt._groups[token], list):
        slowest = max(slowest, timed(lambda: rt.allowed(url, AGENT)))
    later = timed(lambda: rt.allowed(url, AGENT))
    explain = timed(lambda: rt.explain(url, AGENT))
    return parse, first, slowest, later, explain


def protego(body: bytes, url: str) -> tuple[float, float, float, float, float]:
    text = body.decode("utf-8", "ignore")
    parsers: list[Protego] = []
    parse = timed(lambda: parsers.append(Protego.parse(text)))
    rp = parsers[0]
    first = timed(lambda: rp.can_fetch(url, AGENT))
    return parse, first, first, timed(lambda: rp.can_fetch(url, AGENT)), float("nan")


STATS: dict[str, Callable[[list[float]], float]] = {
    "median": statistics.median,
    "best": min,
    "worst": max,
}


def summary(
    measure: Callable[[bytes, str], tuple[float, ...]],
    body: bytes,
    url: str,
    repeat: int,
    stat: Callable[[list[float]], float],
) -> tuple[float, ...]:
    rows = [measure(body, url) for _ in range(repeat)]
    return tuple(stat(list(col)) for col in zip(*rows, strict=True))


COLUMNS = ("parse", "1st check", "slowest", "later", "explain")
STEP_COLUMNS = ("parse step", "prep. step")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--stat", choices=sorted(STATS), default="median")
    parser.add_argument("--no-protego", action="store_true")
    parser.add_argument(
        "--cpu", action="store_true", help="time the single steps in CPU time, not wall time"
    )
    args = parser.parse_args()
    stat = STATS[args.stat]
    if args.cpu:
        STEP_CLOCK[0] = time.thread_time
    print(f"each figure: the {args.stat} of {args.repeat} runs (Protego: of 1), ms", end="")
    print("; single steps in CPU time" if args.cpu else "")
    widths = (9, 11, 9, 9, 9)
    step_widths = (11, 11)
    head = f"{'file (500 KiB), URL 2,080 chars':<32}{'':>11}"
    head += "".join(f"{c:>{w}}" for c, w in zip(COLUMNS, widths, strict=True))
    print(head + "".join(f"{c:>{w}}" for c, w in zip(STEP_COLUMNS, step_widths, strict=True)))
    over = []
    step_over = []
    for label, (body, url) in CASES.items():
        mine = summary(ours, body, url, args.repeat, stat)
        steps = summary(stepped, body, url, args.repeat, stat)
        rows = [("scrapy_rep", mine)]
        if not args.no_protego:
            rows.append(("Protego", summary(protego, body, url, 1, stat)))
        for name, row in rows:
            cells = "".join(f"{v:>{w}.2f}" for v, w in zip(row, widths, strict=True))
            if name == "scrapy_rep":
                cells += "".join(
                    f"{v:>{w - 5}.2f} {'PASS' if v <= BOUND_MS else 'FAIL'}"
                    for v, w in zip(steps, step_widths, strict=True)
                )
            print(f"{label if name == 'scrapy_rep' else '':<32}{name:>11}{cells}")
        if len(rows) == 2:
            ratios = "".join(
                f"{b / a:>{w - 1}.1f}x" if a == a and b == b and a > 0 else f"{'':>{w}}"
                for a, b, w in zip(mine, rows[1][1], widths, strict=True)
            )
            print(f"{'':<32}{'ratio':>11}{ratios}")
        whole = zip(COLUMNS, mine, strict=True)
        over += [f"{label}: {c} {v:.1f} ms" for c, v in whole if v > BOUND_MS]
        parts = zip(STEP_COLUMNS, steps, strict=True)
        step_over += [f"{label}: {c} {v:.1f} ms" for c, v in parts if v > BOUND_MS]
    print(f"\nwhole steps over {BOUND_MS:.0f} ms: " + ("; ".join(over) if over else "none"))
    print(
        f"single steps (parse_steps, prepare_steps) over {BOUND_MS:.0f} ms: "
        + ("; ".join(step_over) if step_over else "none")
    )
    return 1 if step_over else 0


if __name__ == "__main__":
    sys.exit(main())
