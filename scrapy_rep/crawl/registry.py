"""The bounded registry of per-origin runtimes."""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

from scrapy_rep.crawl.report import SummaryTotals, state_of
from scrapy_rep.crawl.runtime import OriginRuntime

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


class RuntimeRegistry:
    """Runtimes by origin, at most ``limit`` of them unless more are busy.

    Least recently used runtimes are evicted first (their record stays in the store),
    one per new origin: O(1). A busy runtime (``is_busy``: held requests, waiters, a
    fetch or a timer) is never evicted: it moves to ``pinned`` until ``settle`` finds
    it idle again, so no held request is ever orphaned. Evicted origins are folded into
    ``evicted`` (counts) and ``_evicted_states`` (one short string each), so an origin
    that comes back is not counted twice in the summary.
    """

    def __init__(self, limit: int, is_busy: Callable[[OriginRuntime], bool]) -> None:
        self.limit = max(limit, 1)
        self.is_busy = is_busy
        self._lru: OrderedDict[str, OriginRuntime] = OrderedDict()
        self._pinned: dict[str, OriginRuntime] = {}
        self.evicted = SummaryTotals()
        self._evicted_states: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._lru) + len(self._pinned)

    def lookup(self, origin: str) -> OriginRuntime | None:
        return self._lru.get(origin) or self._pinned.get(origin)

    def get(self, origin: str) -> OriginRuntime:
        rt = self._lru.get(origin)
        if rt is not None:
            self._lru.move_to_end(origin)
            return rt
        rt = self._pinned.get(origin)
        if rt is not None:
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
