"""The per-origin summary logged (one INFO block) when the spider closes."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy_rep.crawl.origins import OriginRuntime, SummaryTotals, state_of
from scrapy_rep.policy.records import ALLOW_ALL, RULES

if TYPE_CHECKING:
    from collections.abc import Mapping

    from scrapy.statscollectors import StatsCollector


logger = logging.getLogger(__name__)

# The block lists at most this many origins (the most eventful first); totals cover all.
MAX_LISTED_ORIGINS = 20


def _origin_line(rt: OriginRuntime) -> str:
    record = rt.record
    last = record.last_outcome if record is not None else "-"
    return (
        f"  {rt.origin}: {state_of(rt)} ({last}); fetches {rt.fetches}, forbidden {rt.dropped}, "
        f"delayed {rt.delayed}, longest delay {rt.longest_wait:.1f} s"
        + (f", dropped at close {rt.dropped_at_close}" if rt.dropped_at_close else "")
        + (f", handed back {rt.handed_back}" if rt.handed_back else "")
        + ("; stale copy used" if rt.stale_used else "")
        + (
            f"; REP_UNREACHABLE_FALLBACK applied ({rt.fallback_applied})"
            if rt.fallback_applied
            else ""
        )
    )


def log_summary(
    runtimes: list[OriginRuntime],
    evicted: SummaryTotals,
    stats: StatsCollector,
    *,
    audit: tuple[int, int] | None = None,
) -> None:
    """``audit``: (would forbid, would delay) counts when REP_ENFORCE is off."""
    totals = evicted.merged(runtimes)
    if not totals.origins:
        return
    eventful = sorted(
        runtimes,
        key=lambda rt: (
            state_of(rt) != "unreachable",
            -(rt.dropped + rt.delayed + rt.dropped_at_close),
            rt.origin,
        ),
    )[:MAX_LISTED_ORIGINS]
    # The unreachable spells of the whole crawl (recovered ones too), as the stats count
    # them: a 503 that turned 200 is "0 unreachable" at close, not never.
    spells = totals.unreachable_spells
    was_unreachable = f"{spells} time(s) (robotstxt/unreachable)" if spells else "0"
    lines = [
        f"scrapy-rep summary: {totals.origins} origin(s): {totals.states[RULES]} with rules, "
        f"{totals.states[ALLOW_ALL]} allow-all, {totals.states['unreachable']} unreachable, "
        f"{totals.states['unknown']} unknown (no answer before the spider closed); "
        f"turned unreachable during the crawl: {was_unreachable}; "
        f"stale copies used: {totals.stale_used}; "
        f"requests forbidden: {totals.dropped}, delayed: {totals.delayed}, dropped at close: "
        f"{totals.dropped_at_close}, handed back: {totals.handed_back}; "
        f"longest delay: {totals.longest_wait:.1f} s"
        + (f"; audit mode: would forbid {audit[0]}, would delay {audit[1]}" if audit else ""),
        *(_origin_line(rt) for rt in eventful),
    ]
    if len(runtimes) > len(eventful):
        lines.append(f"  ... and {totals.origins - len(eventful)} more origin(s)")
    logger.info("\n".join(lines))
    stats.set_value("robotstxt/origins", totals.origins)
    stats.set_value("robotstxt/longest_delay", round(totals.longest_wait, 3))


# -- usage preferences (crawl/usage.py) ----------------------------------------------------


def log_usage_refusals(
    refusals: Mapping[str, Mapping[str, int]], *, audit: bool, stats: StatsCollector
) -> None:
    """One INFO block: requests refused by usage preferences, per origin (most first)."""
    if not refusals:
        return
    verb = "would be dropped (audit)" if audit else "dropped"
    totals = {
        cause: sum(c.get(cause, 0) for c in refusals.values()) for cause in ("robots", "header")
    }
    ranked = sorted(refusals.items(), key=lambda item: (-sum(item[1].values()), item[0]))
    lines = [
        f"scrapy-rep usage preferences: {sum(totals.values())} request(s) {verb} for a "
        f"refused purpose, {len(refusals)} origin(s): {totals['robots']} by robots.txt "
        f"(before download), {totals['header']} by the Content-Usage header (after)",
        *(
            f"  {origin}: robots.txt {counts.get('robots', 0)}, header {counts.get('header', 0)}"
            for origin, counts in ranked[:MAX_LISTED_ORIGINS]
        ),
    ]
    if len(ranked) > MAX_LISTED_ORIGINS:
        lines.append(f"  ... and {len(ranked) - MAX_LISTED_ORIGINS} more origin(s)")
    logger.info("\n".join(lines))
    stats.set_value("rep/usage/refused_origins", len(refusals))


def log_page_directives(per_origin: Mapping[str, Mapping[str, int]], *, mode: str) -> None:
    """One INFO block: per origin, the pages that were ``noindex`` or ``nofollow`` and the
    requests and items dropped for it (or that would be, in audit mode); most first."""
    listed = [(origin, counts) for origin, counts in per_origin.items() if any(counts.values())]
    if not listed:
        return
    listed.sort(key=lambda item: (-(item[1]["requests"] + item[1]["items"]), item[0]))
    verb = {"enforce": "dropped", "audit": "would be dropped"}.get(mode)
    totals = {key: sum(c[key] for _, c in listed) for key in ("requests", "items")}
    head = f"scrapy-rep page-level directives (REP_PAGE_MODE = {mode!r}), {len(listed)} origin(s)"
    if verb is not None:
        head += f"; {verb}: {totals['requests']} request(s), {totals['items']} item(s)"
    lines = [head]
    for origin, c in listed[:MAX_LISTED_ORIGINS]:
        line = f"  {origin}: pages noindex {c['noindex']}, nofollow {c['nofollow']}"
        if verb is not None:
            line += f"; {verb}: requests {c['requests']}, items {c['items']}"
        lines.append(line)
    if len(listed) > MAX_LISTED_ORIGINS:
        lines.append(f"  ... and {len(listed) - MAX_LISTED_ORIGINS} more origin(s)")
    logger.info("\n".join(lines))
