"""What ``scrapy robots`` found, printed as text for people or JSON for scripts.

The JSON keys are a documented interface (docs/command.md, "--json"): add keys if
needed, never rename or remove one. ``reason`` and ``source`` use the slugs of the
crawl's ``robotstxt_decision`` meta (crawl/decide.py).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from scrapy_rep.policy.records import OriginRecord
from scrapy_rep.robotstxt import MAX_ISSUES

if TYPE_CHECKING:
    from scrapy_rep.policy.robots_policy import FetchOutcome
    from scrapy_rep.robotstxt._page import PageDirectives

# Per-URL verdicts.
ALLOWED = "allowed"
DISALLOWED = "disallowed"
WAIT = "wait"  # the origin's robots.txt is unreachable: a crawl would hold the request

# What a crawl would do with an origin's requests right now.
DECIDE = "decide"
HOLD = "wait"

# Where the copy that decides comes from.
COPY_FETCHED = "fetched"  # fetched by this run
COPY_STORED = "stored"  # from the store: still fresh, or the last good copy after the wait
COPY_FALLBACK = "fallback"  # REP_UNREACHABLE_FALLBACK, no usable copy
COPY_FILE = "file"
SOURCE_FILE = "file"  # the ``source`` slug of a --file verdict

# Exit statuses (also in --help and the docs).
EXIT_ALLOWED = 0
EXIT_DISALLOWED = 1
EXIT_USAGE = 2  # Scrapy's own status for a UsageError
EXIT_WAITING = 3


@dataclass(frozen=True, slots=True)
class Verdict:
    verdict: str  # ALLOWED or DISALLOWED (WAIT only on UrlResult)
    line: int | None = None
    rule: str | None = None
    group: str | None = None
    reason: str = ""
    source: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class UrlResult:
    url: str
    origin: str | None
    now: Verdict  # verdict WAIT while the origin is unreachable
    after_wait: Verdict | None = None  # only with WAIT: what applies once the wait ends
    fresh: Verdict | None = None  # the fresh copy's verdict, when it differs from ``now``
    # robots.txt usage preferences (RobotsTxt.usage(...).to_json()); None: no rules apply
    usage: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"url": self.url, "origin": self.origin}
        doc.update(self.now.to_json())
        doc["after_wait"] = None if self.after_wait is None else self.after_wait.to_json()
        doc["fresh"] = None if self.fresh is None else self.fresh.to_json()
        doc["usage"] = self.usage
        return doc


@dataclass(frozen=True, slots=True)
class StoredState:
    """What the configured store holds for one origin (read, never written)."""

    store: str  # description of the store
    record: OriginRecord | None = None
    note: str = ""  # why there is no record, or a read error

    def state(self, now: float) -> str:
        record = self.record or OriginRecord()  # none: shown as an empty record
        if record.unreachable:
            return "unreachable"
        if record.kind is None:
            return "none"
        return "fresh" if now < record.expires_at else "expired"

    def to_json(self, now: float) -> dict[str, Any]:
        record = self.record or OriginRecord()
        doc: dict[str, Any] = {"store": self.store, "state": self.state(now), "note": self.note}
        doc.update(
            kind=record.kind,
            fetched_at=iso(record.fetched_at),
            expires_at=iso(record.expires_at) if record.kind is not None else None,
            unreachable_since=iso(record.unreachable_since),
            next_retry_at=iso(record.next_retry_at),
            failures=record.failures,
            last_outcome=record.last_outcome or None,
        )
        return doc


@dataclass(slots=True)
class OriginReport:
    origin: str  # for --file: the file's path
    robots_url: str | None  # None for --file
    fetch: FetchOutcome | None = None  # None for --file
    retry_in: float | None = None  # unreachable: seconds until a crawl refetches
    action: str = DECIDE  # DECIDE or HOLD
    copy: str = COPY_FETCHED
    kind: str | None = None  # RULES, ALLOW_ALL or DISALLOW_ALL of the copy that decides
    source: str = ""  # the decision's source slug (fresh, expired, stale, fallback, file)
    copy_fetched_at: float | None = None  # COPY_STORED: when that copy was fetched
    copy_expires_at: float | None = None  # a stored copy still fresh: when it expires
    wait_until: float | None = None  # HOLD: when the wait ends
    unreachable_wait: float = 0.0  # REP_UNREACHABLE_WAIT
    after_wait_copy: str | None = None  # HOLD: COPY_STORED or COPY_FALLBACK
    after_wait_kind: str | None = None
    after_wait_source: str | None = None
    stored: StoredState | None = None
    uses_stored: bool = False  # a crawl would act on the stored record, without fetching
    stored_differs: bool = False  # ... and the fetched copy differs from it
    refreshed: bool = False  # --refresh wrote the fetched copy to the store
    parsed_bytes: int = 0
    truncated: bool = False
    max_size: int = 0
    group: str | None = None
    crawl_delay: float | None = None
    request_rate: tuple[int, float] | None = None
    content_signals: dict[str, bool] = field(default_factory=dict)
    sitemaps: list[str] = field(default_factory=list)
    urls: list[UrlResult] = field(default_factory=list)
    # what the parser did not take as written (filled in by parse_copy)
    issues: list[dict[str, Any]] = field(default_factory=list)
    issue_counts: dict[str, int] = field(default_factory=dict)

    def to_json(self, now: float) -> dict[str, Any]:
        rate, outcome = self.request_rate, self.fetch
        deciding = self.action == DECIDE
        after_wait = {"copy": self.after_wait_copy, "kind": self.after_wait_kind}
        fetch = None
        if outcome is not None:
            fetch = {
                "outcome": outcome.kind,
                "detail": outcome.detail,
                "status": outcome.status,
                "final_url": outcome.final_url,
                "redirected": outcome.final_url not in (None, self.robots_url),
                "truncated": outcome.truncated,
                "bytes": len(outcome.body),
                "max_age": outcome.max_age,
                "retry_after": outcome.retry_after,
                "retry_in": self.retry_in,
            }
        return {
            "origin": self.origin,
            "robots_url": self.robots_url,
            "fetch": fetch,
            "crawl": {
                "action": self.action,
                "copy": self.copy if deciding else None,
                "kind": self.kind if deciding else None,
                "source": self.source if deciding else None,
                "uses_stored": self.uses_stored,
                "copy_fetched_at": iso(self.copy_fetched_at),
                "copy_expires_at": iso(self.copy_expires_at),
                "wait_until": iso(self.wait_until),
                "after_wait": None if deciding else after_wait,
            },
            "stored": None if self.stored is None else self.stored.to_json(now),
            "stored_differs": self.stored_differs,
            "refreshed": self.refreshed,
            "truncated": self.truncated,
            "parsed_bytes": self.parsed_bytes,
            "group": self.group,
            "crawl_delay": self.crawl_delay,
            "request_rate": None if rate is None else {"requests": rate[0], "seconds": rate[1]},
            "content_signals": dict(self.content_signals),
            "sitemaps": list(self.sitemaps),
            "issues": {"counts": dict(self.issue_counts), "lines": list(self.issues)},
        }


@dataclass(slots=True)
class Report:
    token: str
    source: str  # "fetch" or "file"
    origins: list[OriginReport]
    urls: list[UrlResult]  # in command-line order
    now: float = field(default_factory=time.time)

    @property
    def exit_status(self) -> int:
        verdicts = {result.now.verdict for result in self.urls}
        if DISALLOWED in verdicts:
            return EXIT_DISALLOWED
        if WAIT in verdicts:
            # Neither yes nor no yet: a crawl would hold these requests.
            return EXIT_WAITING
        return EXIT_ALLOWED

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "product_token": self.token,
            "source": self.source,
            "checked_at": iso(self.now),
            "exit_status": self.exit_status,
            "origins": [origin.to_json(self.now) for origin in self.origins],
            "urls": [result.to_json() for result in self.urls],
        }


def iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))


def when(timestamp: float | None) -> str:
    if timestamp is None:
        return "never"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(timestamp))


# -- issues of a parsed file (the parser's report, like Google's robots.txt report) --

TEXT_ISSUES = 20  # issue lines printed as text; --json lists all the parser keeps


def issue_lines(origin: OriginReport) -> list[str]:
    """The text report's lines for the issues of *origin*'s copy (none: no lines)."""
    if not origin.issue_counts:
        return []
    total = sum(origin.issue_counts.values())
    kinds = ", ".join(f"{kind} {count}" for kind, count in origin.issue_counts.items())
    found = [f"  issues: {total} ({kinds})"]
    for issue in origin.issues[:TEXT_ISSUES]:
        where = f"line {issue['line']}"
        if "offset" in issue:
            where = f"byte {issue['offset']} ({where})"
        found.append(f"    {where}: {issue['kind']}: {issue['text']}")
    if total > TEXT_ISSUES:
        shown = min(TEXT_ISSUES, len(origin.issues))
        found.append(f"    ... and {total - shown} more (--json lists up to {MAX_ISSUES})")
    return found


# -- the report as text ----------------------------------------------------------------


def duration(seconds: float) -> str:
    value, unit = max(0.0, seconds), "s"
    for name, size in (("d", 86_400.0), ("h", 3_600.0), ("min", 60.0)):
        if value >= size:
            value, unit = value / size, name
            break
    return f"{value:.0f} {unit}" if value == round(value) else f"{value:.1f} {unit}"


def _kind_text(kind: str | None) -> str:
    return {"rules": "its rules", "allow-all": "allow all", "disallow-all": "disallow all"}.get(
        kind or "", str(kind)
    )


def _fetch_line(report: OriginReport) -> str:
    outcome = report.fetch
    assert outcome is not None
    # Exception texts end with a full stop ("Connection refused."); the line goes on.
    text = f"{outcome.kind}: {outcome.detail.rstrip('.')}"
    if outcome.kind == "rules":
        text += f", {len(outcome.body)} bytes"
    if outcome.kind == "unreachable" and report.retry_in is not None:
        text += f"; next try in {duration(report.retry_in)}"
    return text


def _stored_line(stored: StoredState, now: float) -> str:
    record = stored.record
    state = stored.state(now)
    if record is None or state == "none":
        return f"no stored state{f' ({stored.note})' if stored.note else ''}"
    parts: list[str] = []
    if record.unreachable:
        parts.append(f"unreachable since {when(record.unreachable_since)}")
        parts.append(f"{record.failures} failed fetch(es), next retry {when(record.next_retry_at)}")
        if record.kind is not None:
            parts.append(f"last good copy ({record.kind}) fetched {when(record.fetched_at)}")
    else:
        verb = "expires" if state == "fresh" else "expired"
        parts.append(f"{state} ({record.kind})")
        parts.append(f"fetched {when(record.fetched_at)}")
        parts.append(f"{verb} {when(record.expires_at)}")
    if record.last_outcome:
        parts.append(f"last outcome {record.last_outcome}")
    return "; ".join(parts)


def _verdict_text(verdict: Verdict) -> str:
    if verdict.rule is not None:
        return f"line {verdict.line}: {verdict.rule}"
    return {
        "no-matching-rule": "no rule matches",
        "no-matching-group": "no group applies",
        "robots.txt-always-allowed": "/robots.txt is always allowed",
        "allow-all": "robots.txt allows all",
        "fallback-allow": "unreachable too long: fallback allows all",
        "fallback-disallow": "unreachable too long: fallback disallows all",
        "unreachable": "robots.txt unreachable",
    }.get(verdict.reason, verdict.reason)


def _crawl_line(report: OriginReport) -> str | None:
    last_good = f"the last good copy (stored, fetched {when(report.copy_fetched_at)})"
    if report.action == HOLD:
        assert report.wait_until is not None
        if report.after_wait_copy == COPY_STORED:
            then = last_good
        else:
            then = f"the fallback ({_kind_text(report.after_wait_kind)})"
        retry = "" if report.retry_in is None else f"; next try in {duration(report.retry_in)}"
        return (
            f"a crawl would hold this origin's requests{retry}; from {when(report.wait_until)} "
            f"(REP_UNREACHABLE_WAIT {duration(report.unreachable_wait)}) {then} applies"
        )
    if report.copy == COPY_STORED and report.source != "stale":
        until = "" if report.copy_expires_at is None else f" until {when(report.copy_expires_at)}"
        return (
            f"a crawl with this store applies the stored copy (fetched "
            f"{when(report.copy_fetched_at)}){until} and does not fetch robots.txt before"
        )
    if report.copy == COPY_STORED:
        return f"unreachable for longer than REP_UNREACHABLE_WAIT: a crawl applies {last_good}"
    if report.copy == COPY_FALLBACK:
        return (
            "unreachable for longer than REP_UNREACHABLE_WAIT and no usable copy: a crawl "
            f"applies the fallback ({_kind_text(report.kind)})"
        )
    return None


def usage_text(usage: dict[str, Any]) -> str | None:
    """``train-ai=n (line 4), search=y (line 5), use=reference (line 6)``: the labels a
    site declared, or None when it declared none (most sites: nothing to print)."""
    sources = usage.get("sources") or {}
    if not sources:
        return None

    def one(label: str, value: str) -> str:
        lines = [str(s["line"]) for s in sources.get(label, ()) if s.get("line") is not None]
        where = f" (line{'s' if len(lines) > 1 else ''} {', '.join(lines)})" if lines else ""
        return f"{label}={value}{where}"

    parts = [one(label, value) for label, value in usage["preferences"].items() if label in sources]
    if usage.get("use") is not None and "use" in sources:
        parts.append(one("use", usage["use"]))
    return ", ".join(parts)


def render_json(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2, ensure_ascii=False)


def render_text(report: Report) -> str:
    lines: list[str] = []
    label = "robots.txt file" if report.source == "file" else "origin"
    for origin in report.origins:
        lines.append(f"{label} {origin.origin}  (product token: {report.token})")
        if origin.fetch is not None:
            lines.append(f"  robots.txt: {_fetch_line(origin)}")
            if origin.fetch.final_url not in (None, origin.robots_url):
                lines.append(f"  redirected to: {origin.fetch.final_url}")
        if origin.truncated:
            lines.append(f"  truncated at {origin.max_size} bytes")
        if (crawl := _crawl_line(origin)) is not None:
            lines.append(f"  now: {crawl}")
        if (stored := origin.stored) is not None:
            lines.append(f"  stored ({stored.store}): {_stored_line(stored, report.now)}")
            if origin.refreshed:
                lines.append("  refreshed: the fetched copy is now in the store")
            elif origin.stored_differs:
                lines.append(
                    "  note: the fetched copy differs from the stored one, which a crawl "
                    "applies; --refresh stores the fetched copy, --forget ORIGIN clears it"
                )
        deciding_kind = origin.after_wait_kind if origin.action == HOLD else origin.kind
        context = ""
        if origin.copy_fetched_at is not None:
            context = " (last good copy)" if origin.source != "fresh" else " (stored copy)"
        if deciding_kind == "rules" or report.source == "file":
            lines.append(f"  group{context}: {origin.group or 'none'}")
            if origin.crawl_delay is not None:
                lines.append(f"  crawl-delay: {duration(origin.crawl_delay)}")
            if origin.request_rate is not None:
                count, seconds = origin.request_rate
                lines.append(f"  request-rate: {count} per {duration(seconds)}")
            if origin.content_signals:
                signals = origin.content_signals.items()
                shown = ", ".join(f"{key}={'yes' if value else 'no'}" for key, value in signals)
                lines.append(f"  content signals: {shown}")
            lines.extend(f"  sitemap: {sitemap}" for sitemap in origin.sitemaps)
            lines.extend(issue_lines(origin))
        for result in origin.urls:
            verdict = result.now
            why = _verdict_text(verdict)  # WAIT: "robots.txt unreachable"
            if (later := result.after_wait) is not None:
                why += f"; after the wait: {later.verdict} ({_verdict_text(later)})"
            if (fresh := result.fresh) is not None:
                why += f"; fresh copy: {fresh.verdict.upper()} ({_verdict_text(fresh)})"
            lines.append(f"  {verdict.verdict.upper():<10}  {result.url}  {why}")
            declared = None if result.usage is None else usage_text(result.usage)
            if declared:
                lines.append(f"              usage: {declared}")
        lines.append("")
    counts = Counter(result.now.verdict for result in report.urls)
    lines.append(
        f"{len(report.urls)} URL(s): {counts[ALLOWED]} allowed, {counts[DISALLOWED]} "
        f"disallowed, {counts[WAIT]} waiting (exit status {report.exit_status})"
    )
    return "\n".join(lines)


# -- --page: page-level directives ---------------------------------------------------

MAX_LISTED_LINKS = 20  # nofollow-only links listed per page in the text output


@dataclass
class PageResult:
    """One URL given on the command line: what came back and its directives."""

    url: str
    final_url: str | None = None
    status: int | None = None
    content_type: str = ""
    error: str | None = None
    directives: PageDirectives | None = None
    rel_counts: dict[str, int] = field(default_factory=dict)
    nofollow_only: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "final_url": self.final_url,
            "status": self.status,
            "content_type": self.content_type,
            "error": self.error,
            "directives": None if self.directives is None else self.directives.to_json(),
            "rel": dict(self.rel_counts),
            "nofollow_only_links": list(self.nofollow_only),
        }


def render_page_json(token: str, results: list[PageResult]) -> str:
    doc = {"version": 1, "product_token": token, "pages": [r.to_json() for r in results]}
    return json.dumps(doc, indent=2)


def render_page_text(token: str, results: list[PageResult]) -> str:
    lines = [f"Page-level directives for product token {token!r}"]
    for result in results:
        lines.append("")
        if result.error is not None:
            lines.append(f"{result.url}  not downloaded: {result.error}")
            continue
        where = f"{result.status}, {result.content_type or 'no Content-Type'}"
        if result.final_url and result.final_url != result.url:
            where += f", redirected to {result.final_url}"
        lines.append(f"{result.url}  ({where})")
        found = result.directives
        assert found is not None
        if not found.directives:
            lines.append(f"  no directive for {token}: index, follow")
        if found.noindex:
            why = found.why("noindex")
            lines.append(f"  noindex: enforce drops the items this page yields ({why})")
        if found.nofollow:
            why = found.why("nofollow")
            lines.append(f"  nofollow: enforce drops the requests this page yields ({why})")
        for name, sources in sorted(found.directives.items()):
            value = found.values.get(name)
            shown = f"{name}: {value}" if value is not None else name
            for source in sources:
                lines.append(f"  {shown:<28} {source.describe()}")
        lines.extend(f"  ignored (for {s.scope}): {s.describe()}" for s in found.ignored)
        lines.extend(f"  issue: {issue}" for issue in found.issues)
        if result.rel_counts:
            counts = ", ".join(f"{rel} {n}" for rel, n in sorted(result.rel_counts.items()))
            lines.append(f"  rel values on links: {counts}")
        if links := result.nofollow_only:
            lines.append(f'  linked only with rel="nofollow" ({len(links)}), not followed:')
            lines.extend(f"    {url}" for url in links[:MAX_LISTED_LINKS])
            if len(links) > MAX_LISTED_LINKS:
                lines.append(f"    ... and {len(links) - MAX_LISTED_LINKS} more")
    return "\n".join(lines)
