"""``scrapy robots verify FILE...`` and ``scrapy robots report FILE... -o report.html``:
read compliance records (crawl/record.py, docs/record.md), re-decide every recorded
decision from the recorded copies, and render one self-contained HTML page."""

from __future__ import annotations

import base64
import binascii
import html
import json
import sys
import zlib
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, Any

from scrapy_rep.commands.output import EXIT_USAGE, when
from scrapy_rep.crawl.record import (
    ALLOWED,
    DROPPED_AT_CLOSE,
    FORBIDDEN,
    PAGE,
    RELEASED,
    SCHEMA_VERSION,
    STATE_ALLOW_ALL,
    STATE_FALLBACK,
    STATE_UNREACHABLE,
    USAGE_REFUSED,
)
from scrapy_rep.policy.origin import origin_of
from scrapy_rep.robotstxt import DEFAULT_MAX_SIZE, RobotsTxt

RECORD_TOOLS = ("verify", "report")
EXIT_OK, EXIT_MISMATCH = 0, 1
_CHUNK = 1 << 16
MAX_LISTED = 2000  # forbidden URLs listed in the report (the rest are counted)


@dataclass
class Problem:
    path: str
    line: int
    message: str
    fatal: bool = True  # False: a file cut short at its end (kill -9), read up to there

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass
class Decision:
    path: str
    line: int
    verdict: str
    time: float  # seconds since the epoch
    url: str
    origin: str
    doc: dict[str, Any]
    context: dict[str, Any] | None = None
    copy: dict[str, Any] | None = None


@dataclass
class Records:
    """Everything read from one or more record files."""

    decisions: list[Decision] = field(default_factory=list)
    headers: list[dict[str, Any]] = field(default_factory=list)
    bodies: dict[str, bytes] = field(default_factory=dict)  # sha256 -> body
    copies: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def copy_count(self) -> int:
        return len({copy["sha256"] for copy in self.copies})

    def print_problems(self, out: IO[str]) -> None:
        for problem in self.problems:
            print(("error: " if problem.fatal else "note: ") + str(problem), file=out)


def _lines(path: Path, problems: list[Problem]) -> Any:
    """(line number, raw bytes) of each whole line of a gzip file of one or more
    members; a file cut short ends at its last whole line, with a non-fatal Problem."""
    name = str(path)
    pending = b""
    number = 0
    decompressor = zlib.decompressobj(31)
    started = False  # whether the current member has had any data
    with path.open("rb") as raw:
        for chunk in iter(partial(raw.read, _CHUNK), b""):
            while chunk:
                started = True
                try:
                    data = decompressor.decompress(chunk)
                except zlib.error as exc:
                    problems.append(
                        Problem(name, number + 1, f"damaged (not gzip data from here: {exc})")
                    )
                    return
                pending += data
                *whole, pending = pending.split(b"\n")
                for line in whole:
                    number += 1
                    yield number, line
                chunk = b""
                if decompressor.eof:  # a member ended: the next one (an appended run)
                    chunk = decompressor.unused_data
                    decompressor = zlib.decompressobj(31)
                    started = False
    if pending:
        problems.append(
            Problem(name, number + 1, "cut short in the middle of a line (not read)", False)
        )
    elif started and not decompressor.eof and number:
        problems.append(
            Problem(
                name,
                number,
                "the file ends without its gzip trailer (the crawl did not close it: killed?); "
                "read up to its last whole line",
                False,
            )
        )
    elif number == 0:
        problems.append(Problem(name, 0, "empty: no record in it"))


def read_records(paths: list[Path]) -> Records:
    records = Records()
    for path in paths:
        _read_one(path, records)
    return records


def _read_one(path: Path, records: Records) -> None:
    name = str(path)
    problems = records.problems
    header: dict[str, Any] | None = None
    declared: dict[str, dict[int, dict[str, Any]]] = {}  # kind (x, c, p) -> number -> line
    try:
        lines = list(_lines(path, problems))
    except OSError as exc:
        problems.append(Problem(name, 0, f"cannot read: {exc.strerror or exc}"))
        return
    for number, raw in lines:
        try:
            doc = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            problems.append(Problem(name, number, "not a JSON line"))
            continue
        if not isinstance(doc, dict):
            problems.append(Problem(name, number, "not a JSON object"))
            continue
        try:
            if "h" in doc:
                if doc["h"] != SCHEMA_VERSION:
                    problems.append(
                        Problem(name, number, f"schema version {doc['h']!r}: not readable here")
                    )
                    return
                header = doc
                records.headers.append(doc)
                declared = {"x": {}, "c": {}, "p": {}}  # (numbers restart per run)
                continue
            if header is None:
                problems.append(Problem(name, number, "a record line before any header"))
                return
            # a decision line also refers to x and p, a context line to c: "v" first
            kind = next((kind for kind in "vxcp" if kind in doc), None)
            if kind == "v":
                _decision(name, number, doc, header, declared, records)
            elif kind is not None:
                declared[kind][int(doc[kind])] = doc
            else:
                problems.append(Problem(name, number, "a line of no known kind"))
            if kind == "c":
                body = doc.get("body")
                if body is not None:
                    records.bodies[doc["sha256"]] = body.encode("utf-8")
                elif "body_b64" in doc:
                    records.bodies[doc["sha256"]] = base64.b64decode(doc["body_b64"])
                records.copies.append(doc)
        except (KeyError, TypeError, ValueError, binascii.Error) as exc:
            problems.append(Problem(name, number, f"malformed line ({exc!r})"))


def _decision(
    name: str,
    number: int,
    doc: dict[str, Any],
    header: dict[str, Any],
    declared: dict[str, dict[int, dict[str, Any]]],
    records: Records,
) -> None:
    context = declared["x"].get(int(doc["x"])) if "x" in doc else None
    if "x" in doc and context is None:
        records.problems.append(Problem(name, number, f"refers to x={doc['x']}, never declared"))
        return
    copy = declared["c"].get(int(context["c"])) if context is not None and "c" in context else None
    if context is not None and "c" in context and copy is None:
        records.problems.append(
            Problem(name, number, f"refers to c={context['c']}, never declared")
        )
        return
    url = doc.get("u")
    deciding = copy if copy is not None else context
    origin = "" if deciding is None else deciding["o"]
    if isinstance(url, str) and url.startswith("/"):
        url = origin + url  # (a path: of the origin that decided it)
    elif isinstance(url, str):
        origin = origin or doc.get("o") or origin_of(url) or ""
    else:
        url = "(unknown URL)"
        origin = doc.get("o") or ""
    if "p" in doc:
        doc = {**doc, "usage": declared["p"].get(int(doc["p"]))}
    doc["_max_size"] = header.get("max_size")
    at = float(header["start"]) + float(doc["t"])
    records.decisions.append(
        Decision(name, number, doc["v"], at, str(url), origin, doc, context, copy)
    )


# -- verify ------------------------------------------------------------------------------


def run_verify(paths: list[Path], out: IO[str]) -> int:
    """Re-decide each recorded decision from its recorded copy; print each mismatch."""
    records = read_records(paths)
    records.print_problems(out)
    parsed: dict[tuple[str, int], RobotsTxt] = {}
    reproduced = mismatched = 0
    not_redecided: Counter[str] = Counter()
    for decision in records.decisions:
        verdict = decision.verdict
        try:
            if verdict in (ALLOWED, FORBIDDEN):
                problem = _redecide(decision, records, parsed)
            elif verdict == USAGE_REFUSED and decision.doc.get("by") == "robots":
                problem = _redecide_usage(decision, records, parsed)
            else:
                not_redecided[_NOT_REDECIDED.get(verdict, str(verdict))] += 1
                continue
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            # a hand-made or damaged line that reads as JSON but lacks what it needs
            problem = f"cannot be re-decided: a field is missing or malformed ({exc!r})"
        if problem is None:
            reproduced += 1
        else:
            mismatched += 1
            print(f"MISMATCH {decision.path}:{decision.line}: {decision.url}: {problem}", file=out)
    others = ", ".join(f"{n} {what}" for what, n in sorted(not_redecided.items()))
    print(
        f"verify: {len(paths)} file(s), {len(records.headers)} run(s), "
        f"{records.copy_count} robots.txt copies; "
        f"{reproduced + mismatched} decision(s) re-decided: {reproduced} reproduced, "
        f"{mismatched} mismatched" + (f"; not re-decidable: {others}" if others else ""),
        file=out,
    )
    fatal = any(problem.fatal for problem in records.problems)
    return EXIT_MISMATCH if mismatched or fatal else EXIT_OK


_NOT_REDECIDED = {
    RELEASED: "releases after a wait",
    DROPPED_AT_CLOSE: "dropped at close",
    PAGE: "page directives",
    USAGE_REFUSED: "usage refused by a response header",
}


def _robots(
    decision: Decision, records: Records, parsed: dict[tuple[str, int], RobotsTxt]
) -> RobotsTxt | str:
    assert decision.copy is not None
    digest = decision.copy["sha256"]
    body = records.bodies.get(digest)
    if body is None:
        return f"its copy's body (sha256 {digest[:12]}...) is in none of the files given"
    max_size = decision.doc.get("_max_size") or DEFAULT_MAX_SIZE
    if (digest, max_size) not in parsed:
        parsed[digest, max_size] = RobotsTxt.parse(body, max_size=max_size)
    return parsed[digest, max_size]


def _redecide(
    decision: Decision, records: Records, parsed: dict[tuple[str, int], RobotsTxt]
) -> str | None:
    context = decision.context
    if context is None:
        return "no context (x) to re-decide from"
    recorded = decision.verdict == ALLOWED
    said = f"recorded {'allowed' if recorded else 'forbidden'}"
    state = decision.copy["state"] if decision.copy is not None else context.get("state")
    why = context.get("why")
    if state in (STATE_FALLBACK, STATE_UNREACHABLE, STATE_ALLOW_ALL):
        expected = why != "fallback-disallow"
        if expected != recorded:
            return f"{said} with state {state} ({why}), which {'allows' if expected else 'forbids'}"
        return None
    robots = _robots(decision, records, parsed)
    if isinstance(robots, str):
        return robots
    again = robots.explain(decision.url, context["k"])
    if again.allowed != recorded or again.line != context.get("l"):
        where = _by(context.get("l"), context.get("r"), why)
        now = _by(again.line, again.rule, again.reason)
        return f"{said}{where}; re-decided {'allowed' if again.allowed else 'forbidden'}{now}"
    return None


def _by(line: int | None, rule: str | None, reason: str | None) -> str:
    return f" by line {line}: {rule}" if line is not None else f" ({reason})"


def _redecide_usage(
    decision: Decision, records: Records, parsed: dict[tuple[str, int], RobotsTxt]
) -> str | None:
    if decision.context is None or decision.copy is None:
        return "a usage refusal by robots.txt without the decision it followed"
    robots = _robots(decision, records, parsed)
    if isinstance(robots, str):
        return robots
    refused = list(decision.doc.get("refused") or [])
    again = robots.usage(decision.url, decision.context["k"]).refused(refused)
    if sorted(again) != sorted(refused):
        return f"recorded usage refused for {refused}; re-decided refused for {again}"
    return None


# -- report ------------------------------------------------------------------------------


@dataclass
class _Origin:
    states: Counter[str] = field(default_factory=Counter)
    copies: set[str] = field(default_factory=set)
    counts: Counter[str] = field(default_factory=Counter)


def render_report(records: Records, sources: list[str]) -> str:
    origins: dict[str, _Origin] = {}
    totals: Counter[str] = Counter()
    forbidden: list[Decision] = []
    pages: dict[str, Counter[str]] = {}  # origin -> its P lines' breakdown (_page_table)
    only_rel, by_page, by_rel, items = _PAGE_DROPS
    for decision in records.decisions:
        entry = origins.setdefault(decision.origin or "(unknown)", _Origin())
        if decision.verdict == PAGE:
            doc, counts = decision.doc, pages.setdefault(decision.origin or "(unknown)", Counter())
            directives = doc.get("d") or {}
            counts.update(["pages", *directives])
            # a nofollow (or none) page drops every link; another page its rel=nofollow ones
            by = by_page if "nofollow" in directives or "none" in directives else by_rel
            counts.update({only_rel: not directives, by: doc.get("dr", 0), items: doc.get("di", 0)})
        entry.counts[decision.verdict] += 1
        totals[decision.verdict] += 1
        if decision.copy is not None:
            entry.copies.add(decision.copy["sha256"])
            entry.states[decision.copy["state"]] += 1
        elif decision.context is not None:
            entry.states[decision.context.get("state", "?")] += 1
        elif decision.verdict == DROPPED_AT_CLOSE:
            entry.states["still waiting at close"] += 1
        if decision.verdict == FORBIDDEN:
            forbidden.append(decision)
    e = html.escape
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<title>scrapy-rep compliance report</title><style>",
        _CSS,
        "</style></head><body>",
        "<h1>Compliance report</h1>",
        f"<p class='meta'>{len(sources)} record file(s): {e(', '.join(sources))}</p>",
    ]
    if records.headers:
        runs = ", ".join(
            f"{e(str(h.get('spider')))} (pid {h.get('pid')}, {when(float(h['start']))}, "
            f"scrapy-rep {e(str(h.get('rep')))}"
            f"{'' if h.get('enforce', True) else ', audit mode'})"
            for h in records.headers
        )
        parts.append(f"<p class='meta'>Runs: {runs}</p>")
    parts.extend(f"<p class='problem'>{e(str(problem))}</p>" for problem in records.problems)
    parts.append("<h2>Totals</h2><div class='totals'>")
    parts.extend(
        f"<div class='total {css}'><b>{totals[verdict]}</b>{e(label)}</div>"
        for verdict, (label, css, _) in _COLUMNS.items()
    )
    parts.append(
        f"<div class='total'><b>{len(origins)}</b>origins</div>"
        f"<div class='total'><b>{records.copy_count}</b>robots.txt copies</div></div>"
        f"<h2>Decisions over time</h2>{_timeline(records.decisions)}"
    )
    parts.append("<h2>Origins</h2><table><thead><tr><th>origin</th><th>state</th><th>copies</th>")
    parts.extend(f"<th>{e(label)}</th>" for label, _, _ in _COLUMNS.values())
    parts.append("</tr></thead><tbody>")
    for name, entry in sorted(origins.items(), key=lambda item: -sum(item[1].counts.values())):
        states = ", ".join(f"{e(s)}" for s, _ in entry.states.most_common()) or "-"
        parts.append(
            f"<tr><td>{e(name)}</td><td>{states}</td><td class='n'>{len(entry.copies)}</td>"
        )
        parts.extend(f"<td class='n'>{entry.counts[verdict]}</td>" for verdict in _COLUMNS)
        parts.append("</tr>")
    parts.append(f"</tbody></table><h2>Forbidden URLs ({len(forbidden)})</h2>")
    if forbidden:
        parts.append(
            "<table><thead><tr><th>time</th><th>URL</th><th>product token</th>"
            "<th>deciding line</th><th>group</th></tr></thead><tbody>"
        )
        for decision in forbidden[:MAX_LISTED]:
            context = decision.context or {}
            line = context.get("l")
            rule = (
                f"line {line}: <code>{e(str(context.get('r')))}</code>"
                if line is not None
                else e(str(context.get("why", "")))
            )
            parts.append(
                f"<tr><td>{when(decision.time)}</td><td class='url'>{e(decision.url)}</td>"
                f"<td>{e(str(context.get('k', '')))}</td><td>{rule}</td>"
                f"<td>{e(', '.join(context.get('g') or []))}</td></tr>"
            )
        parts.append("</tbody></table>")
        if len(forbidden) > MAX_LISTED:
            parts.append(f"<p>... and {len(forbidden) - MAX_LISTED} more.</p>")
    else:
        parts.append("<p>None.</p>")
    if pages:
        modes = ", ".join(sorted({str(h.get("page_mode")) for h in records.headers}))
        parts.append(_page_table(pages, modes))
    parts.append(
        "<p class='meta'>Made by <code>scrapy robots report</code>; check every decision "
        "against its recorded copy with <code>scrapy robots verify</code>.</p></body></html>"
    )
    return "".join(parts)


# verdict -> (label, CSS class, colour), in the order of the report's columns
_COLUMNS = {
    ALLOWED: ("allowed", "allowed", "#2e7d32"),
    FORBIDDEN: ("forbidden", "forbidden", "#c62828"),
    RELEASED: ("waited", "waited", "#f9a825"),
    DROPPED_AT_CLOSE: ("dropped at close", "dropped", "#6d4c41"),
    USAGE_REFUSED: ("usage refused", "usage", "#6a1b9a"),
    PAGE: ("page directives", "page", "#1565c0"),
}
# what a page's line dropped (in audit mode: what enforce would have dropped), by cause
_PAGE_DROPS = (
    "rel=nofollow links only",  # pages with no directive: a line for their rel links
    "requests dropped: nofollow page",
    "requests dropped: rel=nofollow links",
    "items dropped",  # (noindex, none, or an unavailable_after date passed)
)


def _page_table(pages: dict[str, Counter[str]], modes: str) -> str:
    """The page directives' lines per origin: pages by directive, then the drops."""
    e = html.escape
    named = sorted({key for counts in pages.values() for key in counts} - {"pages", *_PAGE_DROPS})
    columns = ["pages", *named, *_PAGE_DROPS]
    parts = [
        f"<h2>Page directives</h2><p class='meta'>page_mode: {e(modes)}; in audit mode the "
        "drops are what enforce would have dropped.</p><table><thead><tr><th>origin</th>",
        *(f"<th>{e(column)}</th>" for column in columns),
        "</tr></thead><tbody>",
    ]
    for origin, counts in sorted(pages.items(), key=lambda item: -item[1]["pages"]):
        parts.append(f"<tr><td>{e(origin)}</td>")
        parts.extend(f"<td class='n'>{counts[column]}</td>" for column in columns)
        parts.append("</tr>")
    return "".join(parts) + "</tbody></table>"


_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:72em;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
.meta{color:#555}.problem{color:#b71c1c}
.totals{display:flex;flex-wrap:wrap;gap:.6em}
.total{border:1px solid #ccc;border-radius:6px;padding:.4em .9em;min-width:7em}
.total b{display:block;font-size:1.5em}
.allowed b{color:#2e7d32}.forbidden b{color:#c62828}.waited b{color:#f9a825}
.dropped b{color:#6d4c41}.usage b{color:#6a1b9a}.page b{color:#1565c0}
table{border-collapse:collapse;width:100%}th,td{border-bottom:1px solid #eee;padding:.25em .5em;
text-align:left;vertical-align:top}th{background:#f5f5f5}td.n{text-align:right}
td.url{word-break:break-all}code{background:#f5f5f5;padding:0 .2em}
svg text{font:11px system-ui,sans-serif;fill:#444}
.legend span{margin-right:1.2em}.legend i{display:inline-block;width:.8em;height:.8em;
margin-right:.3em;vertical-align:-.05em}
"""


def _timeline(decisions: list[Decision]) -> str:
    """A stacked bar chart (inline SVG): decisions per time bucket, by verdict."""
    if not decisions:
        return "<p>No decisions.</p>"
    first = min(d.time for d in decisions)
    last = max(d.time for d in decisions)
    buckets = 60
    span = max(last - first, 1e-3)
    counts = [Counter[str]() for _ in range(buckets)]
    for decision in decisions:
        index = min(int((decision.time - first) / span * buckets), buckets - 1)
        counts[index][decision.verdict] += 1
    peak = max(sum(c.values()) for c in counts) or 1
    width, height, left, bottom = 900, 220, 50, 30
    bar = (width - left - 10) / buckets
    plot = height - bottom - 10
    out = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='100%' viewBox='0 0 {width} {height}' "
        "role='img' aria-label='decisions over time'>",
        f"<line x1='{left}' y1='{height - bottom}' x2='{width - 10}' y2='{height - bottom}' "
        "stroke='#888'/>",
        f"<text x='{left - 6}' y='14' text-anchor='end'>{peak}</text>",
        f"<text x='{left - 6}' y='{height - bottom}' text-anchor='end'>0</text>",
        f"<text x='{left}' y='{height - 8}'>{html.escape(when(first))}</text>",
        f"<text x='{width - 10}' y='{height - 8}' text-anchor='end'>+{span:.1f} s</text>",
    ]
    for index, count in enumerate(counts):
        y = float(height - bottom)
        for verdict, (label, _, colour) in _COLUMNS.items():
            n = count[verdict]
            if not n:
                continue
            h = n / peak * plot
            y -= h
            out.append(
                f"<rect x='{left + index * bar:.1f}' y='{y:.1f}' width='{max(bar - 1, 1):.1f}' "
                f"height='{h:.1f}' fill='{colour}'><title>{n} {html.escape(label)}</title></rect>"
            )
    out.append("</svg><p class='legend'>")
    out.extend(
        f"<span><i style='background:{colour}'></i>{html.escape(label)}</span>"
        for label, _, colour in _COLUMNS.values()
    )
    out.append("</p>")
    return "".join(out)


def run_report(paths: list[Path], output: str | None, out: IO[str]) -> int:
    if not output:
        print("error: give the report's file with -o report.html", file=out)
        return EXIT_USAGE
    records = read_records(paths)
    records.print_problems(out)
    page = render_report(records, [str(p) for p in paths])
    try:
        Path(output).write_text(page, encoding="utf-8")
    except OSError as exc:
        print(f"error: cannot write {output}: {exc.strerror or exc}", file=out)
        return EXIT_USAGE
    print(
        f"report: {len(records.decisions)} decision(s) from {len(paths)} file(s) -> {output}",
        file=out,
    )
    return EXIT_OK


def run_record_tool(tool: str, files: list[str], output: str | None) -> int:
    """``scrapy robots verify|report FILE...``: the exit status."""
    out = sys.stdout
    if not files:
        print(f"error: scrapy robots {tool} needs at least one record file", file=out)
        return EXIT_USAGE
    paths = [Path(name) for name in files]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"error: no such file: {', '.join(missing)}", file=out)
        return EXIT_USAGE
    if tool == "verify":
        return run_verify(paths, out)
    return run_report(paths, output, out)
