"""Redis store: one robots.txt fetch per origin across many processes and machines.

Keys are namespaced and versioned (``scrapy-rep:v1:origin:<origin>``,
``scrapy-rep:v1:lease:<origin>``). A record carries a Redis TTL a little longer than
``REP_STALE_MAX_AGE + REP_UNREACHABLE_WAIT``, the longest any record can still matter,
so origins nobody crawls any more disappear by themselves. Leases are taken, renewed,
taken over and released by Lua scripts, so each step is atomic; a lease key without a
TTL, with more TTL than any renewal gives, or of the wrong type is broken and taken over.

Threads and outages (``redis_outage.py``): the client (redis-py's, with its connection
pool) is thread-safe and every call has a short socket timeout and no client-side
retries, so a stalled or blackholed Redis costs a caller about a second, then the store
switches to an in-process ``MemoryStorage`` (leases then only single-flight this
process), logs ONE warning, and probes Redis again at most every ``reconnect_interval``
seconds. What it learns meanwhile is written back once Redis answers again (unless Redis
holds a newer record by then). Nothing raises out of the interface, and no log line or
``describe()`` shows a password (``redis_url.mask_url``).
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy_rep.policy.config import Config
from scrapy_rep.policy.records import OriginRecord
from scrapy_rep.storage import redis_scripts as lua
from scrapy_rep.storage.base import absurd_after, holder_is_dead
from scrapy_rep.storage.codec import pack_record, record_limit
from scrapy_rep.storage.codec import unpack_stored as _unpack_stored
from scrapy_rep.storage.redis_outage import DOWN, KEY_PREFIX, RedisConnection
from scrapy_rep.storage.redis_url import mask_url, open_client

__all__ = ["KEY_PREFIX", "RedisStorage", "mask_url"]

logger = logging.getLogger(__name__)


class RedisStorage(RedisConnection):
    """Records and leases in Redis, with an in-process fallback during outages."""

    shared = True

    @classmethod
    def from_url(cls, url: str, config: Config, **kwargs: Any) -> RedisStorage:
        client = open_client(url)
        # Longest a record can still matter: unreachable for REP_UNREACHABLE_WAIT, then
        # the last good copy is used while younger than REP_STALE_MAX_AGE. A day on top.
        record_ttl = config.stale_max_age + config.unreachable_wait + 86_400.0
        kwargs.setdefault("fallback_max_origins", config.memory_max_origins)
        kwargs.setdefault("record_limit", record_limit(config.max_size))
        return cls(client, url=url, record_ttl=record_ttl, **kwargs)

    def _unpack(self, raw: object) -> OriginRecord | None:
        return _unpack_stored(raw, f"redis {self._masked_url}", self._record_limit)

    # -- RobotsStorage ----------------------------------------------------------------

    def get(self, origin: str) -> OriginRecord | None:
        key = self.origin_key(origin)
        # The fallback holds what Redis does not have yet (empty otherwise); read first,
        # as a call that finds Redis back writes it back and empties it.
        local = self._fallback.get(origin)
        raw = self._call(lambda: self._client.get(key))
        record = self._unpack(None if raw is DOWN else raw)
        return record if record is not None else local

    def put(self, origin: str, record: OriginRecord) -> None:
        key = self.origin_key(origin)
        blob = pack_record(record)
        result = self._call(lambda: self._client.set(key, blob, px=self._record_ttl_ms))
        self._keep_locally(origin, record, result is not DOWN)

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
        return result is not DOWN and bool(result)

    def acquire_lease(self, origin: str, holder: str, ttl: float) -> bool:
        key, args = self.lease_key(origin), self._lease_args(holder, ttl)
        answer = self._call(lambda: self._scripts["acquire"](keys=[key], args=args))
        if answer is DOWN:
            return self._fallback.acquire_lease(origin, holder, ttl)
        return self._settle(origin, answer, holder, ttl)

    def renew_lease(self, origin: str, holder: str, ttl: float) -> bool:
        key, ttl_ms = self.lease_key(origin), max(1, int(ttl * 1000))
        answer = self._call(lambda: self._scripts["renew"](keys=[key], args=[holder, ttl_ms]))
        if answer is DOWN:
            return self._fallback.renew_lease(origin, holder, ttl)
        return bool(answer)

    def lease_holder(self, origin: str) -> str | None:
        key = self.lease_key(origin)
        answer = self._call(lambda: self._scripts["holder"](keys=[key]))
        if answer is DOWN:
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
        if result is DOWN or not isinstance(result, list):
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
        self._keep_locally(origin, record, result is not DOWN)

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

    def unreachable_reason(self) -> str | None:
        """Why Redis does not answer a PING now (None when it does), without the
        outage fallback: for the start-up check (storage/factory.py), where an
        unreachable store is most likely a mistake in ``REP_STORAGE``."""
        errors: tuple[type[BaseException], ...] = (self._redis_error, *self._outage_errors)
        try:
            self._client.ping()
        except errors as exc:
            return self._scrub(exc)
        return None

    def describe(self) -> str:
        state = " (unreachable: using a process-local fallback)" if self._down else ""
        return f"redis {self._masked_url}{state}"


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
