"""Redis store: one robots.txt fetch per origin across many processes and machines.

Records, fetch leases and cluster primitives (docs/cluster.md) share one redis-py client
(its connection pool is thread-safe). Leases and cluster steps are Lua scripts (atomic),
timed on the server's clock. Outages, write-back and secrets (no log line or
``describe()`` shows a password): docs/storage.md, "Redis".
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlencode

from scrapy_rep.policy.config import Config, SettingError
from scrapy_rep.policy.records import OriginRecord
from scrapy_rep.storage.base import (
    MAX_DECODED,
    LocalFallback,
    RobotsStorage,
    absurd_after,
    holder_is_dead,
    newer_records,
    pack_record,
    record_limit,
    unpack_record,
    warn_unreadable,
)
from scrapy_rep.storage.cluster import ClusterError, Parked, SpiderCluster

if TYPE_CHECKING:
    from collections.abc import Sequence

    import redis

__all__ = ["KEY_PREFIX", "RedisStorage", "mask_url"]

logger = logging.getLogger(__name__)

KEY_PREFIX = "scrapy-rep:v1:"
_T = TypeVar("_T")
DOWN = object()  # "Redis unavailable, use the fallback"
_WRITE_BACK_BATCH = 200

# -- the URL: secrets masked, checked, the client opened ------------------------------------

#: Per-call socket timeout: a store call waits at most this long for Redis.
CALL_TIMEOUT = 1.0

_SECRET_PARAMS = {"password", "pass", "passwd", "token", "username", "user"}
_MASK = "***"
# A credential in the query runs to the next "&" whatever it holds ("@", "#", "/"):
# masked in the raw text, before the "@" rule below could misread it.
_SECRET_NAMES = "|".join(sorted(_SECRET_PARAMS))
_SECRET_QUERY = re.compile(rf"([?&](?:{_SECRET_NAMES})=)([^&]*)", re.IGNORECASE)


def _split(url: str) -> tuple[str, str, str] | None:
    """(scheme, credentials, rest) with the credentials cut at the last "@"."""
    scheme, sep, after = url.partition("://")
    if not sep:
        return None
    userinfo, at, rest = after.rpartition("@")
    return scheme, userinfo if at else "", rest if at else after


def mask_url(url: str) -> str:
    """``redis://user:secret@host:6379/0`` -> ``redis://user:***@host:6379/0``.

    Query parameters that carry credentials are masked, a fragment is dropped, and a
    user name that holds a reserved character is masked with the password."""
    parts = _split(_SECRET_QUERY.sub(rf"\1{_MASK}", url))
    if parts is None:
        return "<unparsable redis URL>"
    scheme, userinfo, rest = parts
    location, _, query = rest.partition("#")[0].partition("?")
    masked = f"{scheme}://"
    if userinfo:
        user, has_password, _ = userinfo.partition(":")
        # A lone userinfo (redis://secret@host) is a password for some clients.
        plain_user = has_password and not any(c in user for c in "/?#[]")
        masked += f"{user}:{_MASK}@" if plain_user else f"{_MASK}@"
    masked += location
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        masked += "?" + urlencode(
            [(k, _MASK if k.lower() in _SECRET_PARAMS else v) for k, v in pairs], safe="*/"
        )
    return masked


def secrets_of(url: str) -> list[str]:
    """Every string that may be (part of) a credential in ``url``, longest first, to
    scrub from any text that may echo it (driver error messages)."""
    found: set[str] = {m.group(2) for m in _SECRET_QUERY.finditer(url)}
    parts = _split(_SECRET_QUERY.sub("", url))
    if parts is not None:
        _, userinfo, rest = parts
        if userinfo:
            found.add(userinfo)
            found.update(userinfo.split(":"))
            found.update(unquote(piece) for piece in userinfo.split(":"))
            for mark in "#/?":  # what urllib may have cut a password into
                found.update(userinfo.replace(":", mark).split(mark))
        for key, value in parse_qsl(rest.partition("#")[0].partition("?")[2]):
            if key.lower() in _SECRET_PARAMS:
                found.add(value)
        found.add(rest.partition("#")[2])  # the fragment
    return sorted((s for s in found if len(s) >= 2), key=len, reverse=True)


def scrub(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, _MASK)
    return text


def check_url(url: str) -> str | None:
    """Why redis-py would not connect with what the URL says (None when it would), never
    quoting the URL or the parser's message (which may hold a piece of the password)."""
    from redis.connection import parse_url  # the parser the client itself uses

    parts = _split(url)
    if parts is None:
        return "not a URL (expected redis://, rediss:// or unix://)"
    _, userinfo, rest = parts
    hint = (
        "percent-encode reserved characters in the user name and password "
        "(urllib.parse.quote(password, safe=''))"
    )
    if "#" in rest:
        return f"the URL holds a '#' after its credentials; {hint}"
    try:
        parsed: dict[str, object] = parse_url(url)  # type: ignore[no-untyped-call]
    except (ValueError, TypeError):
        return f"redis-py cannot parse it (a bad port or database number?); or {hint}"
    user, has_password, password = userinfo.partition(":")
    expected_password = unquote(password) if has_password else None
    if parsed.get("password") != expected_password and "password" not in rest:
        return f"redis-py reads another password from it; {hint}"
    if (parsed.get("username") or None) != (unquote(user) or None) and "username" not in rest:
        return f"redis-py reads another user name from it; {hint}"
    return None


def open_client(url: str) -> redis.Redis:
    """A redis-py client for ``url``, or a ``SettingError`` that never shows a secret."""
    try:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry
    except ImportError:
        raise SettingError(
            "REP_STORAGE = a redis URL requires the redis package: pip install scrapy-rep[redis]"
        ) from None
    problem = check_url(url)
    if problem is None:
        try:
            return redis.Redis.from_url(
                url,
                socket_timeout=CALL_TIMEOUT,
                socket_connect_timeout=CALL_TIMEOUT,
                # No client-side retries with backoff: the store has its own retry-once
                # and outage fallback, and a caller must not wait long.
                retry=Retry(NoBackoff(), 0),
            )
        except (ValueError, TypeError) as exc:
            problem = scrub(str(exc), secrets_of(url))
    raise SettingError(f"REP_STORAGE: bad redis URL {mask_url(url)}: {problem}")


# -- Lua: fetch leases and cluster primitives -------------------------------------------

_CLEAN_WRONG_TYPE = """
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'string' then redis.call('del', KEYS[1]) end
"""

_SCRIPTS = {
    # ARGV: holder, ttl ms, "absurd" ms. Returns {1, ""} when taken (free, expired, ours,
    # or broken: no TTL or more TTL than a renewal gives), else {0, current holder}.
    "acquire": _CLEAN_WRONG_TYPE
    + """
local current = redis.call('get', KEYS[1])
if current then
    local left = redis.call('pttl', KEYS[1])
    if current ~= ARGV[1] and left >= 0 and left <= tonumber(ARGV[3]) then
        return {0, current}
    end
end
redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, ''}
""",
    # ARGV: holder, ttl ms. Extends our own lease only (never takes a free one).
    "renew": """
if redis.call('type', KEYS[1])['ok'] == 'string' and redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
""",
    # ARGV: the dead holder we saw, the new holder, ttl ms: compare and swap.
    "takeover": _CLEAN_WRONG_TYPE
    + """
if redis.call('get', KEYS[1]) == ARGV[1] then
    redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3])
    return 1
end
return 0
""",
    # ARGV: holder. Releases only a lease we still hold.
    "release": """
if redis.call('type', KEYS[1])['ok'] == 'string' and redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
""",
    # The current holder, or false (no lease, or a key that is not a lease).
    "holder": """
if redis.call('type', KEYS[1])['ok'] ~= 'string' then return false end
return redis.call('get', KEYS[1])
""",
    # KEYS: owners set, my parked hash, my heartbeat. ARGV: me, key prefix, limit, ttl ms.
    # Keys of dead owners are computed here: fine on a single Redis (not Redis Cluster,
    # where all keys of a script must be declared).
    "adopt": """
local out = {}
local limit = tonumber(ARGV[3])
redis.call('SET', KEYS[3], '1', 'PX', ARGV[4])
redis.call('SADD', KEYS[1], ARGV[1])
for _, owner in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if #out >= 2 * limit then break end
  if owner ~= ARGV[1] and redis.call('EXISTS', ARGV[2] .. 'alive:' .. owner) == 0 then
    local dead = ARGV[2] .. 'parked:' .. owner
    local cursor = '0'
    repeat
      local scan = redis.call('HSCAN', dead, cursor, 'COUNT', limit)
      cursor = scan[1]
      local items = scan[2]
      for i = 1, #items, 2 do
        if #out >= 2 * limit then break end
        if redis.call('HSETNX', KEYS[2], items[i], items[i + 1]) == 1 then
          out[#out + 1] = items[i]
          out[#out + 1] = items[i + 1]
        end
        redis.call('HDEL', dead, items[i])
      end
    until cursor == '0' or #out >= 2 * limit
    if redis.call('EXISTS', dead) == 0 then redis.call('SREM', KEYS[1], owner) end
  end
end
return out
""",
    # KEYS: owners set. ARGV: me, key prefix, then the keys being parked by me. The same
    # keys under other owners are removed: parking takes a request over, one copy per key.
    "claim_parked": """
local keys = {}
for i = 3, #ARGV do keys[#keys + 1] = ARGV[i] end
for _, owner in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if owner ~= ARGV[1] then
    local hash = ARGV[2] .. 'parked:' .. owner
    for i = 1, #keys, 500 do
      redis.call('HDEL', hash, unpack(keys, i, math.min(i + 499, #keys)))
    end
  end
end
return 0
""",
    # KEYS: the origin's turn key. ARGV: spacing, horizon, not_before. Returns {reserved,
    # wait} as strings (Lua numbers become integers in replies). Redis' own clock: no skew.
    "turn": """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local spacing = tonumber(ARGV[1])
local horizon = tonumber(ARGV[2])
local nxt = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
-- A next time further ahead than any reservation can reach is broken (a clock jump,
-- a foreign value): ignored, as a lease with an absurd expiry is.
if nxt > now + horizon + spacing then nxt = 0 end
local start = math.max(now + tonumber(ARGV[3]), nxt)
if start - now > horizon then
  return {'0', string.format('%.6f', start - now - horizon)}
end
local after = start + spacing
redis.call('SET', KEYS[1], string.format('%.6f', after), 'PX',
           math.ceil((after - now) * 1000) + 1000)
return {'1', string.format('%.6f', start - now)}
""",
}


class RedisStorage(RobotsStorage):
    """Records, leases and the cluster primitives in Redis, on one client, with an
    in-process fallback for the records and leases during outages."""

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
        from redis import exceptions

        self._masked_url = mask_url(url)
        self._secrets = secrets_of(url)
        self._client = client
        self._record_ttl_ms = max(1000, int(record_ttl * 1000))
        self._record_limit = record_limit
        self._reconnect_interval = reconnect_interval
        self._fallback = LocalFallback(fallback_max_origins)
        self._scripts = {name: client.register_script(body) for name, body in _SCRIPTS.items()}
        self._timeout_errors = (exceptions.TimeoutError, TimeoutError)
        self._outage_errors = (exceptions.ConnectionError, exceptions.TimeoutError, OSError)
        self._redis_error = exceptions.RedisError
        self._lock = threading.Lock()  # guards the outage state below
        self._down = False
        self._next_probe = 0.0
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

    def _stored_or(self, raw: object, local: OriginRecord | None) -> OriginRecord | None:
        """``raw`` as a record, else the fallback's ``local`` copy (unreadable: logged)."""
        record = unpack_record(raw, self._record_limit)
        if record is None and raw is not None:
            warn_unreadable(f"redis {self._masked_url}")
        return record if record is not None else local

    # -- RobotsStorage ----------------------------------------------------------------

    def get(self, origin: str) -> OriginRecord | None:
        key = self.origin_key(origin)
        # The fallback holds what Redis does not have yet (empty otherwise); read first,
        # as a call that finds Redis back writes it back and empties it.
        local = self._fallback.get(origin)
        raw = self._call(lambda: self._client.get(key))
        return self._stored_or(None if raw is DOWN else raw, local)

    def put(self, origin: str, record: OriginRecord) -> None:
        key = self.origin_key(origin)
        blob = pack_record(record)
        result = self._call(lambda: self._client.set(key, blob, px=self._record_ttl_ms))
        self._fallback.keep(origin, record, stored=result is not DOWN)

    def _lease_script(self, name: str, origin: str, *args: str | int) -> Any:
        """Run the lease script ``name`` on ``origin``'s lease (``DOWN``: not run)."""
        keys = [self.lease_key(origin)]
        return self._call(lambda: self._scripts[name](keys=keys, args=args))

    def _settle(self, origin: str, answer: Any, holder: str, ttl: float) -> bool:
        """The acquire script's answer; a refusal by a dead local holder is taken over."""
        took, current = int(answer[0]), _text(answer[1])
        if took:
            return True
        if not holder_is_dead(current):
            return False
        result = self._lease_script("takeover", origin, current, holder, _ms(ttl))
        return result is not DOWN and bool(result)

    def acquire_lease(self, origin: str, holder: str, ttl: float) -> bool:
        answer = self._lease_script("acquire", origin, *_acquire_args(holder, ttl))
        if answer is DOWN:
            return self._fallback.acquire_lease(origin, holder, ttl)
        return self._settle(origin, answer, holder, ttl)

    def renew_lease(self, origin: str, holder: str, ttl: float) -> bool:
        answer = self._lease_script("renew", origin, holder, _ms(ttl))
        if answer is DOWN:
            return self._fallback.renew_lease(origin, holder, ttl)
        return bool(answer)

    def lease_holder(self, origin: str) -> str | None:
        answer = self._lease_script("holder", origin)
        if answer is DOWN:
            return self._fallback.lease_holder(origin)
        return None if not answer else _text(answer)

    def release_lease(self, origin: str, holder: str) -> None:
        self._fallback.release_lease(origin, holder)
        # If Redis is down the lease simply expires by its PX.
        self._lease_script("release", origin, holder)

    # Batched forms: a robots.txt fetch costs a shared store four round trips, not six.

    def acquire_lease_and_get(
        self, origin: str, holder: str, ttl: float
    ) -> tuple[bool, OriginRecord | None]:
        lease_key, key = self.lease_key(origin), self.origin_key(origin)
        local = self._fallback.get(origin)  # before a write-back empties it (see get)

        def take_and_read() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            # EVAL, not the registered script: in a pipeline that costs an extra SCRIPT
            # EXISTS round trip first; the script is short and Redis caches it.
            pipe.eval(_SCRIPTS["acquire"], 1, lease_key, *_acquire_args(holder, ttl))
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
        return True, self._stored_or(raw, local)

    def put_and_release_lease(self, origin: str, record: OriginRecord, holder: str) -> None:
        self._fallback.release_lease(origin, holder)
        key, lease_key = self.origin_key(origin), self.lease_key(origin)
        blob = pack_record(record)

        def store_and_release() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            pipe.set(key, blob, px=self._record_ttl_ms)
            pipe.eval(_SCRIPTS["release"], 1, lease_key, holder)
            return list(pipe.execute())

        result = self._call(store_and_release)
        self._fallback.keep(origin, record, stored=result is not DOWN)

    # -- the cluster primitives (docs/cluster.md; callers use ``cluster(spider)``) ----

    def cluster(self, spider: str) -> SpiderCluster:
        return SpiderCluster(self, spider)

    @staticmethod
    def cluster_prefix(spider: str) -> str:
        return f"{KEY_PREFIX}cluster:{spider}:"

    def _cluster_call(self, operation: Callable[[], _T]) -> _T:
        """One cluster operation; ``ClusterError`` when Redis fails it."""
        try:
            return self._run(operation, retry=True)
        except (*self._outage_errors, self._redis_error) as exc:
            raise ClusterError(self._scrub(exc)) from None

    def park(
        self, spider: str, owner: str, ttl: float, add: Sequence[Parked], remove: Sequence[str]
    ) -> None:
        prefix = self.cluster_prefix(spider)
        owners, hash_key = f"{prefix}owners", f"{prefix}parked:{owner}"

        def write() -> None:
            # One transaction: the heartbeat is fresh before any entry is visible, so no
            # adopter can take an entry of a live owner between the two.
            pipe = self._client.pipeline(transaction=True)
            pipe.set(f"{prefix}alive:{owner}", b"1", px=_ms(ttl))
            pipe.sadd(owners, owner)
            if add:
                self._scripts["claim_parked"](
                    keys=[owners], args=[owner, prefix, *(key for key, _, _ in add)], client=pipe
                )
                pipe.hset(
                    hash_key, mapping={key: _envelope(origin, blob) for key, origin, blob in add}
                )
            if remove:
                pipe.hdel(hash_key, *remove)
            pipe.execute()

        self._cluster_call(write)

    def adopt(self, spider: str, owner: str, ttl: float, limit: int) -> list[Parked]:
        prefix = self.cluster_prefix(spider)
        keys = [f"{prefix}owners", f"{prefix}parked:{owner}", f"{prefix}alive:{owner}"]
        args: list[str | int] = [owner, prefix, limit, _ms(ttl)]
        flat = self._cluster_call(lambda: self._scripts["adopt"](keys=keys, args=args))
        return [_parked_from(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]

    def retire(self, spider: str, owner: str, *, keep: bool) -> None:
        prefix = self.cluster_prefix(spider)

        def write() -> None:
            pipe = self._client.pipeline(transaction=True)
            pipe.delete(f"{prefix}alive:{owner}")
            if not keep:
                pipe.delete(f"{prefix}parked:{owner}")
                pipe.srem(f"{prefix}owners", owner)
            pipe.execute()

        self._cluster_call(write)

    def parked(self, spider: str, owner: str | None = None) -> list[Parked]:
        prefix = self.cluster_prefix(spider)

        def read() -> list[Parked]:
            owners = [owner] if owner else map(_text, self._client.smembers(f"{prefix}owners"))
            return [
                _parked_from(key, value)
                for name in owners
                for key, value in self._client.hgetall(f"{prefix}parked:{name}").items()
            ]

        return self._cluster_call(read)

    def owners(self, spider: str) -> dict[str, bool]:
        """Owner id -> whether its heartbeat is alive (for tests)."""
        prefix = self.cluster_prefix(spider)
        names = [_text(o) for o in self._client.smembers(f"{prefix}owners")]
        return {name: bool(self._client.exists(f"{prefix}alive:{name}")) for name in names}

    def reserve_turn(
        self, spider: str, origin: str, spacing: float, horizon: float, not_before: float = 0.0
    ) -> tuple[bool, float]:
        keys = [f"{self.cluster_prefix(spider)}turn:{origin}"]
        args = [spacing, horizon, max(not_before, 0.0)]
        reserved, wait = self._cluster_call(lambda: self._scripts["turn"](keys=keys, args=args))
        return _text(reserved) == "1", float(wait)

    def close(self) -> None:
        if self._closed:
            return
        if self._fallback.unsynced:
            # A last chance for what an outage left behind: one probe (the per-call
            # timeout bounds it), which writes back when Redis answers.
            with self._lock:
                self._next_probe = self._fallback.next_write_back = 0.0
            self._call(self._client.ping)
        self._closed = True
        self._fallback.close()
        try:
            self._client.close()
        except Exception as exc:  # closing must never fail a crawl's shutdown
            logger.debug("closing redis failed: %s", self._scrub(exc))

    def wait_until_reachable(self, within: float) -> None:
        """Return once Redis answers a PING (the start-up check); else close the store and
        raise ``SettingError``, after ``within`` seconds or at once on an authentication
        error (no wait mends a password)."""
        from redis.exceptions import AuthenticationError

        deadline = time.monotonic() + within
        while True:
            try:
                self._client.ping()
                return
            except AuthenticationError as exc:  # wrong password, NOAUTH, WRONGPASS
                reason, advice = self._scrub(exc), "an authentication error, not retried"
                break
            except (self._redis_error, *self._outage_errors) as exc:
                reason, advice = self._scrub(exc), f"tried for {within:g} s"
                if time.monotonic() >= deadline:
                    break
            # Blocking, twice a second: nothing runs yet while the crawl starts.
            time.sleep(min(0.5, max(deadline - time.monotonic(), 0.0)))
        self.close()
        raise SettingError(
            f"REP_STORAGE = {self._masked_url!r}: the store does not answer ({reason}); "
            f"{advice}. Start Redis or fix the URL (an outage during a crawl does not "
            "stop it: the crawl goes on with process-local state)"
        )

    def describe(self) -> str:
        state = " (unreachable: using a process-local fallback)" if self._down else ""
        return f"redis {self._masked_url}{state}"

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
            result = self._run(operation, retry=not probing)
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

    def _run(self, operation: Callable[[], _T], *, retry: bool) -> _T:
        """``operation()``, run again after an outage error when ``retry``: a pooled
        socket may have died while idle (server restart, idle timeout); redis-py dropped
        it, so one immediate retry reconnects."""
        try:
            return operation()
        except self._timeout_errors:
            raise  # a stalled Redis: a second try would only double the wait
        except self._outage_errors:
            if not retry:
                raise
            return operation()

    def _went_down(self, exc: BaseException) -> None:
        with self._lock:
            self._next_probe = time.monotonic() + self._reconnect_interval
            first = not self._down
            self._down = True
        if first:
            logger.warning(
                "robots.txt store redis %s is unreachable (%s); continuing "
                "with a process-local store (robots.txt may be fetched once per process) "
                "and retrying at most every %gs",
                self._masked_url,
                self._scrub(exc),
                self._reconnect_interval,
            )
        else:
            logger.debug("redis still unreachable: %s", self._scrub(exc))

    def _back_up(self, probing: bool) -> None:
        """Redis answered: leave the outage state, and write back what was learned."""
        if probing:
            with self._lock:
                recovered, self._down = self._down, False
            if recovered:
                logger.info(
                    "robots.txt store redis %s is reachable again; using it "
                    "(writing back %d origin(s) learned meanwhile)",
                    self._masked_url,
                    len(self._fallback.unsynced),
                )
        if self._fallback.unsynced:
            self._write_back()

    def _write_back(self) -> None:
        """Put what the fallback learned into Redis, unless Redis has newer by now."""
        with self._lock:
            if self._down or not self._fallback.write_back_due():
                return  # (after a failed attempt: not on every call)
        try:
            self._fallback.write_back(self._write_newer, batch=_WRITE_BACK_BATCH)
        except self._outage_errors as exc:
            self._went_down(exc)
        except self._redis_error as exc:
            self._log_once(exc)
            self._fallback.next_write_back = time.monotonic() + self._reconnect_interval

    def _write_newer(self, mine: dict[str, OriginRecord]) -> int:
        theirs = self._client.mget([self.origin_key(o) for o in mine]) if mine else []
        newer = newer_records(mine, theirs, self._record_limit)
        pipe = self._client.pipeline(transaction=False)
        for origin, record in newer.items():
            pipe.set(self.origin_key(origin), pack_record(record), px=self._record_ttl_ms)
        pipe.execute()
        return len(newer)

    def _log_once(self, exc: BaseException) -> None:
        message = self._scrub(exc)
        if self._fallback.first_error(message):
            logger.warning(
                "robots.txt store redis %s: %s (treated as a cache miss; "
                "repeats are logged at DEBUG)",
                self._masked_url,
                message,
            )
        else:
            logger.debug("redis error: %s", message)


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _acquire_args(holder: str, ttl: float) -> list[str | int]:
    """The acquire script's ARGV: holder, ttl ms, and the "absurd" ms of a broken lease."""
    return [holder, _ms(ttl), int(absurd_after(ttl) * 1000)]


def _envelope(origin: str, blob: bytes) -> bytes:
    return origin.encode("utf-8") + b"\n" + blob


def _parked_from(key: Any, value: Any) -> Parked:
    origin, _, blob = bytes(value).partition(b"\n")
    return _text(key), origin.decode("utf-8", "replace"), blob


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
