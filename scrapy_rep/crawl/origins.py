"""The origins a crawl knows and their state in RAM, bounded by count and by bytes."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from twisted.internet.defer import Deferred

from scrapy_rep.policy.records import ALLOW_ALL, RULES

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from twisted.internet.base import DelayedCall

    from scrapy_rep.policy.records import OriginRecord
    from scrapy_rep.policy.robots_policy import Evaluation
    from scrapy_rep.robotstxt._robotstxt import RobotsTxt

# Seconds a request was held back, shown in its robotstxt_decision meta.
WAITED_META_KEY = "rep_waited"

# Estimated RAM of one origin's robots.txt copy, in bytes: a record is its body plus the
# objects around it; a parsed copy (tracemalloc: 8.6 KiB on average over 600 corpus
# files, 14 KB with its record for bench_broad.py's wildcard-heavy ones) errs high by
# 1.1-1.6x, so the budget bounds RAM.
RECORD_OVERHEAD = 256
PARSED_OVERHEAD = 4_096
PARSED_PER_BODY_BYTE = 3
# Busy runtimes passed over in one shedding pass at most (each goes to the back of
# the order), so a crawl with many busy origins never pays a long scan per new copy.
MAX_SKIPS = 32


def record_bytes(body: bytes) -> int:
    return RECORD_OVERHEAD + len(body)


def parsed_bytes(body: bytes) -> int:
    return PARSED_OVERHEAD + PARSED_PER_BODY_BYTE * len(body)


@dataclass(slots=True)
class ParsedCopy:
    """The parsed rules of one robots.txt body, and the product tokens whose group is compiled."""

    body: bytes
    robots: RobotsTxt
    ready: set[str] = field(default_factory=set)


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
    # (valid until, its record, the evaluation): a fresh copy's evaluation cannot change
    # before its refresh-ahead time (or its expiry, once refetching), so it is reused
    fresh: tuple[float, OriginRecord, Evaluation] | None = None
    # the same for an undecided origin: (until, record, evaluation), until its next wake
    undecided: tuple[float, OriginRecord | None, Evaluation] | None = None
    # the parsed rules of the record's body, and their Crawl-delay: (body, token, delay)
    parsed: ParsedCopy | None = None
    crawl_delay: tuple[bytes, str, float | None] | None = None
    # estimated bytes of the copy kept in RAM (0: none), and the parsed rules' share
    copy_bytes: int = 0
    parsed_bytes: int = 0
    # requests at download time waiting for an unloaded copy to be read back
    reload_waiters: list[Deferred[None]] = field(default_factory=list)
    # for the per-origin summary
    fetches: int = 0
    delayed: int = 0
    dropped: int = 0
    dropped_at_close: int = 0
    handed_back: int = 0
    longest_wait: float = 0.0
    unreachable_spells: int = 0
    stale_used: bool = False

    def fresh_evaluation(self, now: float) -> Evaluation | None:
        """The evaluation of the fresh copy while it still applies at ``now``, else None."""
        fresh = self.fresh
        if fresh is not None and self.record is fresh[1] and now < fresh[0]:
            return fresh[2]
        return None


def state_of(rt: OriginRuntime) -> str:
    record = rt.record
    if record is None or (record.kind is None and not record.unreachable):
        return "unknown"
    if record.unreachable:
        return "unreachable"
    return RULES if record.kind == RULES else ALLOW_ALL


@dataclass
class SummaryTotals:
    """Counters over many origins; also what is kept of origins evicted from memory."""

    origins: int = 0
    states: dict[str, int] = field(
        default_factory=lambda: {RULES: 0, ALLOW_ALL: 0, "unreachable": 0, "unknown": 0}
    )
    stale_used: int = 0
    dropped: int = 0
    delayed: int = 0
    longest_wait: float = 0.0
    dropped_at_close: int = 0
    handed_back: int = 0
    # Spells of unreachability, recovered or not: the stats' robotstxt/unreachable.
    unreachable_spells: int = 0

    def add(self, rt: OriginRuntime) -> None:
        self.origins += 1
        self.states[state_of(rt)] += 1
        self.stale_used += rt.stale_used
        self.dropped += rt.dropped
        self.delayed += rt.delayed
        self.longest_wait = max(self.longest_wait, rt.longest_wait)
        self.dropped_at_close += rt.dropped_at_close
        self.handed_back += rt.handed_back
        self.unreachable_spells += rt.unreachable_spells

    def merged(self, runtimes: Iterable[OriginRuntime]) -> SummaryTotals:
        total = replace(self, states=dict(self.states))
        for rt in runtimes:
            total.add(rt)
        return total


class Origins:
    """Runtimes by origin, least recently used first: one idle runtime is evicted per new
    origin beyond ``limit`` (a busy one is pinned until ``settle`` finds it idle, so no
    held request is orphaned), and beyond ``max_bytes`` the least recently used idle
    copies are *unloaded* (their next request reads the store again, no fetch)."""

    def __init__(
        self, limit: int, *, max_bytes: int = 2**62, held: Callable[[str], int] = lambda _: 0
    ) -> None:
        self.limit = max(limit, 1)
        self.max_bytes = max_bytes
        self.held = held
        self._lru: OrderedDict[str, OriginRuntime] = OrderedDict()
        self._pinned: dict[str, OriginRuntime] = {}
        self.evicted = SummaryTotals()
        self._evicted_states: dict[str, str] = {}
        # origin -> runtime, least recently used first: the runtimes holding a copy
        self._resident: OrderedDict[str, OriginRuntime] = OrderedDict()
        self.resident_bytes = 0
        self.peak_resident_bytes = 0  # after each shedding pass
        self.unloaded = 0

    def __len__(self) -> int:
        return len(self._lru) + len(self._pinned)

    def is_busy(self, rt: OriginRuntime) -> bool:
        return bool(
            rt.fetching
            or rt.waiters
            or self.held(rt.origin)
            or (rt.timer is not None and rt.timer.active())
        )

    def lookup(self, origin: str) -> OriginRuntime | None:
        return self._lru.get(origin) or self._pinned.get(origin)

    def fresh(self, origin: str, now: float) -> tuple[OriginRuntime, Evaluation] | None:
        """The runtime of ``origin`` and its fresh copy's evaluation while that applies at
        ``now``, touched as ``get`` touches it; else None. The per-request path."""
        lru = self._lru
        rt = lru.get(origin)
        if rt is None:
            rt = self._pinned.get(origin)
            if rt is None:
                return None
        else:
            lru.move_to_end(origin)
        fresh = rt.fresh_evaluation(now)
        if fresh is None:
            return None
        if rt.copy_bytes:
            self._resident.move_to_end(origin)
        return rt, fresh

    def get(self, origin: str) -> OriginRuntime:
        rt = self._lru.get(origin)
        if rt is not None:
            self._lru.move_to_end(origin)
        else:
            rt = self._pinned.get(origin)
        if rt is not None:
            if rt.copy_bytes:
                self._resident.move_to_end(origin)
            return rt
        rt = self._lru[origin] = OriginRuntime(origin)
        state = self._evicted_states.pop(origin, None)
        if state is not None:  # evicted before: its runtime counts it now (event counts stay)
            self.evicted.origins -= 1
            self.evicted.states[state] -= 1
        if len(self._lru) + len(self._pinned) > self.limit:
            self._evict_one()
        return rt

    def _evict_one(self) -> None:
        # Busy runtimes met are pinned, so each is passed over once: O(1) amortised.
        while len(self._lru) > 1:
            origin, rt = self._lru.popitem(last=False)
            if self.is_busy(rt):
                self._pinned[origin] = rt
                continue
            self._forget_copy(rt)
            self.evicted.add(rt)
            self._evicted_states[origin] = state_of(rt)
            return

    def settle(self, rt: OriginRuntime) -> None:
        """A pinned runtime that is idle again goes back to the LRU order."""
        if rt.origin in self._pinned and not self.is_busy(rt):
            del self._pinned[rt.origin]
            self._lru[rt.origin] = rt

    def runtimes(self) -> Iterator[OriginRuntime]:
        yield from self._lru.values()
        yield from self._pinned.values()

    # -- bytes -------------------------------------------------------------------------

    def note_record(self, rt: OriginRuntime) -> None:
        """``rt.record`` was just set (read from the store, or a fetch recorded)."""
        record = rt.record
        parsed = rt.parsed
        if parsed is not None and (record is None or parsed.body is not record.body):
            # Rules of another body are never asked again (copies match by identity).
            rt.parsed = rt.crawl_delay = None
        if record is None:
            self._forget_copy(rt)
        else:
            share = parsed_bytes(record.body) if rt.parsed is not None else 0
            self._set_cost(rt, record_bytes(record.body) + share, share)
        waiters, rt.reload_waiters = rt.reload_waiters, []
        for waiter in waiters:
            waiter.callback(None)

    def note_parsed(self, rt: OriginRuntime, copy: ParsedCopy) -> None:
        """``copy`` is the origin's parsed rules from now on, counted within ``max_bytes``
        (also before its record lands: ``robots_parsed`` is answered during the fetch)."""
        rt.parsed = copy
        if self.lookup(rt.origin) is not rt:
            return  # evicted meanwhile: the request in flight uses it, nothing keeps it
        share = parsed_bytes(copy.body)
        self._set_cost(rt, rt.copy_bytes - rt.parsed_bytes + share, share)

    def reloading(self, origin: str) -> bool:
        """True while an unloaded (so decided before) origin reads its copy back from the
        store: its requests need not wait in the scheduler's path for that read."""
        rt = self.lookup(origin)
        return rt is not None and rt.loading and rt.record is not None

    def reloaded(self, origin: str) -> Deferred[None]:
        """Fires once the read ``reloading`` reported has landed."""
        rt = self.get(origin)
        waiter: Deferred[None] = Deferred()
        if not rt.loading:
            waiter.callback(None)
        else:
            rt.reload_waiters.append(waiter)
        return waiter

    def _set_cost(self, rt: OriginRuntime, cost: int, parsed: int) -> None:
        self.resident_bytes += cost - rt.copy_bytes
        rt.copy_bytes = cost
        rt.parsed_bytes = parsed
        self._resident[rt.origin] = rt
        self._resident.move_to_end(rt.origin)
        self._shed(keep=rt)

    def _shed(self, keep: OriginRuntime) -> None:
        skips = 0
        while self.resident_bytes > self.max_bytes and skips < MAX_SKIPS:
            origin, rt = next(iter(self._resident.items()))
            if rt is keep:
                break  # the newest copy alone is over the budget: it stays in use
            if rt.loading or self.is_busy(rt):
                self._resident.move_to_end(origin)
                skips += 1
                continue
            self.unload(rt)
        self.peak_resident_bytes = max(self.peak_resident_bytes, self.resident_bytes)

    def unload(self, rt: OriginRuntime) -> None:
        """Drop ``rt``'s copy from RAM; its next evaluation reads the store again."""
        self._forget_copy(rt)
        record = rt.record
        if record is not None and record.body:
            # What the summary and the waiting line read stays (kind, outcome, states).
            rt.record = record.evolve(body=b"")
        rt.loaded = False
        rt.fresh = None
        rt.undecided = None
        self.unloaded += 1

    def _forget_copy(self, rt: OriginRuntime) -> None:
        rt.parsed = rt.crawl_delay = None
        if not rt.copy_bytes:
            return
        self.resident_bytes -= rt.copy_bytes
        rt.copy_bytes = rt.parsed_bytes = 0
        self._resident.pop(rt.origin, None)
