"""A bound on robots.txt fetches in flight (docs/settings.md, ``CONCURRENT_REQUESTS``).

``engine.download_async`` bypasses ``CONCURRENT_REQUESTS`` (the scheduler never sees it): without a
bound, a broad crawl seeded with thousands of origins opens thousands of connections at
once. Fetches beyond the bound wait in a FIFO of origins; an origin has at most one
fetch, so FIFO order is round robin by origin. Per-slot limits still apply inside the
downloader. A queued fetch starts (and only then takes its lease in a shared store)
when a running one ends.

Draining never recurses: with a shared store, a queued fetch often ends inside its own
``start()`` (another process holds the origin's lease, or has just stored its answer,
and the store answers without waiting), and that ``done()`` would start the next one
one call deeper, until Python's recursion limit. ``done()`` inside a ``start()`` only
frees the slot; the running drain loop takes the next fetch.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable


class FetchQueue:
    def __init__(self, limit: int) -> None:
        self.limit = max(limit, 1)
        self.running = 0
        self.peak = 0
        self._queued: OrderedDict[str, Callable[[], bool]] = OrderedDict()
        self._draining = False

    def __len__(self) -> int:
        return len(self._queued)

    def is_queued(self, origin: str) -> bool:
        return origin in self._queued

    def submit(self, origin: str, start: Callable[[], bool]) -> None:
        """Run ``start()`` now if under the bound, else when a slot frees up.

        ``start`` returns True when it really started a fetch (which must end with
        ``done()``), False when it did not (another process holds the lease, ...).
        """
        if origin in self._queued:
            return
        self._queued[origin] = start
        self._pump()

    def cancel(self, origin: str) -> None:
        self._queued.pop(origin, None)

    def done(self) -> None:
        self.running -= 1
        self._pump()

    def clear(self) -> None:
        self._queued.clear()

    def _pump(self) -> None:
        if self._draining:
            return  # called from a start() below: the loop there takes the next fetch
        self._draining = True
        try:
            while self._queued and self.running < self.limit:
                _, start = self._queued.popitem(last=False)
                self.running += 1
                self.peak = max(self.peak, self.running)
                try:
                    started = start()
                except BaseException:
                    self.running -= 1
                    raise
                if not started:
                    self.running -= 1
        finally:
            self._draining = False
