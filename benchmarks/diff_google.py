"""Differential test: scrapy_rep against Google's C++ robots.txt library.

Usage: python benchmarks/diff_google.py CORPUS_DIR [--max-urls N] [--show N]

Needs ``fast-robotstxt`` (module ``robotstxt``), Python bindings of
github.com/google/robotstxt.  For every corpus file and a sample of URLs (drawn
from the file's own rules, variants of them, and common paths) both libraries
decide for two product tokens; each disagreement is put down to a cause, and the
causes are the RFC 9309-over-Google decisions documented in docs/rfc.md.  A
disagreement no known cause explains is printed as "unexplained".
"""

from __future__ import annotations

import argparse
import ctypes
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from scrapy_rep import RobotsTxt

AGENTS = ("Googlebot", "MyCrawler")
COMMON = ("/", "/index.html", "/search?q=x", "/wp-admin/", "/a/b/c.html", "/robots.txt")
RULE = re.compile(rb"^[ \t]*[A-Za-z -]*allow[ \t]*:?[ \t]*([^\s#]+)", re.I | re.M)
BASE = "https://example.com"
ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
UNRESERVED = re.compile(r"[A-Za-z0-9~]")
# a User-agent value whose product token goes on past a digit or a non-ASCII letter,
# where Google's library cuts it (scrapy_rep keeps it whole: docs/rfc.md)
LONG_TOKEN = re.compile(
    rb"^[ \t]*user[ -]?agent[ \t]*:?[ \t]*[A-Za-z_-]*[0-9\x80-\xff]", re.I | re.M
)


def google() -> Any:
    """The C entry point, fed raw bytes (the wrapper would re-encode str)."""
    from robotstxt import robots

    lib = robots._lib
    matcher = lib.robots_matcher_create()

    def allowed(body: bytes, agent: str, url: str) -> bool:
        ua = agent.encode()
        target = url.encode("utf-8", "surrogatepass")
        return bool(
            lib.robots_allowed_by_robots(matcher, body, len(body), ua, len(ua), target, len(target))
        )

    return allowed, ctypes


def sample_urls(body: bytes, limit: int) -> list[str]:
    paths: list[str] = []
    for m in RULE.finditer(body[:512_000]):
        raw = m.group(1).decode("utf-8", "replace").rstrip("$")
        base = raw.replace("*", "x")
        paths += [base, base + "z", base[:-1] or "/"]
        # the same path with other, equivalent escaping: lower-case hex, and an
        # unreserved character written as %XX (RFC 9309 §2.2.2 says: same URL)
        lowered = ESCAPE.sub(lambda e: e.group().lower(), base)
        letter = UNRESERVED.search(base, 1)
        if letter:
            at = letter.start()
            paths.append(f"{base[:at]}%{ord(base[at]):02X}{base[at + 1 :]}")
        if lowered != base:
            paths.append(lowered)
        if len(paths) >= limit:
            break
    return [BASE + (p if p.startswith("/") else "/" + p) for p in (*paths, *COMMON)]


def cause(body: bytes, url: str, ours: RobotsTxt, agent: str) -> str:
    """Which documented decision explains a disagreement."""
    path = url[len(BASE) :] or "/"
    if path.split("?")[0] == "/robots.txt":
        return "robots.txt always allowed (RFC 9309 §2.2.2)"
    decision = ours.explain(url, agent)
    rule = decision.rule or ""
    if LONG_TOKEN.search(body):
        return "product tokens keep digits and non-ASCII letters (RFC over Google, docs/rfc.md)"
    if len(body) > 512_000:
        return "parse limit: only the first 500 KiB is read (RFC 9309 §2.5)"
    if ESCAPE.search(path) or not path.isascii() or "%" in rule or not rule.isascii():
        return "percent-encoding normalised on both sides (RFC 9309 §2.2.2)"
    if "$" in path or "*" in path:
        return "literal * or $ in the URL compared as %2A / %24 (RFC 9309 §2.2.3)"
    if any(c in path for c in ' \\{}|^`"<>'):
        return "URL characters the binding's WHATWG URL parser escapes or rewrites"
    segments = path.split("?")[0].split("/")
    if "." in segments or ".." in segments:
        return "dot segments ('.', '..') the binding's WHATWG URL parser removes"
    if path.endswith("?"):
        return "an empty query keeps its '?' (the binding's WHATWG URL parser drops it)"
    if decision.reason == "rule" and "$" in rule[:-1]:
        return "a $ before the end of a pattern is a literal (%24)"
    return "unexplained"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="scrapy_rep vs Google's robots.txt library")
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--max-urls", type=int, default=20)
    ap.add_argument("--show", type=int, default=3, help="examples printed per cause")
    args = ap.parse_args(argv)
    try:
        google_allowed, _ = google()
    except ImportError:
        print("fast-robotstxt is not installed (pip install fast-robotstxt)")
        return 2
    checks = 0
    counts: Counter[str] = Counter()
    examples: dict[str, list[str]] = defaultdict(list)
    files = sorted(p for p in args.corpus.iterdir() if p.is_file())
    for path in files:
        body = path.read_bytes()
        ours = RobotsTxt.parse(body)
        for url in sample_urls(body, args.max_urls):
            for agent in AGENTS:
                checks += 1
                mine = ours.allowed(url, agent)
                if mine == google_allowed(body, agent, url):
                    continue
                why = cause(body, url, ours, agent)
                counts[why] += 1
                if len(examples[why]) < args.show:
                    d = ours.explain(url, agent)
                    examples[why].append(
                        f"{path.name}: {agent} {url} ours={mine} line={d.line} rule={d.rule!r}"
                    )
    total = sum(counts.values())
    print(f"{len(files)} files, {checks} checks, {total} disagreements")
    for why, n in counts.most_common():
        print(f"\n{n:6d}  {why}")
        for line in examples[why]:
            print(f"        {line}")
    return 1 if counts["unexplained"] else 0


if __name__ == "__main__":
    sys.exit(main())
