"""Held requests recorded in a shared store, so a ``kill -9`` of the holder loses none.

docs/behaviour.md, "nothing lost": with a shared store, another process (or the next run of
the spider) releases the waiting requests of a process that died. ``StoreLedger`` is the
``HeldLedger`` the waiting room reports to:

* ``record``/``forget`` only touch in-process buffers; a background flush writes them in
  batches (group commit: while one batch is being written the next one accumulates), so
  a held request costs a small share of one round trip, and a request released before
  its batch went out costs nothing in the store.
* Each request is an entry (``ledger_entries.py``): Scrapy's own serialisation, keyed
  so duplicates collapse. One that cannot be serialised stays in the room, not in the
  store: logged once at WARNING, counted, never silently lost.
* Every flush also beats this process's heartbeat; a tick every third of
  ``REP_CLUSTER_HEARTBEAT`` flushes and adopts the parked requests of dead owners, which
  ``adopt()`` then hands to the room.

All store I/O runs in a thread (never on the reactor thread), one call at a time.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from twisted.internet import task, threads

from scrapy_rep.crawl.ledger_entries import LEDGER_KEY_META, STAT, LedgerEntries

# (re-exported: opening the shared store is crawl/shared_store.py's)
from scrapy_rep.crawl.shared_store import open_cluster, scrapy_redis_idle_expired
from scrapy_rep.storage.cluster import ClusterError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from scrapy.crawler import Crawler

    from scrapy_rep.crawl.request_codec import RequestCodec
    from scrapy_rep.storage.cluster import ClusterStore, Parked

__all__ = ["LEDGER_KEY_META", "StoreLedger", "open_cluster", "scrapy_redis_idle_expired"]

logger = logging.getLogger("scrapy_rep")

#: Requests written (or adopted) per store call; larger batches wait for the next call.
BATCH = 1000
#: Longest the close waits for a write already in flight (seconds).
CLOSE_WAIT = 5.0
#: How long a newly held request may wait before it is written to the store (seconds).
#: Most holds of a crawl are first contacts whose robots.txt arrives within this: they
#: are released and forgotten before the write, and cost the store nothing. A kill -9
#: loses at most this much of the newest holds, about what Scrapy's stock middleware
#: loses in flight (measured: recording every first-contact hold made a 2,000-origin
#: crawl on SQLite slower than the stock middleware).
PARK_GRACE = 1.0


def owner_id() -> str:
    """Host, pid and a random part: the pid lets tests and operators tell processes apart."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class StoreLedger:
    """``HeldLedger`` on a ``ClusterStore`` (see the module docstring)."""

    durable = True

    def __init__(
        self,
        crawler: Crawler,
        cluster: ClusterStore,
        *,
        heartbeat: float,
        store_degraded: Callable[[], bool] = lambda: False,
        codec: RequestCodec | None = None,
    ) -> None:
        self.crawler = crawler
        self._store_degraded = store_degraded
        self.cluster = cluster
        self.owner = owner_id()
        self.heartbeat = heartbeat
        assert crawler.stats is not None
        self.stats = crawler.stats
        self.entries = LedgerEntries(crawler, self.owner, codec)
        # key -> (entry, when recorded): in recording order, so the ripe ones (older
        # than PARK_GRACE) are at the front
        self._pending_add: dict[str, tuple[Parked, float]] = {}
        self._pending_remove: set[str] = set()
        self._stored: set[str] = set()  # written (or being written) under our owner id
        # key -> copies held in this process (recorded and not yet forgotten)
        self._holds: dict[str, int] = {}
        # Identities of the dont_filter requests this run has held or let through (the
        # dupefilter does not see those): an adopted copy of one is not crawled again.
        self._dont_filter_seen: set[str] = set()
        # The batch a flush took and handed to the worker thread, until that thread's
        # store call has run: a close() that gets the store first writes it instead.
        self._in_flight: tuple[list[Parked], list[str]] | None = None
        self._adopted: list[tuple[str, Request]] = []
        self._io_lock = threading.Lock()  # one store call at a time, close() included
        self._busy = False
        self._flush_queued = False
        self._failing = False
        self._io_failed = False
        self._closed = False
        self._loop: task.LoopingCall | None = None
        # A look for orphaned entries asked by an idle spider (look_when_idle):
        # None, or the callback to call when it lands; _looked: one found nothing.
        self._look: Callable[[], None] | None = None
        self._look_running = False
        self._looked = False
        crawler.signals.connect(self._start, signal=signals.spider_opened)

    # -- HeldLedger --------------------------------------------------------------------

    def record(self, origin: str, requests: Sequence[Request]) -> None:
        now = time.monotonic()
        for request in requests:
            key = self.entries.key(request)
            blob = self.entries.blob(request)
            if blob is None:
                continue
            # Copies with one identity (a dont_filter request yielded again, or the same
            # request re-parked after an adoption) share one entry, counted here so the
            # entry goes only with the last copy.
            self._holds[key] = self._holds.get(key, 0) + 1
            if request.dont_filter:
                self._dont_filter_seen.add(key)
            self._pending_remove.discard(key)
            if key not in self._stored and key not in self._pending_add:
                self._pending_add[key] = ((key, origin, blob), now)
        self._flush_soon()

    def forget(self, origin: str, requests: Sequence[Request]) -> None:
        for request in requests:
            # Popped: the request leaves with its meta as the spider made it.
            key = request.meta.pop(LEDGER_KEY_META, None)
            if not isinstance(key, str):
                continue  # never recorded here (or already forgotten)
            left = self._holds.pop(key, 0) - 1
            if left > 0:
                self._holds[key] = left  # another copy still waits here: the entry stays
                continue
            if self._pending_add.pop(key, None) is not None and key not in self._stored:
                continue  # never written: nothing to remove
            if key in self._stored:
                self._pending_remove.add(key)
        self._flush_soon()

    def adopt(self) -> Iterable[tuple[str, Request]]:
        """The caller holds each adopted request again (``record`` keeps its entry) or
        schedules it at once, in the same reactor turn: the entry of one not recorded
        again is removed by the next flush, or the next run would crawl it again. An
        adopted request this process already holds a copy of (the same identity, e.g.
        a start request that this run yielded again) is not handed out: the entry stays,
        as the one of the copy held here. Nor is a dont_filter request this run has
        already crawled (``passed``, or held and let go): the dupefilter cannot tell."""
        adopted, self._adopted = self._adopted, []
        handed: list[tuple[str, Request]] = []
        for origin, request in adopted:
            key = request.meta.pop(LEDGER_KEY_META, None)
            if isinstance(key, str) and (key in self._holds or key in self._dont_filter_seen):
                if key not in self._holds:
                    self._pending_remove.add(key)  # the copy held here is gone: so is this
                self.stats.inc_value(f"{STAT}adopted_duplicate")
                logger.debug("scrapy-rep: an adopted copy of a held request collapses: %s", request)
                continue
            if isinstance(key, str):
                self.entries.handed_out(request, key)
                self._pending_remove.add(key)
            handed.append((origin, request))
        self._flush_soon()
        return handed

    def passed(self, request: Request) -> None:
        """A dont_filter request went on to the scheduler without waiting: an adopted
        copy of it (the same start request, parked by an earlier run) is then not
        crawled a second time. The dupefilter does this for the other requests."""
        if request.dont_filter:
            self._dont_filter_seen.add(self.entries.identity(request))

    def look_when_idle(self, landed: Callable[[], None]) -> bool:
        """The spider has nothing else to do: look for requests parked by a dead
        process or an earlier run now, not at the next tick, and call ``landed`` when
        the look is done (adopted requests, if any, are then ready in ``adopt()``).
        True while the spider should stay open for it; False once a look found
        nothing (one look per idle spell, so an idle spider still closes)."""
        if self._closed:
            return False
        if self._adopted or self._look is not None:
            return True
        if self._looked:
            return False
        self._look = landed
        self._flush()  # (when a write is in flight, the look follows it)
        return True

    def close(self, handed_back: bool) -> int:
        """Write what is pending, then stop beating. Requests still parked stay for
        adoption unless they were handed back to a persistent scheduler. Returns how
        many of the requests still held here the store now keeps: those whose entry was
        written, not those whose write failed (what the log calls kept is true)."""
        if self._closed:
            return 0
        self._closed = True
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        add, remove = self._take_batch(limit=None, ripe_only=False)
        # The reactor waits for this: never longer than one store call's timeout (an
        # in-flight flush first), and not at all when the store was failing anyway.
        locked = self._io_lock.acquire(timeout=CLOSE_WAIT)
        # A flush whose worker thread had not reached the store yet leaves its batch
        # here (_io does not write after close): written first, in the order taken, or
        # its removals would be lost and the next run would crawl those requests again.
        # (Without the lock, the worker is writing it.)
        in_flight = None
        # A batch the worker thread is writing now (the lock not taken): whether it lands
        # is not known here, so its requests are not said to be kept.
        writing = None if locked else self._in_flight
        if locked:
            in_flight, self._in_flight = self._in_flight, None
        batches = ([in_flight] if in_flight is not None else []) + [(add, remove)]
        if locked and (self._failing or self._io_failed):
            self._io_lock.release()
            locked = False
        written = 0
        try:
            if not locked:
                raise ClusterError("the shared store was not answering")
            for batch_add, batch_remove in batches:
                self.cluster.park(self.owner, self.heartbeat, batch_add, batch_remove)
                written += 1
            self.cluster.retire(self.owner, keep=not handed_back)
        except ClusterError as exc:
            self._log_store_trouble(
                "scrapy-rep: could not update the parked requests in the shared store at "
                "close (%s): %d change(s) not written; what is parked is adopted once the "
                "heartbeat expires",
                exc,
                sum(len(a) + len(r) for a, r in batches[written:]),
            )
        finally:
            if locked:
                self._io_lock.release()
            self.cluster.close()
        if handed_back:
            return 0
        # In the store: every entry written before (_stored), less the adds that the
        # close could not write (each park is one transaction: all of it or none).
        unwritten = {key for batch_add, _ in batches[written:] for key, _, _ in batch_add}
        unwritten.update(self._pending_add)  # (put back by a failed flush, never written)
        if writing is not None:
            unwritten.update(key for key, _, _ in writing[0])
        return sum(
            copies
            for key, copies in self._holds.items()
            if key in self._stored and key not in unwritten
        )

    def _log_store_trouble(self, message: str, *args: Any) -> None:
        """WARNING, unless the robots.txt store already warned of the same outage (one
        outage, one WARNING); INFO then."""
        level = logging.INFO if self._store_degraded() else logging.WARNING
        logger.log(level, message, *args)

    # -- background I/O ----------------------------------------------------------------

    def _start(self, spider: Any = None) -> None:
        if self._loop is None and not self._closed:
            self._loop = task.LoopingCall(self._tick)
            self._loop.start(max(self.heartbeat / 3.0, 0.05), now=True)

    def _flush_soon(self) -> None:
        if self._busy or self._flush_queued or self._closed:
            return
        if not self._pending_add and not self._pending_remove:
            return
        from twisted.internet import reactor

        self._flush_queued = True
        clock: Any = reactor
        # Removals go at once; a hold once it is PARK_GRACE old (each hold's own age,
        # so one released within the grace never reaches the store).
        delay = 0.0
        if not self._pending_remove:
            oldest = next(iter(self._pending_add.values()))[1]
            delay = max(oldest + PARK_GRACE - time.monotonic(), 0.0) + 0.01
        clock.callLater(delay, self._flush)

    def _take_batch(
        self, limit: int | None, *, ripe_only: bool = True
    ) -> tuple[list[Parked], list[str]]:
        """The holds to write (at most ``limit``; with ``ripe_only``, those recorded at
        least PARK_GRACE ago) and every pending removal."""
        ripe_before = time.monotonic() - PARK_GRACE if ripe_only else float("inf")
        keys: list[str] = []
        for key, (_, recorded) in self._pending_add.items():
            if (limit is not None and len(keys) >= limit) or recorded > ripe_before:
                break
            keys.append(key)
        add = [self._pending_add.pop(key)[0] for key in keys]
        remove = list(self._pending_remove)
        self._pending_remove.clear()
        self._stored.update(key for key, _, _ in add)
        self._stored.difference_update(remove)
        if add:
            self.stats.inc_value(f"{STAT}parked", len(add))
        return add, remove

    def _flush(self, adopt: bool = False) -> None:
        self._flush_queued = False
        if self._busy or self._closed:
            return
        self._busy = True
        looking = self._look_running = self._look is not None
        add, remove = self._take_batch(BATCH)
        if not add and not remove and not adopt and not looking:
            self._busy = False  # nothing ripe yet: no store call
            self._flush_soon()
            return
        self._in_flight = (add, remove)
        deferred = threads.deferToThread(self._io, add, remove, adopt or looking)
        deferred.addCallbacks(self._written, self._write_failed, errbackArgs=(add, remove))

    def _tick(self) -> None:
        self._flush(adopt=True)

    def _io(self, add: list[Parked], remove: list[str], adopt: bool) -> list[Parked]:
        with self._io_lock:
            if self._closed:
                return []  # close() wrote this batch (_in_flight)
            try:
                self.cluster.park(self.owner, self.heartbeat, add, remove)
                adopted = self.cluster.adopt(self.owner, self.heartbeat, BATCH) if adopt else []
            except ClusterError:
                self._io_failed = True  # seen by close() before the reactor sees it
                raise
            finally:
                # written, or put back by _write_failed: close() must not write it
                self._in_flight = None
            self._io_failed = False
            return adopted

    def _written(self, adopted: list[Parked]) -> None:
        self._busy = False
        if self._failing:
            self._failing = False
            logger.info("scrapy-rep: the shared store takes parked requests again")
        for key, origin, blob in adopted:
            self._take_over(key, origin, blob)
        if adopted:
            logger.info(
                "scrapy-rep: adopted %d waiting request(s) that a stopped or dead process "
                "had parked in the shared store",
                len(adopted),
            )
        self._look_landed(found=bool(adopted))
        self._flush_soon()

    def _look_landed(self, found: bool) -> None:
        landed = self._look
        if landed is None:
            return
        if not self._look_running:
            self._flush()  # asked while another write was in flight: look now
            return
        self._look = None
        self._look_running = False
        self._looked = not found  # found some: the next idle spell looks again
        landed()

    def _write_failed(self, failure: Any, add: list[Parked], remove: list[str]) -> None:
        self._busy = False
        self.stats.inc_value(f"{STAT}store_errors")
        # Put the batch back under anything newer: a later forget wins over this add.
        ripe = time.monotonic() - PARK_GRACE
        for entry in add:
            if entry[0] not in self._pending_remove:
                self._pending_add.setdefault(entry[0], (entry, ripe))
        self._pending_remove.update(k for k in remove if k not in self._pending_add)
        if not self._failing:
            self._failing = True
            self._log_store_trouble(
                "scrapy-rep: cannot write parked requests to the shared store (%s); "
                "retrying every %.1f s (the requests still wait in this process)",
                failure.getErrorMessage(),
                self.heartbeat / 3.0,
            )
        self._look_landed(found=False)  # a store that fails keeps no idle spider open

    def _take_over(self, key: str, origin: str, blob: bytes) -> None:
        try:
            request = self.entries.request(blob)
        except Exception as exc:
            # Not ours to guess at (another spider version, a damaged entry): drop it
            # from the store with a reason rather than adopt it again forever.
            self.stats.inc_value(f"{STAT}undecodable")
            logger.warning(
                "scrapy-rep: dropped a parked request of %s from the shared store: it "
                "does not decode (%s: %s)",
                origin,
                type(exc).__name__,
                exc,
            )
            self._stored.add(key)
            self._pending_remove.add(key)
            return
        request.meta[LEDGER_KEY_META] = key  # (entries parked before the key was in meta)
        self._stored.add(key)
        self.stats.inc_value(f"{STAT}adopted")
        self._adopted.append((origin, request))
