"""Where robots.txt state lives between fetches: the ``RobotsStorage`` base class.

A backend never raises out of its methods: a failure is logged and treated as a miss, so
robots.txt is fetched again (RFC 9309 allows refetching; losing a request is not allowed).
Every backend is safe to call from any thread. Fetch leases, broken leases and the bound on
a stored record: docs/storage.md. The shared stores keep a record as zlib-compressed
``encode_record`` JSON (robots.txt compresses 3-5x; uncompressed, a ~2 KB body makes a
~2.9 KB row and SQLite fits one row per 4 KiB page).
"""

from __future__ import annotations

import abc
import contextlib
import logging
import os
import socket
import sys
import threading
import time
import uuid
import zlib
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from scrapy_rep.policy.config import RFC_MIN_PARSE_SIZE
from scrapy_rep.policy.records import OriginRecord, decode_record, encode_record
from scrapy_rep.storage.cluster import ClusterBackend

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from scrapy_rep.policy.config import Config
    from scrapy_rep.storage.cluster import SpiderCluster

logger = logging.getLogger(__name__)

# -- records as bytes (the shared stores) ------------------------------------------------

_ZLIB_LEVEL = 6  # as small as level 9 for robots.txt, and faster
# The JSON around the body: field names, timestamps, a last_outcome of a few words.
_RECORD_OVERHEAD = 16 * 1024
_warned_unreadable: set[str] = set()


def record_limit(max_size: int) -> int:
    """The largest encoded record a store holding bodies of at most ``max_size`` bytes
    (``REP_MAX_SIZE``) can have written: base64 grows the body by 4/3."""
    return (max_size + 2) // 3 * 4 + _RECORD_OVERHEAD


#: The limit for the default REP_MAX_SIZE (500 KiB body, ~700 KiB record).
MAX_DECODED = record_limit(RFC_MIN_PARSE_SIZE)


def pack_record(record: OriginRecord) -> bytes:
    return zlib.compress(encode_record(record), _ZLIB_LEVEL)


def inflate(data: bytes, limit: int = MAX_DECODED) -> bytes | None:
    """Decompress ``data`` unless it is corrupt, truncated or larger than ``limit``;
    zlib stops producing output at ``limit + 1`` bytes whatever the input says."""
    try:
        inflater = zlib.decompressobj()
        out = inflater.decompress(data, limit + 1)
    except zlib.error:
        return None
    if len(out) > limit or inflater.unconsumed_tail or not inflater.eof:
        return None  # too big, or truncated
    return out


def unpack_record(raw: object, limit: int = MAX_DECODED) -> OriginRecord | None:
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape")
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        return None
    data = bytes(raw)
    if data[:1] == b"{":  # JSON documents start with "{"; everything else must be zlib
        return decode_record(data) if len(data) <= limit else None
    inflated = inflate(data, limit)
    return None if inflated is None else decode_record(inflated)


def warn_unreadable(store: str) -> None:
    """Log ``store``'s first unreadable entry, so that an operator learns it holds junk."""
    if store not in _warned_unreadable:
        _warned_unreadable.add(store)
        logger.warning(
            "%s holds an unreadable robots.txt entry (corrupt, or written by "
            "another version); treating it as a miss and fetching robots.txt again. "
            "Further unreadable entries are not logged.",
            store,
        )


class WouldBlock(Exception):
    """A store cannot answer ``without_waiting``: call again in its worker thread."""


class RobotsStorage(ClusterBackend):
    """Per-origin records plus a single-flight fetch lease: the base class of every store.

    A backend implements the abstract methods. The others are working defaults that a
    backend overrides when it can do better (one round trip instead of two, an answer on
    the reactor thread, cluster primitives); callers call them directly, never probe.
    """

    #: True when other processes can see what this store holds (they can then also
    #: finish a fetch we are waiting on, so waiters must poll the store).
    shared: bool = False
    #: True when ``without_waiting`` can answer a call at once (memory, SQLite): the crawl
    #: then tries that on the reactor thread before handing the call to its worker thread.
    answers_without_waiting: bool = False

    @classmethod
    def from_config(cls, config: Config, settings: Mapping[str, Any] | None) -> RobotsStorage:
        """The store a ``REP_STORAGE`` class path names (the default takes no arguments)."""
        return cls()

    @abc.abstractmethod
    def get(self, origin: str) -> OriginRecord | None: ...

    @abc.abstractmethod
    def put(self, origin: str, record: OriginRecord) -> None: ...

    @abc.abstractmethod
    def acquire_lease(self, origin: str, holder: str, ttl: float) -> bool:
        """Try to become the one fetcher of ``origin`` for ``ttl`` seconds (wall clock)."""

    @abc.abstractmethod
    def release_lease(self, origin: str, holder: str) -> None: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def describe(self) -> str:
        """A human description for logs; never includes credentials."""

    # -- optional capabilities, with working defaults ----------------------------------

    def renew_lease(self, origin: str, holder: str, ttl: float) -> bool:
        """Extend our lease to now + ``ttl``; False when it is no longer ours. The
        default takes the lease again (which may also take one just released)."""
        return self.acquire_lease(origin, holder, ttl)

    def lease_holder(self, origin: str) -> str | None:
        """Who holds ``origin``'s lease now, when the store can tell (for log lines)."""
        return None

    def acquire_lease_and_get(
        self, origin: str, holder: str, ttl: float
    ) -> tuple[bool, OriginRecord | None]:
        """Take the fetch lease and, when the store is shared and the lease was won, read
        the record again (another process may have just stored it)."""
        if not self.acquire_lease(origin, holder, ttl):
            return False, None
        return True, self.get(origin) if self.shared else None

    def put_and_release_lease(self, origin: str, record: OriginRecord, holder: str) -> None:
        self.put(origin, record)
        self.release_lease(origin, holder)

    def without_waiting(self) -> contextlib.AbstractContextManager[None]:
        """This thread's calls answer now or raise ``WouldBlock`` (the default never can)."""
        raise WouldBlock

    def housekeeping_due(self) -> bool:
        """True when ``housekeeping`` (maintenance that may wait) should run in the worker."""
        return False

    def housekeeping(self) -> None:
        return

    @property
    def degraded(self) -> bool:
        """True while a process-local fallback answers for an unreachable store (Redis)."""
        return False

    def forget(self, origin: str) -> None:
        """Remove what the store holds for ``origin`` (``scrapy robots --forget``). The
        default stores an empty record, which a crawl reads as unknown."""
        if self.get(origin) is not None:
            self.put(origin, OriginRecord())

    def cluster(self, spider: str) -> SpiderCluster | None:
        """``spider``'s cluster primitives (storage/cluster.py), or None when the store is
        not shared across processes. Raises ``ClusterError`` when they cannot be opened."""
        return None


# -- lease rules shared by every backend ----------------------------------------------


def absurd_after(ttl: float) -> float:
    """Seconds left beyond which a lease is broken for a taker using ``ttl``. A lease never
    legitimately has more than ``ttl`` left (each renewal sets it to now + ttl); twice that
    (at least a minute) plus 5 s leaves room for clock skew between machines and for
    processes configured with a longer REP_LEASE_TTL."""
    return max(2 * ttl, 60.0) + 5.0


def lease_blocks(current: tuple[str, float] | None, holder: str, now: float, ttl: float) -> bool:
    """True when ``current`` (holder, expiry) is another holder's live lease, not broken by
    an expiry no renewal could have set nor by a dead holder."""
    if current is None or current[0] == holder or current[1] <= now:
        return False
    return not (current[1] - now > absurd_after(ttl) or holder_is_dead(current[0]))


def newer_records(
    mine: Mapping[str, OriginRecord], theirs: Iterable[object], limit: int
) -> dict[str, OriginRecord]:
    """The records of ``mine`` whose stored value (``theirs``, in the same order) is
    unreadable or comes from an earlier fetch: a store writing back what it decided during
    an outage keeps the newer of the two."""
    newer = {}
    for (origin, record), raw in zip(mine.items(), theirs, strict=True):
        stored = unpack_record(raw, limit)
        if stored is None or _fetch_order(record) > _fetch_order(stored):
            newer[origin] = record
    return newer


def _fetch_order(record: OriginRecord) -> tuple[float, float]:
    return record.fetched_at or -1.0, record.next_retry_at or -1.0


def _this_host() -> str:
    """This machine and pid namespace: pids compare only within it."""
    host = socket.gethostname().replace(":", "_") or "localhost"
    marks = []
    with contextlib.suppress(OSError), open("/proc/sys/kernel/random/boot_id") as fh:
        marks.append(fh.read().strip()[:8])
    with contextlib.suppress(OSError):
        marks.append(os.readlink("/proc/self/ns/pid").strip("pid:[]"))
    return f"{host}+{'.'.join(marks)}" if marks else host


def _start_ticks(pid: int) -> str:
    """When ``pid`` started (clock ticks since boot, Linux), or "" when unknown: tells a
    reused pid from the process that held the lease."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return ""
    # The command name (field 2) may hold spaces and parentheses: split after its end.
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[19].decode("ascii", "replace") if len(fields) > 19 else ""


_HOST = _this_host()


def new_holder() -> str:
    """A lease holder identity: ``host:pid:start:nonce``. The nonce tells apart two
    crawlers of one process; the rest lets this machine see that the holder is gone."""
    pid = os.getpid()
    return f"{_HOST}:{pid}:{_start_ticks(pid)}:{uuid.uuid4().hex[:12]}"


def holder_is_dead(holder: str) -> bool:
    """True only when ``holder`` is certainly a process of this machine that is gone
    (or whose pid now belongs to a younger process). Anything else, including holders
    of other machines and identities of another format, is presumed alive."""
    parts = holder.rsplit(":", 3)
    if len(parts) != 4 or parts[0] != _HOST or not parts[1].isdigit():
        return False
    pid, start = int(parts[1]), parts[2]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # PermissionError: alive, another user's
        pass
    now_start = _start_ticks(pid)
    return bool(start and now_start) and start != now_start


def describe_holder(holder: str) -> str:
    """``host:pid:start:nonce`` -> ``pid 123 on host`` (for log lines)."""
    parts = holder.rsplit(":", 3)
    if len(parts) != 4 or not parts[1].isdigit():
        return repr(holder[:80])
    where = "this machine" if parts[0] == _HOST else parts[0].partition("+")[0]
    return f"pid {parts[1]} on {where}"


class MemoryStorage(RobotsStorage):
    """Process-local and bounded: least-recently-used origins are evicted first."""

    answers_without_waiting = True  # a dict under a lock held only for a dict operation

    def __init__(self, max_origins: int = 100_000) -> None:
        self._max = max_origins
        self._records: OrderedDict[str, OriginRecord] = OrderedDict()
        self._leases: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._records)

    def get(self, origin: str) -> OriginRecord | None:
        with self._lock:
            record = self._records.get(origin)
            if record is not None:
                self._records.move_to_end(origin)
            return record

    def put(self, origin: str, record: OriginRecord) -> None:
        with self._lock:
            self._records[origin] = record
            self._records.move_to_end(origin)
            while len(self._records) > self._max:
                self._records.popitem(last=False)

    def acquire_lease(self, origin: str, holder: str, ttl: float) -> bool:
        # Monotonic: within one process no clock jump can make a lease absurd.
        now = time.monotonic()
        with self._lock:
            if lease_blocks(self._leases.get(origin), holder, now, ttl):
                return False
            self._leases[origin] = (holder, now + ttl)
            return True

    def renew_lease(self, origin: str, holder: str, ttl: float) -> bool:
        # Never takes a free lease again: a renewal that arrives after the release
        # cannot leave a stray lease behind.
        with self._lock:
            current = self._leases.get(origin)
            if current is None or current[0] != holder:
                return False
            self._leases[origin] = (holder, time.monotonic() + ttl)
            return True

    def lease_holder(self, origin: str) -> str | None:
        with self._lock:
            current = self._leases.get(origin)
            return current[0] if current is not None and current[1] > time.monotonic() else None

    def release_lease(self, origin: str, holder: str) -> None:
        with self._lock:
            current = self._leases.get(origin)
            if current is not None and current[0] == holder:
                del self._leases[origin]

    def without_waiting(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def close(self) -> None:
        with self._lock:
            self._leases.clear()

    def describe(self) -> str:
        return f"memory (at most {self._max} origins)"


#: How many kinds of error a store logs at WARNING; repeats and further kinds go to DEBUG.
_MAX_LOGGED_KINDS = 64


class LocalFallback(MemoryStorage):
    """A shared store's process-local stand-in while it cannot be written (SQLite: disk
    full, locked by another process; Redis: an outage): it answers for the leases, and
    for the records the store could not take (*unsynced*), until they are written back."""

    def __init__(self, max_origins: int) -> None:
        super().__init__(max_origins)
        self.unsynced: set[str] = set()
        #: After a failed write-back, the next is not tried before this (monotonic).
        self.next_write_back = 0.0
        self._writing_back = False
        self._logged_kinds: set[str] = set()

    def keep(self, origin: str, record: OriginRecord, *, stored: bool) -> None:
        """After the store was asked to write ``record``: when it could not, this copy
        answers until written back; when it could, an older copy here is updated too."""
        if not stored or len(self):
            self.put(origin, record)
        with self._lock:
            if stored:
                self.unsynced.discard(origin)
            else:
                self.unsynced.add(origin)

    def unsynced_copy(self, origin: str) -> OriginRecord | None:
        return self.get(origin) if origin in self.unsynced else None

    def write_back_due(self) -> bool:
        return bool(self.unsynced) and time.monotonic() >= self.next_write_back

    def write_back(
        self, write_newer: Callable[[dict[str, OriginRecord]], int], batch: int = sys.maxsize
    ) -> int:
        """Hand the unsynced records, ``batch`` at a time, to ``write_newer``, which writes
        the ``newer_records`` and says how many. What it raises leaves the rest unsynced.
        A written record's copy here goes, unless a later ``keep`` replaced it meanwhile."""
        with self._lock:
            if self._writing_back:  # another thread is at it
                return 0
            self._writing_back = True
            pending = list(self.unsynced)
        written = 0
        try:
            for start in range(0, len(pending), batch):
                origins = pending[start : start + batch]
                mine = {o: r for o in origins if (r := self.get(o)) is not None}
                written += write_newer(mine)
                with self._lock:
                    for origin in origins:  # not one that a keep() meanwhile made newer
                        if self._records.get(origin) is mine.get(origin):
                            self.unsynced.discard(origin)
                            self._records.pop(origin, None)
        finally:
            with self._lock:
                self._writing_back = False
        return written

    def first_error(self, kind: str) -> bool:
        """True the first time an error of ``kind`` is seen (logged at WARNING, repeats
        at DEBUG); bounded, so that errors of ever new text cannot grow memory."""
        with self._lock:
            if kind in self._logged_kinds or len(self._logged_kinds) >= _MAX_LOGGED_KINDS:
                return False
            self._logged_kinds.add(kind)
            return True


# -- REP_STORAGE classes written before RobotsStorage was a base class ------------------


@runtime_checkable
class StorageProtocol(Protocol):
    """A ``REP_STORAGE`` class of the older shape, without the ``RobotsStorage`` base
    class: ``ForeignStorage`` wraps it."""

    shared: bool

    def get(self, origin: str) -> OriginRecord | None: ...

    def put(self, origin: str, record: OriginRecord) -> None: ...

    def acquire_lease(self, origin: str, holder: str, ttl: float) -> bool: ...

    def release_lease(self, origin: str, holder: str) -> None: ...

    def close(self) -> None: ...

    def describe(self) -> str: ...


@runtime_checkable
class BuiltFromConfig(Protocol):
    """A ``REP_STORAGE`` class of the older shape that builds itself from the settings."""

    def from_config(self, config: Config, settings: Mapping[str, Any] | None) -> Any: ...


@runtime_checkable
class _Renews(Protocol):
    def renew_lease(self, origin: str, holder: str, ttl: float) -> bool: ...


@runtime_checkable
class _TellsHolder(Protocol):
    def lease_holder(self, origin: str) -> str | None: ...


@runtime_checkable
class _AcquiresAndGets(Protocol):
    def acquire_lease_and_get(
        self, origin: str, holder: str, ttl: float
    ) -> tuple[bool, OriginRecord | None]: ...


@runtime_checkable
class _PutsAndReleases(Protocol):
    def put_and_release_lease(self, origin: str, record: OriginRecord, holder: str) -> None: ...


@runtime_checkable
class _Degrades(Protocol):
    degraded: bool


@runtime_checkable
class _Forgets(Protocol):
    def forget(self, origin: str) -> None: ...


class ForeignStorage(RobotsStorage):
    """A store of the older shape (``StorageProtocol``) as a ``RobotsStorage``: its
    optional methods, where it has them, are used as before; the base class's defaults
    stand in for the others. What it has is looked at once, here."""

    def __init__(self, inner: StorageProtocol) -> None:
        self.inner = inner
        self.shared = bool(inner.shared)
        self._renews = inner if isinstance(inner, _Renews) else None
        self._tells_holder = inner if isinstance(inner, _TellsHolder) else None
        self._acquires_and_gets = inner if isinstance(inner, _AcquiresAndGets) else None
        self._puts_and_releases = inner if isinstance(inner, _PutsAndReleases) else None
        self._degrades = inner if isinstance(inner, _Degrades) else None
        self._forgets = inner if isinstance(inner, _Forgets) else None

    def get(self, origin: str) -> OriginRecord | None:
        return self.inner.get(origin)

    def put(self, origin: str, record: OriginRecord) -> None:
        self.inner.put(origin, record)

    def acquire_lease(self, origin: str, holder: str, ttl: float) -> bool:
        return self.inner.acquire_lease(origin, holder, ttl)

    def release_lease(self, origin: str, holder: str) -> None:
        self.inner.release_lease(origin, holder)

    def close(self) -> None:
        self.inner.close()

    def describe(self) -> str:
        return self.inner.describe()

    def renew_lease(self, origin: str, holder: str, ttl: float) -> bool:
        if self._renews is None:
            return super().renew_lease(origin, holder, ttl)
        return bool(self._renews.renew_lease(origin, holder, ttl))

    def lease_holder(self, origin: str) -> str | None:
        return None if self._tells_holder is None else self._tells_holder.lease_holder(origin)

    def acquire_lease_and_get(
        self, origin: str, holder: str, ttl: float
    ) -> tuple[bool, OriginRecord | None]:
        if self._acquires_and_gets is None:
            return super().acquire_lease_and_get(origin, holder, ttl)
        held, record = self._acquires_and_gets.acquire_lease_and_get(origin, holder, ttl)
        return bool(held), record

    def put_and_release_lease(self, origin: str, record: OriginRecord, holder: str) -> None:
        if self._puts_and_releases is None:
            super().put_and_release_lease(origin, record, holder)
        else:
            self._puts_and_releases.put_and_release_lease(origin, record, holder)

    @property
    def degraded(self) -> bool:
        return self._degrades is not None and bool(self._degrades.degraded)

    def forget(self, origin: str) -> None:
        if self._forgets is None:
            super().forget(origin)
        else:
            self._forgets.forget(origin)
