"""What ``scrapy robots`` found, and how it is printed (text for people, JSON for scripts).

The JSON keys are a documented interface (docs/command.md, "--json"): add keys if
needed, never rename or remove one. ``reason`` and ``source`` use the slugs of the
crawl's ``robotstxt_decision`` meta (crawl/decide.py).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy_rep.policy.records import OriginRecord
    from scrapy_rep.policy.robots_policy import FetchOutcome
    from scrapy_rep.robotstxt import RobotsTxt

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
        return {
            "verdict": self.verdict,
            "line": self.line,
            "rule": self.rule,
            "group": self.group,
            "reason": self.reason,
            "source": self.source,
        }


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
        record = self.record
        if record is None:
            return "none"
        if record.unreachable:
            return "unreachable"
        if record.kind is None:
            return "none"
        return "fresh" if now < record.expires_at else "expired"

    def to_json(self, now: float) -> dict[str, Any]:
        record = self.record
        doc: dict[str, Any] = {"store": self.store, "state": self.state(now), "note": self.note}
        if record is None:
            doc.update(
                kind=None,
                fetched_at=None,
                expires_at=None,
                unreachable_since=None,
                next_retry_at=None,
                failures=0,
                last_outcome=None,
            )
            return doc
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
    # what the parser did not take as written (see record_issues)
    issues: list[dict[str, Any]] = field(default_factory=list)
    issue_counts: dict[str, int] = field(default_factory=dict)

    def fetch_json(self) -> dict[str, Any] | None:
        outcome = self.fetch
        if outcome is None:
            return None
        return {
            "outcome": outcome.kind,
            "detail": outcome.detail,
            "status": outcome.status,
            "final_url": outcome.final_url,
            "redirected": outcome.final_url is not None and outcome.final_url != self.robots_url,
            "truncated": outcome.truncated,
            "bytes": len(outcome.body),
            "max_age": outcome.max_age,
            "retry_after": outcome.retry_after,
            "retry_in": self.retry_in,
        }

    def to_json(self, now: float) -> dict[str, Any]:
        rate = self.request_rate
        return {
            "origin": self.origin,
            "robots_url": self.robots_url,
            "fetch": self.fetch_json(),
            "crawl": {
                "action": self.action,
                "copy": self.copy if self.action == DECIDE else None,
                "kind": self.kind if self.action == DECIDE else None,
                "source": self.source if self.action == DECIDE else None,
                "uses_stored": self.uses_stored,
                "copy_fetched_at": iso(self.copy_fetched_at),
                "copy_expires_at": iso(self.copy_expires_at),
                "wait_until": iso(self.wait_until),
                "after_wait": (
                    None
                    if self.action == DECIDE
                    else {"copy": self.after_wait_copy, "kind": self.after_wait_kind}
                ),
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


# -- formatting helpers ---------------------------------------------------------------


def iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))


# -- issues of a parsed file (the parser's report, like Google's robots.txt report) --

TEXT_ISSUES = 20  # issue lines printed as text; --json lists all the parser keeps
MAX_ISSUES = 1000  # (scrapy_rep.robotstxt.MAX_ISSUES)


def record_issues(report: OriginReport, robots: RobotsTxt) -> None:
    """Copy the issues of *robots* (the copy that decides) into *report*."""
    report.issues = [issue.as_dict() for issue in robots.issues]
    report.issue_counts = dict(robots.issue_counts)


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


def render_json(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2, ensure_ascii=False)
