"""The waiting room: requests held back until their origin's robots.txt decides them.

Requests wait here, not inside ``process_request``, so they hold no download concurrency
(Scrapy counts a request parked in the downloader against its global limit). *Held*: until
the origin is decided (``take(origin)``); *timed* (``hold_until``): until a time, e.g. a
cluster-wide Crawl-delay turn, one reactor timer over a heap of deadlines. Durable waiting
(crawl/durable_waiting.py) records every request that enters and forgets every one that
leaves. Counts are kept as they change: ``len(room)`` and per-origin counts are O(1).

Held requests are kept as bytes (``RequestCodec``) and, beyond ``memory_bound``, spill to
disk (``Spill``), as docs/waiting.md ("Spill to disk") describes. A request is recorded
before it is serialised, so its store key (in meta) travels in the bytes, to disk too; the
same bytes go to disk (serialising again would double the cost).
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import logging
import shutil
import struct
import tempfile
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from scrapy import Request

    from scrapy_rep.crawl.durable_waiting import DurableWaiting
    from scrapy_rep.crawl.request_codec import RequestCodec

logger = logging.getLogger(__name__)

# (request, since): a tuple, not an object, to keep a held request's cost small.
Held = tuple["Request", float]


class WaitingRoom:
    def __init__(
        self,
        keeper: DurableWaiting,
        clock: Callable[[], float],
        call_later: Callable[..., Any],
        on_due: Callable[[str, Request, float], None],
        memory_bound: int = 0,
        make_spill: Callable[[], Spill] | None = None,
        on_unserialisable: Callable[[Request], None] | None = None,
        codec: RequestCodec | None = None,
    ) -> None:
        self.keeper = keeper
        self.codec = codec
        self.clock = clock
        self._call_later = call_later
        self._on_due = on_due
        # (request or its bytes, since) per origin
        self._held: dict[str, deque[tuple[Request | bytes, float]]] = {}
        self._held_count = 0
        # Beyond memory_bound held requests in memory, new ones spill to disk.
        self.memory_bound = memory_bound
        self._make_spill = make_spill
        self._on_unserialisable = on_unserialisable
        self.spill: Spill | None = None
        self.spilled_total = 0
        # timed entries: (when, seq, origin, request, since, reason)
        self._timed: list[tuple[float, int, str, Request, float, str]] = []
        self._timed_per_origin: dict[str, int] = {}
        self._seq = itertools.count()
        self._timer: Any = None
        self._timer_at = 0.0
        self.closed = False

    # -- sizes -------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._held_count + len(self._timed) + (self.spill.total if self.spill else 0)

    def count(self, origin: str) -> int:
        held = self._held.get(origin)
        spilled = self.spill.count(origin) if self.spill else 0
        return (len(held) if held else 0) + spilled + self._timed_per_origin.get(origin, 0)

    def origins(self) -> Iterator[str]:
        """Origins with waiting requests, each once."""
        spilled = self.spill.origins() if self.spill else ()
        return iter(dict.fromkeys([*self._held, *spilled, *self._timed_per_origin]))

    # -- held until the origin is decided ----------------------------------------------

    def hold(self, origin: str, request: Request) -> None:
        when = self.clock()
        codec = self.codec
        if not self.keeper.records:  # nothing to record, nothing to share
            blob = self._encode(request)
        elif codec is None:
            self.keeper.record(origin, (request,))
            blob = None
        else:
            # Recorded first: the keeper may mark the request (its key, in meta), and the
            # bytes must carry that. The room and a keeper that stores bytes share one
            # serialisation.
            codec.share(request)
            try:
                self.keeper.record(origin, (request,))
                blob = self._encode(request)
            finally:
                codec.unshare()
        if self.memory_bound and self._held_count >= self.memory_bound:
            if blob is not None and self._spilled(origin, blob, when):
                return
            if blob is None and self._on_unserialisable is not None:
                # As Scrapy's scheduler does with a request its disk queue cannot take.
                self._on_unserialisable(request)
        queue = self._held.get(origin)
        if queue is None:
            queue = self._held[origin] = deque()
        queue.append((request if blob is None else blob, when))
        self._held_count += 1

    def _encode(self, request: Request) -> bytes | None:
        if self.codec is None:
            return None
        try:
            return self.codec.encode(request)
        except Exception:  # ValueError (callback), PicklingError, TypeError (meta)
            return None

    def _decode(self, stored: Request | bytes) -> Request | None:
        if not isinstance(stored, bytes):
            return stored
        assert self.codec is not None
        try:
            return self.codec.decode(stored)
        except Exception:
            # It was encoded by this process a moment ago; should it not decode, say so
            # rather than lose it silently.
            logger.error("a held request could not be restored", exc_info=True)
            return None

    def _spilled(self, origin: str, blob: bytes, since: float) -> bool:
        if self.spill is None:
            if self._make_spill is None:
                return False
            self.spill = self._make_spill()
        self.spill.push(origin, blob, since)
        self.spilled_total += 1
        return True

    def take(self, origin: str) -> list[Held]:
        """Remove and return the origin's held requests (oldest first)."""
        queue = self._held.pop(origin, None)
        spilled = self.spill.pop_all(origin) if self.spill is not None else []
        if not queue and not spilled:
            return []
        self._held_count -= len(queue or ())
        taken = [
            (request, since)
            for item, since in [*(queue or ()), *spilled]
            if (request := self._decode(item)) is not None
        ]
        self.keeper.forget(origin, [request for request, _ in taken])
        return taken

    # -- held until a time -------------------------------------------------------------

    def hold_until(self, origin: str, request: Request, when: float, reason: str) -> None:
        """Keep ``request`` until ``when`` (clock seconds), then hand it to ``on_due``."""
        heapq.heappush(self._timed, (when, next(self._seq), origin, request, self.clock(), reason))
        self._timed_per_origin[origin] = self._timed_per_origin.get(origin, 0) + 1
        self.keeper.record(origin, (request,))
        self._arm(when)

    def _arm(self, when: float) -> None:
        if self.closed:
            return
        # One timer for the earliest deadline, moved only when an earlier one arrives.
        if self._timer is not None and self._timer.active():
            if self._timer_at <= when:
                return
            self._timer.cancel()
        self._timer_at = when
        self._timer = self._call_later(max(when - self.clock(), 0.0), self._fire)

    def _fire(self) -> None:
        self._timer = None
        now = self.clock()
        due: list[tuple[str, Request, float]] = []
        while self._timed and self._timed[0][0] <= now:
            _, _, origin, request, since, _ = heapq.heappop(self._timed)
            self._timed_per_origin[origin] -= 1
            if not self._timed_per_origin[origin]:
                del self._timed_per_origin[origin]
            due.append((origin, request, since))
        for origin, request, _ in due:
            self.keeper.forget(origin, (request,))
        for origin, request, since in due:
            self._on_due(origin, request, since)
        if self._timed:
            self._arm(self._timed[0][0])

    def timed_reasons(self) -> dict[str, str]:
        """origin -> reason of its first timed request (for the periodic INFO line)."""
        reasons: dict[str, str] = {}
        for _, _, origin, _, _, reason in self._timed:
            reasons.setdefault(origin, reason)
        return reasons

    # -- closing -----------------------------------------------------------------------

    def take_everything(
        self, *, forget: bool = True, restore: bool = True
    ) -> list[tuple[str, Request | bytes, float]]:
        """Empty the room (at close). ``forget=False`` leaves the keeper's records (for
        another process); ``restore=False``: the caller only counts, so bytes stay bytes."""
        stored: list[tuple[str, Request | bytes, float]] = []
        for origin, queue in self._held.items():
            stored.extend((origin, item, since) for item, since in queue)
        self._held.clear()
        self._held_count = 0
        for origin in self.spill.origins() if self.spill is not None else ():
            assert self.spill is not None
            stored.extend((origin, blob, since) for blob, since in self.spill.pop_all(origin))
        if restore or (forget and self.keeper.records):
            restored = [
                (origin, request, since)
                for origin, item, since in stored
                if (request := self._decode(item)) is not None
            ]
            if forget:
                for origin, request, _ in restored:
                    self.keeper.forget(origin, (request,))
            if restore:
                stored = list(restored)
        for _, _, origin, request, since, _ in sorted(self._timed):
            if forget:
                self.keeper.forget(origin, (request,))
            stored.append((origin, request, since))
        self._timed.clear()
        self._timed_per_origin.clear()
        return stored

    def close(self) -> None:
        self.closed = True
        if self.spill is not None:
            self.spill.close()
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None


# The time a spilled request started waiting, before its bytes.
_SINCE = struct.Struct("<d")


def spill_root(settings: Any) -> Path:
    """``JOBDIR/rep-held`` when JOBDIR is set, else a new temporary directory."""
    from scrapy.utils.job import job_dir

    jobdir = job_dir(settings)
    if jobdir:
        return Path(jobdir) / "rep-held"
    return Path(tempfile.mkdtemp(prefix="scrapy-rep-held-"))


class Spill:
    """One disk queue per origin under ``root``, which ``close`` removes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._queues: dict[str, Any] = {}
        self._counts: dict[str, int] = {}
        self.total = 0

    def __len__(self) -> int:
        return self.total

    def count(self, origin: str) -> int:
        return self._counts.get(origin, 0)

    def _path(self, origin: str) -> Path:
        key = hashlib.sha1(origin.encode("utf-8"), usedforsecurity=False).hexdigest()[:20]
        return self.root / key

    def push(self, origin: str, blob: bytes, since: float) -> None:
        queue = self._queues.get(origin)
        if queue is None:
            from queuelib.queue import FifoDiskQueue

            path = self._path(origin)
            if path.exists():  # left over by a killed run: its contents were handed back
                shutil.rmtree(path, ignore_errors=True)
            path.parent.mkdir(parents=True, exist_ok=True)
            queue = self._queues[origin] = FifoDiskQueue(str(path))
        queue.push(_SINCE.pack(since) + blob)
        self._counts[origin] = self._counts.get(origin, 0) + 1
        self.total += 1

    def pop_all(self, origin: str) -> list[tuple[bytes, float]]:
        queue = self._queues.pop(origin, None)
        count = self._counts.pop(origin, 0)
        if queue is None:
            return []
        self.total -= count
        taken: list[tuple[bytes, float]] = []
        size = _SINCE.size
        while (data := queue.pop()) is not None:
            taken.append((data[size:], _SINCE.unpack_from(data)[0]))
        queue.close()
        shutil.rmtree(self._path(origin), ignore_errors=True)
        return taken

    def origins(self) -> list[str]:
        return list(self._queues)

    def close(self) -> None:
        for queue in self._queues.values():
            queue.close()
        self._queues.clear()
        self._counts.clear()
        self.total = 0
        # Everything spilled has left the room by now (released, handed back to the
        # scheduler, or dropped), so nothing here is worth keeping, under JOBDIR too.
        shutil.rmtree(self.root, ignore_errors=True)
