"""Durable waiting (``REP_DURABLE_WAITING``): held requests recorded outside this process.

``DurableWaiting``, the default, records nothing: held requests live in this process only.
``StoreWaiting`` records them in the shared store (Redis, or SQLite on one machine), so a
``kill -9`` loses none: another process, or the next run, adopts them (docs/cluster.md).

Unset means durable exactly when the crawl persists (``JOBDIR``, a persistent scheduler):
a crawl that starts afresh would crawl kept requests on top of the same pages it finds
again (docs/waiting.md, "When waiting requests outlive the run").
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import socket
import threading
import time
import uuid
import weakref
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from twisted.internet import task, threads

from scrapy_rep.crawl import compat
from scrapy_rep.crawl.request_codec import RequestCodec
from scrapy_rep.crawl.store_calls import installed_reactor
from scrapy_rep.policy.config import Config, SettingError, storage_spec
from scrapy_rep.storage.cluster import ClusterError, SpiderCluster
from scrapy_rep.storage.factory import create_storage

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from scrapy.crawler import Crawler

    from scrapy_rep.storage.base import RobotsStorage
    from scrapy_rep.storage.cluster import ClusterStore, Parked

logger = logging.getLogger(__name__)

STAT = "robotstxt/ledger/"
#: Private meta key: the request's key in the store, from ``record`` to ``forget``.
KEY_META = "_rep_ledger_key"
#: Meta keys scrapy-rep sets on a request while it waits or when it is released or
#: decided: not part of what the request is (see ``StoreWaiting.identity``).
_WHILE_WAITING_META = frozenset(
    {
        KEY_META,
        "rep_waited",  # crawl/origins.py WAITED_META_KEY
        "rep_scheduled",  # crawl/scheduling.py SCHEDULED_META_KEY
        "rep_turn",  # crawl/cluster_delay.py TURN_META_KEY
        "rep_turn_wait",  # crawl/cluster_delay.py WAIT_META_KEY
        "robotstxt_decision",  # crawl/decide.py DECISION_META_KEY
        "rep_usage",  # crawl/usage.py META_KEY
    }
)
#: Ceiling for one entry's bytes: far above a real request; a bigger one is not parked.
MAX_BLOB = 4 * 1024 * 1024
#: Requests written (or adopted) per store call; larger batches wait for the next call.
BATCH = 1000
#: Longest the close waits for a write already in flight (seconds).
CLOSE_WAIT = 5.0
#: How long a new hold waits before it is written (seconds): most are first contacts whose
#: robots.txt arrives within this, released before the write at no cost to the store. A
#: kill -9 loses at most this much of the newest holds, about what the stock middleware
#: loses in flight (writing every hold made a 2,000-origin SQLite crawl slower than it).
PARK_GRACE = 1.0


class DurableWaiting:
    """The in-process default: records nothing; held requests live in this process only.

    ``records``: ``record``/``forget`` do something (else the room skips them). ``durable``:
    the records outlive this process, so requests held at close are neither dropped nor
    forgotten (another process, or the next run, adopts them)."""

    durable = False
    records = False

    def record(self, origin: str, requests: Sequence[Request]) -> None:
        """``requests`` of ``origin`` start waiting in this process."""

    def forget(self, origin: str, requests: Sequence[Request]) -> None:
        """``requests`` left the room: released, dropped or handed back."""

    def adopt(self) -> Iterable[tuple[str, Request]]:
        """Requests orphaned by dead processes (polled), to hold in this process."""
        return ()

    def passed(self, request: Request) -> bool:
        """A dont_filter request the spider scheduled (the dupefilter lets it through). True:
        this run already adopted a copy that an earlier run parked, so this one is dropped."""
        return False

    def look_when_idle(self, admit: Callable[[], None]) -> bool:
        """An idle spider looks for parked requests now. True: keep the spider open;
        ``admit`` takes what was adopted when the look lands."""
        return False

    def close(self, handed_back: bool) -> int | None:
        """``handed_back``: the room's requests went to a persistent scheduler. Returns how
        many requests still held here are kept outside this process (None: all)."""
        return 0


def crawl_persistence(settings: Any) -> str | None:
    """Why this crawl outlives a run, or None: ``JOBDIR``, or a scheduler other than Scrapy's
    own with ``SCHEDULER_PERSIST`` (scrapy-redis reads it; Scrapy's own does not)."""
    if settings.get("JOBDIR"):
        return "JOBDIR is set"
    scheduler = settings.get("SCHEDULER")
    if not isinstance(scheduler, str):
        scheduler = f"{getattr(scheduler, '__module__', '')}.{getattr(scheduler, '__name__', '')}"
    persist = settings.get("SCHEDULER_PERSIST")
    if isinstance(persist, str):
        persist = persist.strip().lower() in ("1", "true", "yes", "on")
    if persist and not scheduler.startswith("scrapy.core."):
        return "the scheduler persists (SCHEDULER_PERSIST)"
    return None


def durability_choice(config: Config, settings: Any) -> tuple[bool, str]:
    """Whether waiting requests are to be recorded in the shared store, and why."""
    if config.durable_waiting is not None:
        return config.durable_waiting, f"REP_DURABLE_WAITING = {config.durable_waiting}"
    persists = crawl_persistence(settings)
    if persists is not None:
        return True, persists
    return False, "the crawl does not persist: no JOBDIR, no persistent scheduler"


def make_durable_waiting(
    crawler: Crawler, config: Config, storage: Any, codec: RequestCodec | None = None
) -> DurableWaiting:
    """A ``StoreWaiting`` when waiting requests are to outlive the run and the store can
    hold them, else the default. ``codec``: the room's, so a request is serialised once."""
    if not durability_choice(config, crawler.settings)[0]:
        return DurableWaiting()
    return make_store_waiting(crawler, config, storage, codec) or DurableWaiting()


def make_store_waiting(
    crawler: Crawler,
    config: Config,
    storage: RobotsStorage | None = None,
    codec: RequestCodec | None = None,
) -> StoreWaiting | None:
    """A StoreWaiting when ``REP_STORAGE`` is shared across processes (Redis, SQLite) and
    ``REP_DURABLE_WAITING`` is not False, else None (a store that cannot open is logged)."""
    if config.durable_waiting is False:
        return None
    try:
        # (a caller without the crawl's store gets a store of its own)
        spider = crawler.spidercls.name
        cluster = open_cluster(config, spider) if storage is None else storage.cluster(spider)
    except ClusterError as exc:
        logger.warning(
            "waiting requests are kept in this process only: the shared store "
            "cannot hold them (%s)",
            exc,
        )
        return None
    if cluster is None:
        return None
    # The robots.txt store (Redis) says when it is in an outage it already warned of.
    return StoreWaiting(
        crawler,
        cluster,
        heartbeat=config.cluster_heartbeat,
        store_degraded=lambda: storage is not None and storage.degraded,
        codec=codec,
    )


def open_cluster(storage: str | Config, spider: str) -> ClusterStore | None:
    """``spider``'s cluster primitives on a store of their own (closed with them), from a
    ``Config`` or a ``REP_STORAGE`` spelling, for tools, tests and benchmarks. None when the
    store is not shared across processes; ClusterError when it cannot be opened."""
    try:
        config = storage if isinstance(storage, Config) else Config(storage=storage_spec(storage))
        store = create_storage(config)
    except SettingError as exc:  # (its message never shows a Redis password)
        raise ClusterError(str(exc)) from None
    cluster = None
    try:
        cluster = store.cluster(spider)
    finally:
        if cluster is None:  # not shared, or ClusterError
            store.close()
    return None if cluster is None else SpiderCluster(store, spider, owns_store=True)


def waiting_fate_line(config: Config, settings: Any, keeper: DurableWaiting) -> str:
    """The start-up INFO line: what becomes of waiting requests when the crawl stops, and
    why (so a user knows before the first stop)."""
    wanted, why = durability_choice(config, settings)
    persists = crawl_persistence(settings)
    head = "requests waiting on robots.txt"
    if keeper.durable:
        if persists is not None:
            return (
                f"{head} outlive this run ({why}): a graceful stop hands them back to the "
                "scheduler, and the shared store keeps them against a kill -9"
            )
        return (
            f"{head} outlive this run ({why}): they are kept in the shared store, and "
            "another process or the next run adopts them"
        )
    if wanted:
        why += ", but REP_STORAGE is not a store shared across processes (or could not be opened)"
    if persists is not None:
        return (
            f"{head} outlive this run ({persists}): a graceful stop hands them back to the "
            f"scheduler; they are not recorded in the store ({why}), so a kill -9 loses them"
        )
    return (
        f"{head} when the crawl stops are dropped, with one summary line and "
        f"robotstxt/dropped_at_close ({why}); set JOBDIR, or REP_DURABLE_WAITING = True, "
        "to keep them"
    )


def scrapy_redis_idle_expired(spider: Any) -> bool:
    """Whether a scrapy-redis spider has been idle for ``MAX_IDLE_TIME_BEFORE_CLOSE``, so its
    own ``spider_idle`` receiver stops raising ``DontCloseSpider`` (scrapy-redis 0.9: idle
    time counts from when its start-URL key last had data)."""
    max_idle = getattr(spider, "max_idle_time", None)
    since = getattr(spider, "spider_idle_start_time", None)
    if not isinstance(max_idle, int) or max_idle <= 0 or not isinstance(since, int):
        return False
    return int(time.time()) - since >= max_idle


class StoreWaiting(DurableWaiting):
    """Held requests recorded in a shared store (docs/behaviour.md, "nothing lost").

    * ``record``/``forget`` only touch buffers; a background flush writes them in batches
      (group commit), so a hold costs a share of one round trip, and a request released
      before its batch went out costs the store nothing.
    * An entry is (key, origin, blob): the blob is ``RequestCodec``'s bytes (shared with
      the room); the key (``identity``) is stable across runs and processes, so a start
      request yielded again is the entry an earlier run parked, and kept in meta
      (``KEY_META``), so a request held again after adoption keeps its entry. An
      unserialisable request stays in the room only (WARNING once, counted).
    * Every flush beats the heartbeat; a tick every third of ``REP_CLUSTER_HEARTBEAT`` also
      adopts dead owners' entries, which ``adopt()`` hands to the room.

    All store I/O runs in a thread, one call at a time, never on the reactor thread.
    """

    durable = True
    records = True

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
        # Host, pid and a random part: the pid lets tests and operators tell processes apart.
        self.owner = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.heartbeat = heartbeat
        self.codec = codec or RequestCodec(crawler)
        assert crawler.stats is not None
        self.stats = crawler.stats
        # key -> (entry, when recorded): in recording order, so the ripe ones are in front
        self._pending_add: dict[str, tuple[Parked, float]] = {}
        self._pending_remove: set[str] = set()
        self._stored: set[str] = set()  # written (or being written) under our owner id
        # key -> copies held in this process (recorded and not yet forgotten)
        self._holds: dict[str, int] = {}
        # dont_filter requests this run held or let through: an adopted copy is not crawled.
        self._dont_filter_seen: set[str] = set()
        # dont_filter requests adopted this run, until the spider yields them again.
        self._adopted_dont_filter: set[str] = set()
        # Adopted requests just handed out, until each is recorded again or gone.
        self._adopted_keys: weakref.WeakKeyDictionary[Request, str] = weakref.WeakKeyDictionary()
        self._warned_unserializable = False
        # The batch handed to the worker thread until its store call ran: a close() that
        # gets the store first writes it instead.
        self._in_flight: tuple[list[Parked], list[str]] | None = None
        self._adopted: list[tuple[str, str, Request]] = []  # (origin, key, request)
        self._io_lock = threading.Lock()  # one store call at a time, close() included
        self._busy = False
        self._flush_queued = False
        self._failing = False
        self._io_failed = False
        self._closed = False
        self._loop: task.LoopingCall | None = None
        # look_when_idle: its ``admit``, for when the look lands; _looked: one found nothing.
        self._look: Callable[[], None] | None = None
        self._look_running = False
        self._looked = False
        crawler.signals.connect(self._start, signal=signals.spider_opened)

    # -- what the room tells it ----------------------------------------------------------

    def record(self, origin: str, requests: Sequence[Request]) -> None:
        now = time.monotonic()
        for request in requests:
            key = self.key(request)
            blob = self.blob(request)
            if blob is None:
                continue
            # Copies with one identity (a dont_filter request yielded again, a request
            # re-parked after adoption) share one entry, which goes with the last copy.
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
            key = request.meta.pop(KEY_META, None)
            if not isinstance(key, str):
                continue  # never recorded here (or already forgotten)
            left = self._holds.pop(key, 0) - 1
            if left > 0:
                self._holds[key] = left  # another copy still waits here: the entry stays
                continue
            self._pending_add.pop(key, None)  # not written yet: nothing to remove
            if key in self._stored:
                self._pending_remove.add(key)
        self._flush_soon()

    def adopt(self) -> Iterable[tuple[str, Request]]:
        """The caller holds each adopted request again (``record`` keeps its entry) or
        schedules it in the same reactor turn: the next flush removes the entry of one not
        recorded again, or the next run would crawl it again. Not handed out: a copy of a
        request held here (the entry stays, as that copy's), or a dont_filter request this
        run already crawled (``passed``, or held and let go): the dupefilter cannot tell."""
        adopted, self._adopted = self._adopted, []
        handed: list[tuple[str, Request]] = []
        for origin, key, request in adopted:
            if key in self._holds or key in self._dont_filter_seen:
                if key not in self._holds:
                    self._pending_remove.add(key)  # the copy held here is gone: so is this
                self.stats.inc_value(f"{STAT}adopted_duplicate")
                logger.debug("an adopted copy of a held request collapses: %s", request)
                continue
            # Recorded again, it gets the same key.
            self._adopted_keys[request] = key
            self._pending_remove.add(key)
            if request.dont_filter:
                self._adopted_dont_filter.add(key)
            handed.append((origin, request))
        self._flush_soon()
        return handed

    def passed(self, request: Request) -> bool:
        # Whichever copy comes first is crawled, as the dupefilter does for the other
        # requests: the spider's (then adopt() passes over the parked one) or the adopted.
        key = self.identity(request)
        if key in self._adopted_dont_filter:
            self._adopted_dont_filter.discard(key)
            self.stats.inc_value(f"{STAT}adopted_duplicate")
            return True
        self._dont_filter_seen.add(key)
        return False

    def look_when_idle(self, admit: Callable[[], None]) -> bool:
        """Looks now, not at the next tick; when it lands, ``admit`` takes what was adopted
        and the engine is woken (else it waits for its next heartbeat). False once a look
        found nothing: one look per idle spell, so an idle spider still closes."""
        if self._closed:
            return False
        if self._adopted or self._look is not None:
            return True
        if self._looked:
            return False
        self._look = admit
        self._flush()  # (when a write is in flight, the look follows it)
        return True

    def close(self, handed_back: bool) -> int:
        """Write what is pending, then stop beating; parked requests stay for adoption unless
        handed back. Returns how many held requests the store now keeps (written ones only,
        so what the log calls kept is true)."""
        if self._closed:
            return 0
        self._closed = True
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        add, remove = self._take_batch(everything=True)
        # The reactor waits for this: at most one store call's timeout, and not at all
        # when the store was failing anyway.
        locked = self._io_lock.acquire(timeout=CLOSE_WAIT)
        # A flush whose worker had not reached the store leaves its batch in _in_flight (_io
        # does not write after close): written first, or its removals would be lost and the
        # next run would crawl those requests again. Without the lock the worker is
        # writing it now, so whether it lands is unknown: not said to be kept.
        in_flight = [self._in_flight] if self._in_flight is not None else []
        batches = (in_flight if locked else []) + [(add, remove)]
        writing = [] if locked else in_flight
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
                "could not update the parked requests in the shared store at "
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
        # In the store: _stored, less the adds the close could not write (each park is
        # one transaction: all or none).
        unwritten = {key for batch_add, _ in batches[written:] + writing for key, _, _ in batch_add}
        unwritten.update(self._pending_add)  # (put back by a failed flush, never written)
        return sum(
            copies
            for key, copies in self._holds.items()
            if key in self._stored and key not in unwritten
        )

    # -- entries -------------------------------------------------------------------------

    def key(self, request: Request) -> str:
        """The request's key, made once and kept in its meta (see the class docstring)."""
        meta = request.meta
        key = meta.get(KEY_META)
        if isinstance(key, str):
            return key
        key = self._adopted_keys.pop(request, None) or self.identity(request)
        meta[KEY_META] = key
        return key

    def identity(self, request: Request) -> str:
        """The key ``request`` would get, computed afresh (its meta is not touched): its
        fingerprint, plus for a dont_filter request (unseen by the dupefilter) a digest of
        what it is (its fields, meta less what scrapy-rep adds while it waits), equal for
        the same request yielded twice, e.g. by two runs (an unserialisable one, never
        parked, gets the digest of nothing)."""
        fingerprinter: Any = self.crawler.request_fingerprinter
        # (the dupefilter computed it a moment ago for this object: Scrapy caches it)
        key: str = fingerprinter.fingerprint(request).hex()
        if not request.dont_filter:
            return key
        try:
            data = dict(self.codec.to_dict(request))
            meta = data.get("meta")
            if meta:
                data["meta"] = {k: v for k, v in meta.items() if k not in _WHILE_WAITING_META}
            own = pickle.dumps(data, protocol=4)
        except Exception:  # ValueError (callback), PicklingError, TypeError (meta)
            own = b""
        return f"{key}.{hashlib.sha256(own).hexdigest()[:24]}"

    def blob(self, request: Request) -> bytes | None:
        """The request's bytes, or None (logged and counted) when it cannot be parked (its
        callback is kept by name, so it must be a spider method)."""
        try:
            blob = self.codec.encode(request)
        except Exception as exc:  # ValueError (callback), PicklingError, TypeError (meta)
            self._unparkable(request, f"{type(exc).__name__}: {exc}")
            return None
        if len(blob) > MAX_BLOB:
            self._unparkable(request, f"{len(blob)} bytes serialised")
            return None
        return blob

    def _unparkable(self, request: Request, why: str) -> None:
        self.stats.inc_value(f"{STAT}unserializable")
        if not self._warned_unserializable:
            self._warned_unserializable = True
            logger.warning(
                "%s cannot be kept in the shared store (%s): it waits in this "
                "process only, and a kill -9 would lose it (stats: %sunserializable; "
                "further ones at DEBUG)",
                request,
                why,
                STAT,
            )
        else:
            logger.debug("not parked in the shared store (%s): %s", why, request)

    def _log_store_trouble(self, message: str, *args: Any) -> None:
        """WARNING, or INFO when the robots.txt store already warned of the same outage."""
        level = logging.INFO if self._store_degraded() else logging.WARNING
        logger.log(level, message, *args)

    # -- background I/O ------------------------------------------------------------------

    def _start(self, spider: Any = None) -> None:
        if self._loop is None and not self._closed:
            self._loop = task.LoopingCall(self._flush, adopt=True)
            self._loop.start(max(self.heartbeat / 3.0, 0.05), now=True)

    def _flush_soon(self) -> None:
        nothing = not self._pending_add and not self._pending_remove
        if nothing or self._busy or self._flush_queued or self._closed:
            return
        self._flush_queued = True
        # Removals go at once, a hold once it is PARK_GRACE old (its own age).
        delay = 0.0
        if not self._pending_remove:
            oldest = next(iter(self._pending_add.values()))[1]
            delay = max(oldest + PARK_GRACE - time.monotonic(), 0.0) + 0.01
        installed_reactor().callLater(delay, self._flush)

    def _take_batch(self, everything: bool = False) -> tuple[list[Parked], list[str]]:
        """Every pending removal, and the holds to write: all of them, or at most BATCH of
        those recorded at least PARK_GRACE ago."""
        ripe_before = float("inf") if everything else time.monotonic() - PARK_GRACE
        keys: list[str] = []
        for key, (_, recorded) in self._pending_add.items():
            if (not everything and len(keys) >= BATCH) or recorded > ripe_before:
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
        looking = self._look_running = self._look is not None
        add, remove = self._take_batch()
        if not add and not remove and not adopt and not looking:
            self._flush_soon()  # nothing ripe yet: no store call
            return
        self._busy = True
        self._in_flight = (add, remove)
        deferred = threads.deferToThread(self._io, add, remove, adopt or looking)
        deferred.addCallbacks(self._written, self._write_failed, errbackArgs=(add, remove))

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
            logger.info("the shared store takes parked requests again")
        for key, origin, blob in adopted:
            self._take_over(key, origin, blob)
        if adopted:
            logger.info(
                "adopted %d waiting request(s) that a stopped or dead process "
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
        compat.wake_engine(self.crawler)

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
                "cannot write parked requests to the shared store (%s); "
                "retrying every %.1f s (the requests still wait in this process)",
                failure.getErrorMessage(),
                self.heartbeat / 3.0,
            )
        self._look_landed(found=False)  # a store that fails keeps no idle spider open

    def _take_over(self, key: str, origin: str, blob: bytes) -> None:
        try:
            # our own entries, read as Scrapy's disk queues read theirs
            request = self.codec.decode(blob)
        except Exception as exc:
            # Another spider version, a damaged entry: dropped with a reason rather than
            # adopted again forever.
            self.stats.inc_value(f"{STAT}undecodable")
            logger.warning(
                "dropped a parked request of %s from the shared store: it does not decode (%s: %s)",
                origin,
                type(exc).__name__,
                exc,
            )
            self._stored.add(key)
            self._pending_remove.add(key)
            return
        # Handed out without its key in meta: ``key()`` finds it in _adopted_keys.
        request.meta.pop(KEY_META, None)
        self._stored.add(key)
        self.stats.inc_value(f"{STAT}adopted")
        self._adopted.append((origin, key, request))
