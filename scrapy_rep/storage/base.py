"""Where robots.txt state lives between fetches, behind one small interface.

The middleware never touches a backend directly. ``REP_STORAGE`` picks one:
``sqlite`` (default, a file in the project data dir), ``sqlite:PATH``, ``memory``,
``redis://...`` / ``rediss://...``, or the import path of a class with this interface.

A backend must never raise out of its methods: a backend that fails is logged by the
backend and treated as a miss, so robots.txt is fetched again (RFC 9309 allows
refetching; losing a request is not allowed). Every backend is safe to call from any
thread, concurrently: the crawl runs store calls in a worker thread.

Fetch leases (docs/cluster.md) are short and renewed while the fetch runs, so a
holder that dies blocks an origin for at most one lease length. A lease is *broken*,
and taken over at once, when it claims to last longer than any renewal could make it
(``lease_is_absurd``: a clock jump, a Redis key without TTL), or when its holder is a
process of this machine that no longer runs (``holder_is_dead``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
from collections import OrderedDict
from typing import Protocol, runtime_checkable

from scrapy_rep.policy.records import OriginRecord


class WouldBlock(Exception):
    """Raised by a store asked to answer without waiting (``SqliteStorage.
    without_waiting``) when it cannot: the caller makes the call again where waiting
    is allowed (the store's worker thread)."""


@runtime_checkable
class RobotsStorage(Protocol):
    """Per-origin records plus a single-flight fetch lease."""

    #: True when other processes can see what this store holds (they can then also
    #: finish a fetch we are waiting on, so waiters must poll the store).
    shared: bool

    def get(self, origin: str) -> OriginRecord | None: ...

    def put(self, origin: str, record: OriginRecord) -> None: ...

    def acquire_lease(self, origin: str, holder: str, ttl: float) -> bool:
        """Try to become the one fetcher of ``origin`` for ``ttl`` seconds (wall clock)."""
        ...

    def release_lease(self, origin: str, holder: str) -> None: ...

    def close(self) -> None: ...

    def describe(self) -> str:
        """A human description for logs; never includes credentials."""
        ...


# -- lease rules shared by every backend ----------------------------------------------

#: A lease never legitimately has more than ``ttl`` left (each renewal sets it to now +
#: ttl). Twice that (at least a minute) plus a few seconds leaves room for clock skew
#: between machines and for processes configured with a longer REP_LEASE_TTL.
LEASE_SKEW = 5.0
_LEASE_FLOOR = 60.0


def absurd_after(ttl: float) -> float:
    """Seconds left beyond which a lease is broken for a taker using ``ttl``."""
    return max(2 * ttl, _LEASE_FLOOR) + LEASE_SKEW


def lease_is_absurd(remaining: float, ttl: float) -> bool:
    """True when a lease claims an expiry no renewal could have set (broken)."""
    return remaining > absurd_after(ttl)


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
    crawlers of one process; host, pid and start let a later process on this machine
    see that the holder is gone (``holder_is_dead``)."""
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
    if pid == os.getpid():
        return bool(start) and start != _start_ticks(pid)
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
    host = parts[0].partition("+")[0]
    where = "this machine" if parts[0] == _HOST else host
    return f"pid {parts[1]} on {where}"


class MemoryStorage:
    """Process-local and bounded: least-recently-used origins are evicted first."""

    shared = False

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

    def discard(self, origin: str) -> None:
        with self._lock:
            self._records.pop(origin, None)

    def acquire_lease(self, origin: str, holder: str, ttl: float) -> bool:
        # Monotonic: within one process no clock jump can make a lease absurd.
        now = time.monotonic()
        with self._lock:
            current = self._leases.get(origin)
            if current is not None and current[0] != holder and current[1] > now:
                broken = lease_is_absurd(current[1] - now, ttl) or holder_is_dead(current[0])
                if not broken:
                    return False
            self._leases[origin] = (holder, now + ttl)
            return True

    def renew_lease(self, origin: str, holder: str, ttl: float) -> bool:
        """Extend our lease to now + ``ttl``; False when it is no longer ours (taken
        over, or released: a renewal never takes a free lease again, so one that
        arrives after the release cannot leave a stray lease behind)."""
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

    def close(self) -> None:
        with self._lock:
            self._leases.clear()

    def describe(self) -> str:
        return f"memory (at most {self._max} origins)"


def renew_lease(storage: RobotsStorage, origin: str, holder: str, ttl: float) -> bool:
    """``storage.renew_lease``; for a custom store without it, taking the lease again
    (every backend lets the holder re-acquire its own lease; but that may also take a
    lease that was just released)."""
    renew = getattr(storage, "renew_lease", None)
    if renew is not None:
        return bool(renew(origin, holder, ttl))
    return storage.acquire_lease(origin, holder, ttl)


def lease_holder(storage: RobotsStorage, origin: str) -> str | None:
    """Who holds ``origin``'s lease now, when the store can tell (for log lines)."""
    ask = getattr(storage, "lease_holder", None)
    return None if ask is None else ask(origin)


def acquire_and_read(
    storage: RobotsStorage, origin: str, holder: str, ttl: float
) -> tuple[bool, OriginRecord | None]:
    """Take the fetch lease and, when the store is shared and the lease was won, read
    the record again (another process may have just stored it).

    A store may do both in one round trip with ``acquire_lease_and_get`` (Redis
    pipelines them); any other store gets the two calls.
    """
    combined = getattr(storage, "acquire_lease_and_get", None)
    if combined is not None:
        held, record = combined(origin, holder, ttl)
        return bool(held), record
    if not storage.acquire_lease(origin, holder, ttl):
        return False, None
    return True, storage.get(origin) if storage.shared else None


def put_and_release(storage: RobotsStorage, origin: str, record: OriginRecord, holder: str) -> None:
    """Store a fetch's record and give up the lease: one round trip when the store has
    ``put_and_release_lease`` (Redis pipelines them), else the two calls."""
    combined = getattr(storage, "put_and_release_lease", None)
    if combined is not None:
        combined(origin, record, holder)
        return
    storage.put(origin, record)
    storage.release_lease(origin, holder)
