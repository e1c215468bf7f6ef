"""Redis store: one robots.txt fetch per origin across many processes and machines.

Keys are namespaced and versioned (``scrapy-rep:v1:origin:<origin>``,
``scrapy-rep:v1:lease:<origin>``). A record carries a Redis TTL a little longer than
``REP_STALE_MAX_AGE + REP_UNREACHABLE_WAIT``, the longest any record can still matter,
so origins nobody crawls any more disappear by themselves.

Outage behaviour: calls run on the Twisted reactor thread, so sockets have ~1 s
timeouts and no client-side retries. When Redis becomes unreachable the store switches
to an in-process ``MemoryStorage`` (leases then only single-flight this process), logs
ONE warning, and probes Redis again at most every ``reconnect_interval`` seconds; when a
probe succeeds it logs one INFO and uses Redis again. Nothing raises out of the
interface, and no log line or ``describe()`` shows a password.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit

from scrapy_rep.policy.config import Config, SettingError
from scrapy_rep.policy.records import OriginRecord
from scrapy_rep.storage.base import MemoryStorage
from scrapy_rep.storage.codec import pack_record, unpack_stored

if TYPE_CHECKING:
    import redis

logger = logging.getLogger(__name__)

KEY_PREFIX = "scrapy-rep:v1:"
_T = TypeVar("_T")
_DOWN = object()  # "Redis unavailable, use the fallback"
_MAX_LOGGED_KINDS = 64
_SECRET_PARAMS = {"password", "pass", "passwd", "token"}

# Release only a lease we still hold: GET and DEL in one atomic step.
_RELEASE_LUA = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""


def mask_url(url: str) -> str:
    """``redis://user:secret@host:6379/0`` -> ``redis://user:***@host:6379/0``."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hostinfo = netloc.rpartition("@")
            user, has_password, _ = userinfo.partition(":")
            # A lone userinfo (redis://secret@host) is treated as a password by some
            # clients, so it is masked too.
            netloc = f"{user}:***@{hostinfo}" if has_password else f"***@{hostinfo}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            query = urlencode(
                [(k, "***" if k.lower() in _SECRET_PARAMS else v) for k, v in pairs], safe="*/"
            )
        # Built by hand: urlunsplit() drops the "//" of an empty netloc (unix:///path).
        masked = f"{parts.scheme}://{netloc}{parts.path}"
        masked += f"?{query}" if query else ""
        return masked + (f"#{parts.fragment}" if parts.fragment else "")
    except ValueError:
        return "<unparsable redis URL>"


def _secrets_of(url: str) -> list[str]:
    """The credential strings in ``url``, to scrub from error messages too."""
    secrets: list[str] = []
    try:
        parts = urlsplit(url)
        if parts.password:
            secrets.append(parts.password)
        elif parts.username and "@" in parts.netloc:
            secrets.append(parts.username)
        for key, value in parse_qsl(parts.query):
            if key.lower() in _SECRET_PARAMS and value:
                secrets.append(value)
    except ValueError:
        pass
    return [s for s in secrets if len(s) >= 2]


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
    ) -> None:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import RedisError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        self._client = client
        self._masked_url = mask_url(url)
        self._secrets = _secrets_of(url)
        self._record_ttl_ms = max(1000, int(record_ttl * 1000))
        self._reconnect_interval = reconnect_interval
        self._fallback = MemoryStorage(fallback_max_origins)
        self._release_script = client.register_script(_RELEASE_LUA)
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
        self._closed = False

    @classmethod
    def from_url(cls, url: str, config: Config, **kwargs: Any) -> RedisStorage:
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError:
            raise SettingError(
                "REP_STORAGE = a redis URL requires the redis package: "
                "pip install scrapy-rep[redis]"
            ) from None
        try:
            client = redis.Redis.from_url(
                url,
                socket_timeout=1.0,
                socket_connect_timeout=1.0,
                # No client-side retries with backoff: they would stall the reactor for
                # seconds; this class has its own retry-once and outage fallback.
                retry=Retry(NoBackoff(), 0),
            )
        except (ValueError, TypeError) as exc:
            message = str(exc)
            for secret in _secrets_of(url):
                message = message.replace(secret, "***")
            raise SettingError(f"REP_STORAGE: bad redis URL {mask_url(url)}: {message}") from None
        # Longest a record can still matter: unreachable for REP_UNREACHABLE_WAIT, then
        # the last good copy is used while younger than REP_STALE_MAX_AGE. A day on top.
        record_ttl = config.stale_max_age + config.unreachable_wait + 86_400.0
        kwargs.setdefault("fallback_max_origins", config.memory_max_origins)
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
        message = f"{type(exc).__name__}: {exc}"
        for secret in self._secrets:
            message = message.replace(secret, "***")
        return message

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
            except self._outage_errors:
                if probing:
                    raise
                # A pooled socket may have died while idle (server restart, idle
                # timeout); redis-py dropped it, so one immediate retry reconnects.
                result = operation()
        except self._outage_errors as exc:
            with self._lock:
                self._next_probe = time.monotonic() + self._reconnect_interval
                if not self._down:
                    self._down = True
                    logger.warning(
                        "scrapy-rep: robots.txt store redis %s is unreachable (%s); "
                        "continuing with a process-local store (robots.txt may be fetched "
                        "once per process) and retrying at most every %gs",
                        self._masked_url,
                        self._scrub(exc),
                        self._reconnect_interval,
                    )
                else:
                    logger.debug("scrapy-rep: redis still unreachable: %s", self._scrub(exc))
            return _DOWN
        except self._redis_error as exc:
            # Reachable but refused (OOM, READONLY replica, a key of the wrong type):
            # this one call falls back, Redis stays in use.
            self._back_up(probing)
            self._log_once(exc)
            return _DOWN
        self._back_up(probing)
        return result

    def _back_up(self, probing: bool) -> None:
        """Redis answered: leave the outage state if we were in it."""
        if not probing:
            return
        with self._lock:
            if self._down:
                self._down = False
                logger.info(
                    "scrapy-rep: robots.txt store redis %s is reachable again; using it",
                    self._masked_url,
                )

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

    # -- RobotsStorage ----------------------------------------------------------------

    def get(self, origin: str) -> OriginRecord | None:
        key = self.origin_key(origin)
        raw = self._call(lambda: self._client.get(key))
        record = unpack_stored(raw, self.describe())
        # The fallback holds what was learned during an outage; it is empty otherwise.
        return record if record is not None else self._fallback.get(origin)

    def put(self, origin: str, record: OriginRecord) -> None:
        key = self.origin_key(origin)
        blob = pack_record(record)
        result = self._call(lambda: self._client.set(key, blob, px=self._record_ttl_ms))
        if result is _DOWN or len(self._fallback):
            # During an outage this is the only copy; afterwards it keeps an outage-era
            # copy in step with Redis so it never answers with an older record.
            self._fallback.put(origin, record)

    def acquire_lease(self, origin: str, holder: str, ttl: float) -> bool:
        key = self.lease_key(origin)
        ttl_ms = max(1, int(ttl * 1000))

        def take() -> bool:
            if self._client.set(key, holder, nx=True, px=ttl_ms):
                return True
            # Already ours (a retry by the same holder) counts as held.
            current = self._client.get(key)
            return current is not None and _text(current) == holder

        result = self._call(take)
        if result is _DOWN:
            return self._fallback.acquire_lease(origin, holder, ttl)
        return bool(result)

    def release_lease(self, origin: str, holder: str) -> None:
        self._fallback.release_lease(origin, holder)
        key = self.lease_key(origin)
        # If Redis is down the lease simply expires by its PX.
        self._call(lambda: self._release_script(keys=[key], args=[holder]))

    # Batched forms (see _storage.acquire_and_read / put_and_release): a robots.txt
    # fetch costs a shared store four round trips instead of six, each one a blocking
    # call on the reactor thread.

    def acquire_lease_and_get(
        self, origin: str, holder: str, ttl: float
    ) -> tuple[bool, OriginRecord | None]:
        lease_key, key = self.lease_key(origin), self.origin_key(origin)
        ttl_ms = max(1, int(ttl * 1000))

        def take_and_read() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            pipe.set(lease_key, holder, nx=True, px=ttl_ms)
            pipe.get(lease_key)  # after SET NX: ours if we took it or already held it
            pipe.get(key)
            took, current, raw = pipe.execute(raise_on_error=False)
            for answer in (took, current):
                if isinstance(answer, Exception):
                    raise answer  # the lease itself failed: as acquire_lease would
            return [took, current, raw]

        result = self._call(take_and_read)
        if result is _DOWN or not isinstance(result, list):
            held = self._fallback.acquire_lease(origin, holder, ttl)
            return held, self._fallback.get(origin) if held else None
        _, current, raw = result
        held = current is not None and _text(current) == holder
        if not held:
            return False, None
        if isinstance(raw, self._redis_error):
            # The record's key alone is refused (WRONGTYPE): a miss, as in get()
            self._log_once(raw)
            raw = None
        record = unpack_stored(raw, self.describe())
        return True, record if record is not None else self._fallback.get(origin)

    def put_and_release_lease(self, origin: str, record: OriginRecord, holder: str) -> None:
        self._fallback.release_lease(origin, holder)
        key, lease_key = self.origin_key(origin), self.lease_key(origin)
        blob = pack_record(record)

        def store_and_release() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            pipe.set(key, blob, px=self._record_ttl_ms)
            # EVAL, not the registered script: in a pipeline that costs an extra SCRIPT
            # EXISTS round trip first; the script is short and Redis caches it
            pipe.eval(_RELEASE_LUA, 1, lease_key, holder)
            return list(pipe.execute())

        result = self._call(store_and_release)
        if result is _DOWN or len(self._fallback):
            # as in put(): the only copy during an outage, kept in step afterwards
            self._fallback.put(origin, record)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._fallback.close()
        try:
            self._client.close()
        except Exception as exc:  # closing must never fail a crawl's shutdown
            logger.debug("scrapy-rep: closing redis failed: %s", self._scrub(exc))

    def describe(self) -> str:
        state = " (unreachable: using a process-local fallback)" if self._down else ""
        return f"redis {self._masked_url}{state}"


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
