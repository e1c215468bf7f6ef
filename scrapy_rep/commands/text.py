"""``scrapy robots``'s report as text, for people (output.py holds the data and JSON)."""

from __future__ import annotations

import time
from typing import Any

from scrapy_rep.commands.output import (
    ALLOWED,
    COPY_FALLBACK,
    COPY_STORED,
    DISALLOWED,
    HOLD,
    WAIT,
    OriginReport,
    Report,
    StoredState,
    Verdict,
    issue_lines,
)


def when(timestamp: float | None) -> str:
    if timestamp is None:
        return "never"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(timestamp))


def duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86_400.0), ("h", 3_600.0), ("min", 60.0)):
        if seconds >= size:
            value = seconds / size
            return f"{value:.0f} {unit}" if value == round(value) else f"{value:.1f} {unit}"
    return f"{seconds:.0f} s" if seconds == round(seconds) else f"{seconds:.1f} s"


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
    if report.action == HOLD:
        assert report.wait_until is not None
        if report.after_wait_copy == COPY_STORED:
            then = "the last good copy (stored, fetched " + when(report.copy_fetched_at) + ")"
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
        return (
            f"unreachable for longer than REP_UNREACHABLE_WAIT: a crawl applies the last good "
            f"copy (stored, fetched {when(report.copy_fetched_at)})"
        )
    if report.copy == COPY_FALLBACK:
        return (
            "unreachable for longer than REP_UNREACHABLE_WAIT and no usable copy: a crawl "
            f"applies the fallback ({_kind_text(report.kind)})"
        )
    return None


def _signals_text(signals: dict[str, bool]) -> str:
    return ", ".join(f"{key}={'yes' if value else 'no'}" for key, value in signals.items())


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


def render_text(report: Report) -> str:
    lines: list[str] = []
    label = "robots.txt file" if report.source == "file" else "origin"
    for origin in report.origins:
        lines.append(f"{label} {origin.origin}  (product token: {report.token})")
        if origin.fetch is not None:
            lines.append(f"  robots.txt: {_fetch_line(origin)}")
            final = origin.fetch.final_url
            if final is not None and final != origin.robots_url:
                lines.append(f"  redirected to: {final}")
        if origin.truncated:
            lines.append(f"  truncated at {origin.max_size} bytes")
        crawl = _crawl_line(origin)
        if crawl is not None:
            lines.append(f"  now: {crawl}")
        if origin.stored is not None:
            lines.append(
                f"  stored ({origin.stored.store}): {_stored_line(origin.stored, report.now)}"
            )
            if origin.refreshed:
                lines.append("  refreshed: the fetched copy is now in the store")
            elif origin.stored_differs:
                lines.append(
                    "  note: the fetched copy differs from the stored one, which a crawl "
                    "applies; --refresh stores the fetched copy, --forget ORIGIN clears it"
                )
        rules_now = origin.action != HOLD and origin.kind == "rules"
        rules_later = origin.action == HOLD and origin.after_wait_kind == "rules"
        context = ""
        if origin.copy_fetched_at is not None:
            context = " (last good copy)" if origin.source != "fresh" else " (stored copy)"
        if rules_now or rules_later or report.source == "file":
            lines.append(f"  group{context}: {origin.group or 'none'}")
            if origin.crawl_delay is not None:
                lines.append(f"  crawl-delay: {duration(origin.crawl_delay)}")
            if origin.request_rate is not None:
                count, seconds = origin.request_rate
                lines.append(f"  request-rate: {count} per {duration(seconds)}")
            if origin.content_signals:
                lines.append(f"  content signals: {_signals_text(origin.content_signals)}")
            for sitemap in origin.sitemaps:
                lines.append(f"  sitemap: {sitemap}")
            lines.extend(issue_lines(origin))
        for result in origin.urls:
            verdict = result.now
            if verdict.verdict == WAIT:
                why = "robots.txt unreachable"
                if result.after_wait is not None:
                    why += f"; after the wait: {result.after_wait.verdict}"
                    why += f" ({_verdict_text(result.after_wait)})"
            else:
                why = _verdict_text(verdict)
            if result.fresh is not None:
                why += (
                    f"; fresh copy: {result.fresh.verdict.upper()} ({_verdict_text(result.fresh)})"
                )
            lines.append(f"  {verdict.verdict.upper():<10}  {result.url}  {why}")
            declared = None if result.usage is None else usage_text(result.usage)
            if declared:
                lines.append(f"              usage: {declared}")
        lines.append("")
    counts = {name: 0 for name in (ALLOWED, DISALLOWED, WAIT)}
    for result in report.urls:
        counts[result.now.verdict] += 1
    lines.append(
        f"{len(report.urls)} URL(s): {counts[ALLOWED]} allowed, {counts[DISALLOWED]} "
        f"disallowed, {counts[WAIT]} waiting (exit status {report.exit_status})"
    )
    return "\n".join(lines)
