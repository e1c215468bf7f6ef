"""The per-origin summary logged when the spider closes."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy_rep._records import ALLOW_ALL, RULES

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from scrapy_rep._coordinator import OriginCoordinator

logger = logging.getLogger("scrapy_rep")


def log_summary(coordinator: OriginCoordinator, stats: StatsCollector) -> None:
    origins = coordinator.origins.values()
    if not origins:
        return
    counts = {"rules": 0, "allow-all": 0, "unreachable": 0, "unknown": 0}
    for rt in origins:
        record = rt.record
        if record is None or (record.kind is None and not record.unreachable):
            counts["unknown"] += 1
        elif record.unreachable:
            counts["unreachable"] += 1
        elif record.kind == RULES:
            counts["rules"] += 1
        elif record.kind == ALLOW_ALL:
            counts["allow-all"] += 1
    stale = sum(1 for rt in origins if rt.stale_used)
    dropped = sum(rt.dropped for rt in origins)
    delayed = sum(rt.delayed for rt in origins)
    longest = max((rt.longest_wait for rt in origins), default=0.0)
    logger.info(
        "scrapy-rep summary: %d origin(s): %d with rules, %d allow-all, %d unreachable, "
        "%d unknown; stale copies used: %d; requests dropped: %d, delayed: %d; "
        "longest delay: %.1f s",
        len(coordinator.origins),
        counts["rules"],
        counts["allow-all"],
        counts["unreachable"],
        counts["unknown"],
        stale,
        dropped,
        delayed,
        longest,
    )
    stats.set_value("robotstxt/origins", len(coordinator.origins))
    stats.set_value("robotstxt/longest_delay", round(longest, 3))
