"""What the crawl keeps in memory for one origin while it runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from twisted.internet.base import DelayedCall
    from twisted.internet.defer import Deferred

    from scrapy_rep.policy.records import OriginRecord
    from scrapy_rep.policy.robots_policy import Evaluation

# Seconds a request was held back, shown in its robotstxt_decision meta.
WAITED_META_KEY = "rep_waited"


@dataclass(slots=True)
class OriginRuntime:
    origin: str
    record: OriginRecord | None = None
    loaded: bool = False
    loading: bool = False  # the first store read is in flight
    fetching: bool = False  # a fetch is queued or running
    waiters: list[Deferred[None]] = field(default_factory=list)
    timer: DelayedCall | None = None
    timer_at: float = 0.0  # reactor time the timer fires at
    last_source: str = ""
    # REP_UNREACHABLE_FALLBACK's verdict, once it applied to this origin (for the summary)
    fallback_applied: str = ""
    # (valid until, the record it was made from, the evaluation): a fresh copy's
    # evaluation cannot change before its refresh-ahead time (or, once its refetch
    # runs, before it expires), so requests reuse it until then
    fresh: tuple[float, OriginRecord, Evaluation] | None = None
    # the same for an undecided origin: (until, record, evaluation), until its next wake
    undecided: tuple[float, OriginRecord | None, Evaluation] | None = None
    # Estimated bytes of the robots.txt copy this origin keeps in RAM (record body and
    # parsed rules; 0 when it keeps none), and the parsed rules' share (registry.py).
    copy_bytes: int = 0
    parsed_bytes: int = 0
    # requests at download time waiting for an unloaded copy to be read back
    reload_waiters: list[Deferred[None]] = field(default_factory=list)
    # for the per-origin summary
    fetches: int = 0
    delayed: int = 0
    released: int = 0
    dropped: int = 0
    dropped_at_close: int = 0
    handed_back: int = 0
    longest_wait: float = 0.0
    unreachable_spells: int = 0
    stale_used: bool = False

    def fresh_evaluation(self, now: float) -> Evaluation | None:
        """The evaluation of the fresh copy while it still applies at ``now`` (the
        same record, before its refresh-ahead time, or before expiry while its refetch
        runs), else None: one comparison per request."""
        fresh = self.fresh
        if fresh is not None and self.record is fresh[1] and now < fresh[0]:
            return fresh[2]
        return None
