"""The bounded registry of per-origin runtimes: by count, and their copies by bytes."""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

from twisted.internet.defer import Deferred

from scrapy_rep.crawl.report import SummaryTotals, state_of
from scrapy_rep.crawl.runtime import OriginRuntime

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from scrapy_rep.policy.robots_policy import Evaluation

# Estimated RAM of one origin's robots.txt copy, in bytes. A record in a runtime: its
# body plus the record and evaluation objects around it. A parsed copy (RobotsTxt with
# the group in use compiled), measured with tracemalloc: 600 files of the development
# corpus took 8.6 KiB on average (about 2-8 KiB plus up to twice the body); the
# wildcard-heavy files of benchmarks/bench_broad.py (2.8 KB on average) 14 KB with
# their record. The estimate errs high on both (1.1-1.6x), so the budget bounds RAM.
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


class RuntimeRegistry:
    """Runtimes by origin, at most ``limit`` of them unless more are busy; the
    robots.txt copies they keep in RAM, at most ``max_bytes`` (estimated) of them.

    Least recently used runtimes are evicted first (their record stays in the store),
    one per new origin: O(1). A busy runtime (``is_busy``: held requests, waiters, a
    fetch or a timer) is never evicted: it moves to ``pinned`` until ``settle`` finds
    it idle again, so no held request is ever orphaned. Evicted origins are folded into
    ``evicted`` (counts) and ``_evicted_states`` (one short string each), so an origin
    that comes back is not counted twice in the summary.

    The bytes: a runtime holding a copy of its robots.txt (the record with its body,
    and the parsed rules the ``Decider`` keeps for it) is *resident*. When the resident
    copies exceed ``max_bytes``, the least recently used idle ones are *unloaded*: the
    body and parsed rules are dropped (``on_unload`` tells the Decider), the runtime
    keeps a body-less record for the summary and its counters, and its next request
    reads the record from the store again (no robots.txt fetch: the store has it).
    """

    def __init__(
        self,
        limit: int,
        is_busy: Callable[[OriginRuntime], bool],
        *,
        max_bytes: int = 2**62,
        on_unload: Callable[[str], None] | None = None,
    ) -> None:
        self.limit = max(limit, 1)
        self.is_busy = is_busy
        self._lru: OrderedDict[str, OriginRuntime] = OrderedDict()
        self._pinned: dict[str, OriginRuntime] = {}
        self.evicted = SummaryTotals()
        self._evicted_states: dict[str, str] = {}
        self.max_bytes = max_bytes
        self.on_unload = on_unload
        # origin -> runtime, least recently used first: the runtimes holding a copy
        self._resident: OrderedDict[str, OriginRuntime] = OrderedDict()
        self.resident_bytes = 0
        self.peak_resident_bytes = 0  # after each shedding pass
        self.unloaded = 0

    def __len__(self) -> int:
        return len(self._lru) + len(self._pinned)

    def lookup(self, origin: str) -> OriginRuntime | None:
        return self._lru.get(origin) or self._pinned.get(origin)

    def fresh(self, origin: str, now: float) -> tuple[OriginRuntime, Evaluation] | None:
        """The runtime of ``origin`` and the evaluation its fresh copy gave, while that
        still applies at ``now`` (``rt.fresh``, see ``OriginCoordinator.evaluate``),
        touched as ``get`` touches it; else None. The per-request path: one lookup, no
        store read, no timer, no new runtime."""
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
            if rt.copy_bytes:
                self._resident.move_to_end(origin)
            return rt
        rt = self._pinned.get(origin)
        if rt is not None:
            if rt.copy_bytes:
                self._resident.move_to_end(origin)
            return rt
        rt = self._lru[origin] = OriginRuntime(origin)
        state = self._evicted_states.pop(origin, None)
        if state is not None:
            self.evicted.forget_origin(state)
        if len(self._lru) + len(self._pinned) > self.limit:
            self._evict_one()
        return rt

    def _evict_one(self) -> None:
        # Busy runtimes met on the way are pinned, so each is passed over once: O(1)
        # amortised per new origin.
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
        # (a parsed copy the Decider keeps stays counted until it is replaced or dropped)
        cost = record_bytes(record.body) + rt.parsed_bytes if record is not None else 0
        self._set_cost(rt, cost, rt.parsed_bytes)
        waiters, rt.reload_waiters = rt.reload_waiters, []
        for waiter in waiters:
            waiter.callback(None)

    def reloading(self, origin: str) -> bool:
        """True while an unloaded origin reads its copy back from the store: it was
        decided before, so its requests need not wait in the scheduler's path for
        that read (a store read, not a fetch)."""
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

    def note_parsed(self, origin: str, body: bytes) -> bool:
        """The Decider would keep a parsed copy of ``body`` for ``origin``: counted,
        True. False when the origin holds no copy (its record has not landed yet, or
        its runtime was unloaded or evicted meanwhile): the Decider then does not keep
        it either, so every parsed copy kept is counted within ``max_bytes``."""
        rt = self.lookup(origin)
        if rt is None or not rt.copy_bytes:
            return False
        self._set_cost(rt, rt.copy_bytes - rt.parsed_bytes + parsed_bytes(body), parsed_bytes(body))
        return True

    def _set_cost(self, rt: OriginRuntime, cost: int, parsed: int) -> None:
        if not cost:
            self._forget_copy(rt)
            return
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
        if not rt.copy_bytes:
            return
        self.resident_bytes -= rt.copy_bytes
        rt.copy_bytes = rt.parsed_bytes = 0
        self._resident.pop(rt.origin, None)
        if self.on_unload is not None:
            self.on_unload(rt.origin)
