"""Where robots.txt state lives between fetches, behind one small interface.

The middleware never touches a backend directly. ``REP_STORAGE`` picks one:
``sqlite`` (default, a file in the project data dir), ``sqlite:PATH``, ``memory``,
``redis://...`` / ``rediss://...``, or the import path of a class with this interface.

A backend must never raise out of ``get``/``put``: a backend that fails is logged by
the backend and treated as a miss, so robots.txt is fetched again (RFC 9309 allows
refetching; losing a request is not allowed).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from scrapy_rep.policy.records import OriginRecord

if TYPE_CHECKING:
    pass


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

    def acquire_lease(self, origin: str, holder: str, ttl: float) -> bool:
        now = time.monotonic()
        with self._lock:
            current = self._leases.get(origin)
            if current is not None and current[0] != holder and current[1] > now:
                return False
            self._leases[origin] = (holder, now + ttl)
            return True

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
