"""Plain-text reports of the demo: per spider (logged at close) and per origin (run_demo.py).

The input is the ledger that ``demo.middlewares.CrawlLedger`` writes: one entry per
request with its outcome (downloaded / dropped / failed), scrapy-rep's decision (token,
rule, line, group) and how long it waited for robots.txt.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from itertools import pairwise
from typing import Any

Ledger = Mapping[str, Any]


def _rule(entry: Mapping[str, Any]) -> str:
    if entry.get("line") is not None:
        groups = ", ".join(entry.get("groups") or []) or "-"
        return f'line {entry["line"]}: "{entry["rule"]}" (group {groups})'
    return str(entry.get("reason") or "")


def _token(entry: Mapping[str, Any]) -> str:
    return f"{entry.get('token') or '?'} ({entry.get('token_from')})"


def format_spider(ledger: Ledger, summary_line: str | None = None) -> list[str]:
    """What one spider crawled, dropped and delayed."""
    entries = ledger["entries"]
    by_outcome: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for entry in sorted(entries, key=lambda e: (e["origin"], e["at"])):
        by_outcome[entry["outcome"]].append(entry)
    held = [e for e in entries if e["held"]]
    lines = [
        f'Spider "{ledger["spider"]}": {len(entries)} requests: '
        f"{len(by_outcome['downloaded'])} downloaded, "
        f"{len(by_outcome['dropped'])} dropped by robots.txt, "
        f"{len(held)} delayed until their robots.txt was known"
        + (f", {len(by_outcome['failed'])} failed" if by_outcome["failed"] else ""),
    ]
    width = max((len(e["url"]) for e in entries), default=0)
    lines.append("  downloaded:")
    for e in by_outcome["downloaded"]:
        lines.append(
            f"    {e['url']:<{width}}  as {_token(e)}, waited {e['waited']:.2f} s, "
            f"HTTP {e['status']}"
        )
    lines.append("  dropped by robots.txt:")
    for e in by_outcome["dropped"]:
        lines.append(f"    {e['url']:<{width}}  as {_token(e)}: {_rule(e)}")
    if by_outcome["failed"]:
        lines.append("  failed:")
        for e in by_outcome["failed"]:
            lines.append(f"    {e['url']:<{width}}  {e.get('error')}")
    longest: dict[str, float] = defaultdict(float)
    for e in held:
        longest[e["origin"]] = max(longest[e["origin"]], e["waited"])
    waits = ", ".join(
        f"{origin} {wait:.2f} s"
        for origin, wait in sorted(longest.items(), key=lambda item: -item[1])
    )
    lines.append(f"  delayed: {len(held)} request(s); longest wait per origin: {waits or '-'}")
    stats = ledger.get("stats") or {}
    keys = ("delayed", "released", "unreachable", "forbidden", "request_count")
    lines.append(
        "  stats: "
        + ", ".join(f"robotstxt/{key}={stats.get('robotstxt/' + key, 0)}" for key in keys)
    )
    if summary_line:
        lines.append(f"  {summary_line}")
    return lines


def _min_gap(times: list[float]) -> float | None:
    times = sorted(times)
    gaps = [b - a for a, b in pairwise(times)]
    return min(gaps) if gaps else None


def format_origins(
    ledgers: Iterable[Ledger], origins: Mapping[str, str], robots_log: Mapping[str, str]
) -> list[str]:
    """One row per origin, all spiders together.

    ``origins`` maps role -> base URL; ``robots_log`` maps role -> what the site answered
    to robots.txt requests (built by run_demo.py from the site's own log).
    """
    role_of = {url: role for role, url in origins.items()}
    rows: dict[str, dict[str, Any]] = {}
    times: dict[str, list[float]] = defaultdict(list)
    for ledger in ledgers:
        for e in ledger["entries"]:
            row = rows.setdefault(
                e["origin"],
                {"downloaded": 0, "dropped": 0, "failed": 0, "held": 0, "wait": 0.0, "via": ""},
            )
            row[e["outcome"]] += 1
            row["held"] += int(e["held"])
            row["wait"] = max(row["wait"], e["waited"])
            row["via"] = row["via"] or e.get("robots") or ""
            if e["outcome"] == "downloaded" and ledger["spider"] == "tour":
                times[e["origin"]].append(e["at"])
    for url in origins.values():
        # An origin nobody crawls (cdn: it only serves redirect's robots.txt hops) still
        # gets its row, so the table lists every origin the demo printed at the start.
        rows.setdefault(
            url, {"downloaded": 0, "dropped": 0, "failed": 0, "held": 0, "wait": 0.0, "via": ""}
        )
    header = (
        f"{'role':<9} {'origin':<23} {'robots.txt answers (site log)':<30} {'crawled':>7} "
        f"{'dropped':>7} {'delayed':>7} {'longest wait':>12} {'min gap':>8}"
    )
    lines = [header, "-" * len(header)]
    for origin, row in sorted(rows.items(), key=lambda item: _role_order(role_of, item[0])):
        role = role_of.get(origin, "?")
        gap = _min_gap(times[origin])
        lines.append(
            f"{role:<9} {origin:<23} {robots_log.get(role, '-'):<30} {row['downloaded']:>7} "
            f"{row['dropped']:>7} {row['held']:>7} {row['wait']:>10.2f} s "
            f"{(f'{gap:.2f} s' if gap is not None else '-'):>8}"
        )
    lines += [
        "",
        "delayed: requests scrapy-rep held until the origin's robots.txt was known (every",
        "  origin's first requests wait for its fetch); longest wait: how long. The 503 origin",
        "  waits for the retry after REP_RETRY_BACKOFF, the slow one for its 2 s answer, and",
        "  the other origins keep crawling meanwhile.",
        "min gap: the shortest time between two downloads of spider tour on that origin",
        "  (Crawl-delay: 1 on the delay origin).",
        "robots.txt answers: the three spiders are three processes, each with its own",
        "  REP_STORAGE = 'memory', so each fetches robots.txt once per origin it crawls:",
        "  the rules origin, which all three crawl, shows three 200s. Processes that share",
        "  a store (SQLite, Redis) fetch it once between them. cdn serves only redirect's",
        "  hops (shown in redirect's row), so nobody crawls it.",
    ]
    return lines


def _role_order(role_of: Mapping[str, str], origin: str) -> tuple[int, str]:
    roles = list(dict.fromkeys(role_of.values()))
    role = role_of.get(origin)
    return (roles.index(role) if role in roles else len(roles), origin)


def format_verdicts(ledgers: Iterable[Ledger], origin: str) -> list[str]:
    """The same paths of one origin, judged under each product token."""
    verdicts: dict[str, dict[str, str]] = defaultdict(dict)
    tokens: dict[str, str] = {}
    for ledger in ledgers:
        for e in ledger["entries"]:
            if e["origin"] != origin or not e.get("token"):
                continue
            tokens.setdefault(e["token"], f"{ledger['spider']}, {e['token_from']}")
            verdicts[e["path"]][e["token"]] = (
                "crawled" if e["outcome"] == "downloaded" else e["outcome"]
            )
    width = max((len(path) for path in verdicts), default=4)
    columns = list(tokens)
    lines = [f"{'path':<{width}}  " + "  ".join(f"{t:<10}" for t in columns)]
    for path in sorted(verdicts):
        cells = (verdicts[path].get(token, "-") for token in columns)
        lines.append(f"{path:<{width}}  " + "  ".join(f"{c:<10}" for c in cells))
    lines.append("tokens: " + "; ".join(f"{t} ({how})" for t, how in tokens.items()))
    return lines
