"""Cluster coordination on the shared stores: parked requests, heartbeats, Crawl-delay turns.

Several crawler processes that share a store (Redis across machines, one SQLite file on
one machine) coordinate three things here, all keyed by the spider's name so that two
spiders sharing a store never touch each other's entries:

* **Parked requests.** A process records each request it holds back (an opaque blob
  made by the caller, keyed so duplicates collapse) under its own owner id, and removes
  it when the request leaves the waiting room.
* **Heartbeats.** Each owner refreshes a heartbeat that expires ``ttl`` seconds after
  its last beat. An owner whose heartbeat has expired is dead: another process (or the
  next run of the spider) adopts its parked requests, in one atomic step, so two
  adopters never both get the same request.
* **Crawl-delay turns.** A per-origin "next allowed time", reserved atomically, so that
  the processes together keep an origin's Crawl-delay (docs/cluster.md, "crawl-delay in a
  cluster"). Redis computes turns on its own clock (``TIME`` inside the script), so the
  processes' clocks need not agree.

``RedisCluster`` is here, ``SqliteCluster`` in ``cluster_sqlite.py``;
``crawl/store_ledger.open_cluster`` picks one for ``REP_STORAGE``. Each opens its own
connection from the store's spec (the robots.txt store keeps its own). Every method
is blocking: callers run them off the reactor thread. A failing backend raises
``ClusterError`` (never a driver exception), so callers decide once what an outage
means.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

#: (key, origin, blob) of one parked request.
Parked = tuple[str, str, bytes]

REDIS_PREFIX = "scrapy-rep:v1:cluster:"


class ClusterError(Exception):
    """The shared store could not do a cluster operation (outage, damaged entry)."""


class ClusterStore(Protocol):
    def park(self, owner: str, ttl: float, add: Sequence[Parked], remove: Sequence[str]) -> None:
        """Beat ``owner``'s heartbeat, then add and remove its parked requests. Parking
        is idempotent per key across owners: an entry of the same key under another
        owner is taken over (one parked copy per request)."""
        ...

    def adopt(self, owner: str, ttl: float, limit: int) -> list[Parked]:
        """Beat ``owner``'s heartbeat (the adopted requests are then safe with it), move
        at most ``limit`` parked requests of dead owners to ``owner`` and return them
        (keys ``owner`` already has are dropped from the dead owner, not returned)."""
        ...

    def retire(self, owner: str, *, keep: bool) -> None:
        """``owner`` stops: its heartbeat goes at once; its parked requests stay for
        adoption when ``keep``, else they are removed."""
        ...

    def parked(self, owner: str | None = None) -> list[Parked]:
        """What is parked (for one owner, or all): for tests and ``scrapy robots``."""
        ...

    def reserve_turn(
        self, origin: str, spacing: float, horizon: float, not_before: float = 0.0
    ) -> tuple[bool, float]:
        """Reserve the origin's next turn. Returns (reserved, seconds until the turn).

        The turn is the later of now (or ``not_before`` seconds from now, when the
        caller cannot go sooner) and the origin's next allowed time; the next
        allowed time then moves ``spacing`` past it. A turn more than ``horizon`` seconds
        away is not reserved (so a process that dies wastes at most ``horizon`` seconds
        of the origin's turns); the answer then says how long until one may be."""
        ...

    def close(self) -> None: ...


# -- Redis -------------------------------------------------------------------------------

# KEYS: owners set, my parked hash, my heartbeat. ARGV: me, key prefix, limit, ttl ms.
# Keys of dead owners are computed here: fine on a single Redis (not Redis Cluster,
# where all keys of a script must be declared).
_ADOPT_LUA = """
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
"""

# KEYS: owners set. ARGV: me, key prefix, then the keys being parked by me. The same
# keys under other owners are removed: parking takes a request over, one copy per key.
_TAKE_OVER_LUA = """
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
"""

# KEYS: the origin's turn key. ARGV: spacing, horizon, not_before. Returns {reserved, wait} as
# strings (Lua numbers become integers in replies). Redis' own clock: no skew.
_TURN_LUA = """
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
"""


class RedisCluster:
    """The cluster primitives in Redis (keys under ``scrapy-rep:v1:cluster:<spider>:``)."""

    def __init__(self, client: Any, spider: str) -> None:
        from redis.exceptions import RedisError

        self._client = client
        self._errors: tuple[type[BaseException], ...] = (RedisError, OSError)
        self.prefix = f"{REDIS_PREFIX}{spider}:"
        self._owners = f"{self.prefix}owners"
        self._adopt = client.register_script(_ADOPT_LUA)
        self._turn = client.register_script(_TURN_LUA)
        self._take_over = client.register_script(_TAKE_OVER_LUA)

    @classmethod
    def from_url(cls, url: str, spider: str) -> RedisCluster:
        import redis

        # Off the reactor thread, so a longer timeout than the record store's is fine;
        # still bounded, so a blackholed Redis fails a call instead of hanging a thread.
        client = redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)
        return cls(client, spider)

    def _parked_key(self, owner: str) -> str:
        return f"{self.prefix}parked:{owner}"

    def _alive_key(self, owner: str) -> str:
        return f"{self.prefix}alive:{owner}"

    def _turn_key(self, origin: str) -> str:
        return f"{self.prefix}turn:{origin}"

    def park(self, owner: str, ttl: float, add: Sequence[Parked], remove: Sequence[str]) -> None:
        hash_key = self._parked_key(owner)
        try:
            # One transaction: the heartbeat is fresh before any entry is visible, so no
            # adopter can take an entry of a live owner between the two.
            pipe = self._client.pipeline(transaction=True)
            pipe.set(self._alive_key(owner), b"1", px=max(1, int(ttl * 1000)))
            pipe.sadd(self._owners, owner)
            if add:
                self._take_over(
                    keys=[self._owners],
                    args=[owner, self.prefix, *(key for key, _, _ in add)],
                    client=pipe,
                )
                pipe.hset(
                    hash_key, mapping={key: _envelope(origin, blob) for key, origin, blob in add}
                )
            if remove:
                pipe.hdel(hash_key, *remove)
            pipe.execute()
        except self._errors as exc:
            raise ClusterError(f"{type(exc).__name__}: {exc}") from None

    def adopt(self, owner: str, ttl: float, limit: int) -> list[Parked]:
        try:
            flat = self._adopt(
                keys=[self._owners, self._parked_key(owner), self._alive_key(owner)],
                args=[owner, self.prefix, limit, max(1, int(ttl * 1000))],
            )
        except self._errors as exc:
            raise ClusterError(f"{type(exc).__name__}: {exc}") from None
        return [_parked_from(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]

    def retire(self, owner: str, *, keep: bool) -> None:
        try:
            pipe = self._client.pipeline(transaction=True)
            pipe.delete(self._alive_key(owner))
            if not keep:
                pipe.delete(self._parked_key(owner))
                pipe.srem(self._owners, owner)
            pipe.execute()
        except self._errors as exc:
            raise ClusterError(f"{type(exc).__name__}: {exc}") from None

    def parked(self, owner: str | None = None) -> list[Parked]:
        try:
            owners = [owner] if owner else [_text(o) for o in self._client.smembers(self._owners)]
            found: list[Parked] = []
            for name in owners:
                for key, value in self._client.hgetall(self._parked_key(name)).items():
                    found.append(_parked_from(key, value))
            return found
        except self._errors as exc:
            raise ClusterError(f"{type(exc).__name__}: {exc}") from None

    def owners(self) -> dict[str, bool]:
        """Owner id -> whether its heartbeat is alive (for tests)."""
        names = [_text(o) for o in self._client.smembers(self._owners)]
        return {name: bool(self._client.exists(self._alive_key(name))) for name in names}

    def reserve_turn(
        self, origin: str, spacing: float, horizon: float, not_before: float = 0.0
    ) -> tuple[bool, float]:
        try:
            reserved, wait = self._turn(
                keys=[self._turn_key(origin)], args=[spacing, horizon, max(not_before, 0.0)]
            )
        except self._errors as exc:
            raise ClusterError(f"{type(exc).__name__}: {exc}") from None
        return _text(reserved) == "1", float(wait)

    def close(self) -> None:
        with contextlib.suppress(*self._errors):
            self._client.close()


def _envelope(origin: str, blob: bytes) -> bytes:
    return origin.encode("utf-8") + b"\n" + blob


def _parked_from(key: Any, value: Any) -> Parked:
    origin, _, blob = bytes(value).partition(b"\n")
    return _text(key), origin.decode("utf-8", "replace"), blob


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
