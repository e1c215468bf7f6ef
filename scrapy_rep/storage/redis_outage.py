"""The Redis store's outage handling: every Redis call, and the fallback when it fails.

``RedisStorage`` (``redis_store.py``) builds on ``RedisConnection``: each of its Redis
operations goes through ``_call``, which returns ``DOWN`` when the in-process
``MemoryStorage`` fallback must answer instead. A stalled or blackholed Redis costs a
caller about a second (the client's socket timeout; no client-side retries), then the
store switches to the fallback, logs ONE warning, and probes Redis again at most every
``reconnect_interval`` seconds. What it learns meanwhile is written back once Redis
answers again (unless Redis holds a newer record by then).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from scrapy_rep.policy.records import OriginRecord
from scrapy_rep.storage import redis_scripts as lua
from scrapy_rep.storage.base import MemoryStorage
from scrapy_rep.storage.codec import MAX_DECODED, pack_record, unpack_record
from scrapy_rep.storage.redis_url import mask_url, scrub, secrets_of

if TYPE_CHECKING:
    import redis

# The Redis store logs under one name, whichever of its modules speaks: LOG filters and
# users' logging configuration name "scrapy_rep.storage.redis_store".
logger = logging.getLogger("scrapy_rep.storage.redis_store")

KEY_PREFIX = "scrapy-rep:v1:"
_T = TypeVar("_T")
DOWN = object()  # "Redis unavailable, use the fallback"
_MAX_LOGGED_KINDS = 64
_WRITE_BACK_BATCH = 200


class RedisConnection:
    """A Redis client with its Lua scripts, the outage state, and the in-process
    fallback that answers during outages."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        url: str = "redis://",
        record_ttl: float = 31 * 86_400.0,
        reconnect_interval: float = 5.0,
        fallback_max_origins: int = 100_000,
        record_limit: int = MAX_DECODED,
    ) -> None:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import RedisError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        self._masked_url = mask_url(url)
        self._secrets = secrets_of(url)
        self._client = client
        self._record_ttl_ms = max(1000, int(record_ttl * 1000))
        self._record_limit = record_limit
        self._reconnect_interval = reconnect_interval
        self._fallback = MemoryStorage(fallback_max_origins)
        self._scripts = {name: client.register_script(body) for name, body in lua.SCRIPTS.items()}
        self._timeout_errors: tuple[type[BaseException], ...] = (RedisTimeoutError, TimeoutError)
        self._outage_errors: tuple[type[BaseException], ...] = (
            RedisConnectionError,
            RedisTimeoutError,
            OSError,
        )
        self._redis_error = RedisError
        self._lock = threading.Lock()  # guards the outage state below
        self._down = False
        self._next_probe = 0.0
        self._logged: set[str] = set()
        # Origins learned while Redis could not take them: written back when it can.
        self._unsynced: set[str] = set()
        self._writing_back = False
        self._next_write_back = 0.0
        self._closed = False

    # -- keys -------------------------------------------------------------------------

    @staticmethod
    def origin_key(origin: str) -> str:
        return f"{KEY_PREFIX}origin:{origin}"

    @staticmethod
    def lease_key(origin: str) -> str:
        return f"{KEY_PREFIX}lease:{origin}"

    # -- outage handling ----------------------------------------------------------

    @property
    def degraded(self) -> bool:
        """True while Redis is unreachable and the in-process fallback answers."""
        return self._down

    def _scrub(self, exc: BaseException) -> str:
        return scrub(f"{type(exc).__name__}: {exc}", self._secrets)

    def _call(self, operation: Callable[[], _T]) -> _T | object:
        """Run one Redis operation, or return ``DOWN`` when the fallback must answer."""
        if self._closed:
            return DOWN
        with self._lock:
            probing = self._down
            if probing and time.monotonic() < self._next_probe:
                return DOWN
        try:
            try:
                result = operation()
            except self._timeout_errors:
                raise  # a stalled Redis: a second try would only double the wait
            except self._outage_errors:
                if probing:
                    raise
                # A pooled socket may have died while idle (server restart, idle
                # timeout); redis-py dropped it, so one immediate retry reconnects.
                result = operation()
        except self._outage_errors as exc:
            self._went_down(exc)
            return DOWN
        except self._redis_error as exc:
            # Reachable but refused (OOM, READONLY replica, a key of the wrong type):
            # this one call falls back, Redis stays in use.
            self._back_up(probing)
            self._log_once(exc)
            return DOWN
        self._back_up(probing)
        return result

    def _went_down(self, exc: BaseException) -> None:
        with self._lock:
            self._next_probe = time.monotonic() + self._reconnect_interval
            first = not self._down
            self._down = True
        if first:
            logger.warning(
                "scrapy-rep: robots.txt store redis %s is unreachable (%s); continuing "
                "with a process-local store (robots.txt may be fetched once per process) "
                "and retrying at most every %gs",
                self._masked_url,
                self._scrub(exc),
                self._reconnect_interval,
            )
        else:
            logger.debug("scrapy-rep: redis still unreachable: %s", self._scrub(exc))

    def _back_up(self, probing: bool) -> None:
        """Redis answered: leave the outage state, and write back what was learned."""
        if probing:
            with self._lock:
                recovered, self._down = self._down, False
            if recovered:
                logger.info(
                    "scrapy-rep: robots.txt store redis %s is reachable again; using it "
                    "(writing back %d origin(s) learned meanwhile)",
                    self._masked_url,
                    len(self._unsynced),
                )
        if self._unsynced:
            self._write_back()

    def _write_back(self) -> None:
        """Put what the fallback learned into Redis, unless Redis has newer by now."""
        with self._lock:
            if self._writing_back or self._down or not self._unsynced:
                return
            if time.monotonic() < self._next_write_back:
                return  # the last attempt failed: not on every call
            self._writing_back = True
            pending = list(self._unsynced)
        try:
            for start in range(0, len(pending), _WRITE_BACK_BATCH):
                if not self._write_back_batch(pending[start : start + _WRITE_BACK_BATCH]):
                    return
        finally:
            with self._lock:
                self._writing_back = False

    def _write_back_batch(self, origins: list[str]) -> bool:
        mine = {o: r for o in origins if (r := self._fallback.get(o)) is not None}
        keys = [self.origin_key(o) for o in mine]
        try:
            theirs = self._client.mget(keys) if keys else []
            pipe = self._client.pipeline(transaction=False)
            for (origin, record), raw in zip(mine.items(), theirs, strict=True):
                stored = unpack_record(raw, self._record_limit)
                if stored is None or _fresher(record, stored):
                    pipe.set(self.origin_key(origin), pack_record(record), px=self._record_ttl_ms)
            pipe.execute()
        except self._outage_errors as exc:
            self._went_down(exc)
            return False
        except self._redis_error as exc:
            self._log_once(exc)
            with self._lock:
                self._next_write_back = time.monotonic() + self._reconnect_interval
            return False
        with self._lock:
            self._unsynced.difference_update(origins)
        for origin in mine:
            if origin not in self._unsynced:  # Redis has it (or newer): stop answering
                self._fallback.discard(origin)
        return True

    def _log_once(self, exc: BaseException) -> None:
        message = self._scrub(exc)
        with self._lock:
            first = message not in self._logged and len(self._logged) < _MAX_LOGGED_KINDS
            self._logged.add(message)
        if first:
            logger.warning(
                "scrapy-rep: robots.txt store redis %s: %s (treated as a cache miss; "
                "repeats are logged at DEBUG)",
                self._masked_url,
                message,
            )
        else:
            logger.debug("scrapy-rep: redis error: %s", message)

    def _keep_locally(self, origin: str, record: OriginRecord, stored: bool) -> None:
        if not stored:
            # The only copy for now: answered from here, written back later.
            self._fallback.put(origin, record)
            with self._lock:
                self._unsynced.add(origin)
        elif len(self._fallback):
            # An outage-era copy is kept in step, so it never answers with older data.
            self._fallback.put(origin, record)


def _fresher(mine: OriginRecord, theirs: OriginRecord) -> bool:
    """True when ``mine`` comes from a later fetch than ``theirs``."""
    return (mine.fetched_at or -1.0, mine.next_retry_at or -1.0) > (
        theirs.fetched_at or -1.0,
        theirs.next_retry_at or -1.0,
    )
