"""Redis store: one robots.txt fetch per origin across many processes and machines.

Keys are namespaced and versioned (``scrapy-rep:v1:origin:<origin>``,
``scrapy-rep:v1:lease:<origin>``). A record carries a Redis TTL a little longer than
``REP_STALE_MAX_AGE + REP_UNREACHABLE_WAIT``, the longest any record can still matter,
so origins nobody crawls any more disappear by themselves. Leases are taken, renewed,
taken over and released by Lua scripts, so each step is atomic; a lease key without a
TTL, with more TTL than any renewal gives, or of the wrong type is broken and taken over.

Threads and outages: the client (redis-py's, with its connection pool) is thread-safe
and every call has a short socket timeout and no client-side retries, so a stalled or
blackholed Redis costs a caller about a second, then the store switches to an
in-process ``MemoryStorage`` (leases then only single-flight this process), logs ONE
warning, and probes Redis again at most every ``reconnect_interval`` seconds. What it
learns meanwhile is written back once Redis answers again (unless Redis holds a newer
record by then). Nothing raises out of the interface, and no log line or ``describe()``
shows a password (``redis_url.mask_url``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from scrapy_rep.policy.config import Config
from scrapy_rep.policy.records import OriginRecord
from scrapy_rep.storage import redis_scripts as lua
from scrapy_rep.storage.base import MemoryStorage, absurd_after, holder_is_dead
from scrapy_rep.storage.codec import MAX_DECODED, pack_record, record_limit, unpack_record
from scrapy_rep.storage.codec import unpack_stored as _unpack_stored
from scrapy_rep.storage.redis_url import mask_url, open_client, scrub, secrets_of

if TYPE_CHECKING:
    import redis

__all__ = ["KEY_PREFIX", "RedisStorage", "mask_url"]

logger = logging.getLogger(__name__)

KEY_PREFIX = "scrapy-rep:v1:"
_T = TypeVar("_T")
_DOWN = object()  # "Redis unavailable, use the fallback"
_MAX_LOGGED_KINDS = 64
_WRITE_BACK_BATCH = 200


class RedisStorage:
    """Records and leases in Redis, with an in-process fallback during outages."""

    shared = True

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

    @classmethod
    def from_url(cls, url: str, config: Config, **kwargs: Any) -> RedisStorage:
        client = open_client(url)
        # Longest a record can still matter: unreachable for REP_UNREACHABLE_WAIT, then
        # the last good copy is used while younger than REP_STALE_MAX_AGE. A day on top.
        record_ttl = config.stale_max_age + config.unreachable_wait + 86_400.0
        kwargs.setdefault("fallback_max_origins", config.memory_max_origins)
        kwargs.setdefault("record_limit", record_limit(config.max_size))
        return cls(client, url=url, record_ttl=record_ttl, **kwargs)

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
        """Run one Redis operation, or return ``_DOWN`` when the fallback must answer."""
        if self._closed:
            return _DOWN
        with self._lock:
            probing = self._down
            if probing and time.monotonic() < self._next_probe:
                return _DOWN
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
            return _DOWN
        except self._redis_error as exc:
            # Reachable but refused (OOM, READONLY replica, a key of the wrong type):
            # this one call falls back, Redis stays in use.
            self._back_up(probing)
            self._log_once(exc)
            return _DOWN
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

    def _unpack(self, raw: object) -> OriginRecord | None:
        return _unpack_stored(raw, f"redis {self._masked_url}", self._record_limit)

    # -- RobotsStorage ----------------------------------------------------------------

    def get(self, origin: str) -> OriginRecord | None:
        key = self.origin_key(origin)
        # The fallback holds what Redis does not have yet (empty otherwise); read first,
        # as a call that finds Redis back writes it back and empties it.
        local = self._fallback.get(origin)
        raw = self._call(lambda: self._client.get(key))
        record = self._unpack(None if raw is _DOWN else raw)
        return record if record is not None else local

    def put(self, origin: str, record: OriginRecord) -> None:
        key = self.origin_key(origin)
        blob = pack_record(record)
        result = self._call(lambda: self._client.set(key, blob, px=self._record_ttl_ms))
        self._keep_locally(origin, record, result is not _DOWN)

    def _lease_args(self, holder: str, ttl: float) -> list[Any]:
        ttl_ms = max(1, int(ttl * 1000))
        absurd_ms = int(absurd_after(ttl) * 1000)
        return [holder, ttl_ms, absurd_ms]

    def _settle(self, origin: str, answer: Any, holder: str, ttl: float) -> bool:
        """The acquire script's answer; a refusal by a dead local holder is taken over."""
        took, current = int(answer[0]), _text(answer[1])
        if took:
            return True
        if not holder_is_dead(current):
            return False
        args: list[str | int] = [current, holder, max(1, int(ttl * 1000))]
        result = self._call(
            lambda: self._scripts["takeover"](keys=[self.lease_key(origin)], args=args)
        )
        return result is not _DOWN and bool(result)

    def acquire_lease(self, origin: str, holder: str, ttl: float) -> bool:
        key, args = self.lease_key(origin), self._lease_args(holder, ttl)
        answer = self._call(lambda: self._scripts["acquire"](keys=[key], args=args))
        if answer is _DOWN:
            return self._fallback.acquire_lease(origin, holder, ttl)
        return self._settle(origin, answer, holder, ttl)

    def renew_lease(self, origin: str, holder: str, ttl: float) -> bool:
        key, ttl_ms = self.lease_key(origin), max(1, int(ttl * 1000))
        answer = self._call(lambda: self._scripts["renew"](keys=[key], args=[holder, ttl_ms]))
        if answer is _DOWN:
            return self._fallback.renew_lease(origin, holder, ttl)
        return bool(answer)

    def lease_holder(self, origin: str) -> str | None:
        key = self.lease_key(origin)
        answer = self._call(lambda: self._scripts["holder"](keys=[key]))
        if answer is _DOWN:
            return self._fallback.lease_holder(origin)
        return None if not answer else _text(answer)

    def release_lease(self, origin: str, holder: str) -> None:
        self._fallback.release_lease(origin, holder)
        key = self.lease_key(origin)
        # If Redis is down the lease simply expires by its PX.
        self._call(lambda: self._scripts["release"](keys=[key], args=[holder]))

    # Batched forms (see base.acquire_and_read / put_and_release): a robots.txt fetch
    # costs a shared store four round trips instead of six.

    def acquire_lease_and_get(
        self, origin: str, holder: str, ttl: float
    ) -> tuple[bool, OriginRecord | None]:
        lease_key, key = self.lease_key(origin), self.origin_key(origin)
        args = self._lease_args(holder, ttl)
        local = self._fallback.get(origin)  # before a write-back empties it (see get)

        def take_and_read() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            # EVAL, not the registered script: in a pipeline that costs an extra SCRIPT
            # EXISTS round trip first; the script is short and Redis caches it.
            pipe.eval(lua.ACQUIRE, 1, lease_key, *args)
            pipe.get(key)
            answer, raw = pipe.execute(raise_on_error=False)
            if isinstance(answer, Exception):
                raise answer  # the lease itself failed: as acquire_lease would
            return [answer, raw]

        result = self._call(take_and_read)
        if result is _DOWN or not isinstance(result, list):
            held = self._fallback.acquire_lease(origin, holder, ttl)
            return held, self._fallback.get(origin) if held else None
        answer, raw = result
        if not self._settle(origin, answer, holder, ttl):
            return False, None
        if isinstance(raw, self._redis_error):
            # The record's key alone is refused (WRONGTYPE): a miss, as in get()
            self._log_once(raw)
            raw = None
        record = self._unpack(raw)
        return True, record if record is not None else local

    def put_and_release_lease(self, origin: str, record: OriginRecord, holder: str) -> None:
        self._fallback.release_lease(origin, holder)
        key, lease_key = self.origin_key(origin), self.lease_key(origin)
        blob = pack_record(record)

        def store_and_release() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            pipe.set(key, blob, px=self._record_ttl_ms)
            pipe.eval(lua.RELEASE, 1, lease_key, holder)
            return list(pipe.execute())

        result = self._call(store_and_release)
        self._keep_locally(origin, record, result is not _DOWN)

    def close(self) -> None:
        if self._closed:
            return
        if self._unsynced:
            # A last chance for what an outage left behind: one probe (the per-call
            # timeout bounds it), which writes back when Redis answers.
            with self._lock:
                self._next_probe = self._next_write_back = 0.0
            self._call(self._client.ping)
        self._closed = True
        self._fallback.close()
        try:
            self._client.close()
        except Exception as exc:  # closing must never fail a crawl's shutdown
            logger.debug("scrapy-rep: closing redis failed: %s", self._scrub(exc))

    def describe(self) -> str:
        state = " (unreachable: using a process-local fallback)" if self._down else ""
        return f"redis {self._masked_url}{state}"


def _fresher(mine: OriginRecord, theirs: OriginRecord) -> bool:
    """True when ``mine`` comes from a later fetch than ``theirs``."""
    return (mine.fetched_at or -1.0, mine.next_retry_at or -1.0) > (
        theirs.fetched_at or -1.0,
        theirs.next_retry_at or -1.0,
    )


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
