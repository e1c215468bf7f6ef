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
  the processes together keep an origin's Crawl-delay (SPEC section 3 "crawl-delay in a
  cluster"). Redis computes turns on its own clock (``TIME`` inside the script), so the
  processes' clocks need not agree.

Each class opens its own connection from the store's spec (the robots.txt store keeps
its own). Every method is blocking: callers run them off the reactor thread. A failing
backend raises ``ClusterError`` (never a driver exception), so callers decide once what
an outage means.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

#: (key, origin, blob) of one parked request.
Parked = tuple[str, str, bytes]

REDIS_PREFIX = "scrapy-rep:v1:cluster:"


class ClusterError(Exception):
    """The shared store could not do a cluster operation (outage, damaged entry)."""


class ClusterStore(Protocol):
    def park(self, owner: str, ttl: float, add: Sequence[Parked], remove: Sequence[str]) -> None:
        """Beat ``owner``'s heartbeat, then add and remove its parked requests."""
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

    @classmethod
    def from_url(cls, url: str, spider: str) -> RedisCluster:
        import redis

        # Off the reactor thread, so a longer timeout than the record store's is fine;
        # still bounded, so a blackholed Redis fails a call instead of hanging a thread.
        client = redis.Redis.from_url(url, socket_timeout=5.0, socket_connect_timeout=5.0)
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


# -- SQLite ------------------------------------------------------------------------------

_SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS owners (
    spider TEXT NOT NULL, owner TEXT NOT NULL, alive_until REAL NOT NULL,
    PRIMARY KEY (spider, owner));
CREATE TABLE IF NOT EXISTS parked (
    spider TEXT NOT NULL, owner TEXT NOT NULL, key TEXT NOT NULL, origin TEXT NOT NULL,
    blob BLOB NOT NULL, PRIMARY KEY (spider, owner, key));
CREATE TABLE IF NOT EXISTS turns (
    spider TEXT NOT NULL, origin TEXT NOT NULL, next_at REAL NOT NULL,
    PRIMARY KEY (spider, origin));
"""


class SqliteCluster:
    """The cluster primitives in a SQLite file next to the robots.txt store's
    (``<store>.cluster``), so the store's own schema checks never see these tables.
    Processes on one machine share a wall clock, which the turns and heartbeats use."""

    def __init__(self, path: str | Path, spider: str, *, busy_timeout: float = 10.0) -> None:
        self.path = Path(path)
        self.spider = spider
        # One connection, used from worker threads: one statement sequence at a time.
        self._lock = threading.Lock()
        try:
            self._conn = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.executescript(_SQLITE_SCHEMA)
        except sqlite3.Error as exc:
            raise ClusterError(f"{type(exc).__name__}: {exc}") from None

    @classmethod
    def beside(cls, store_path: Path, spider: str) -> SqliteCluster:
        return cls(Path(f"{store_path}.cluster"), spider)

    @contextlib.contextmanager
    def _write(self) -> Any:
        """BEGIN IMMEDIATE takes the write lock before anything is read, so two processes
        never both see the same dead owner or the same free turn."""
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    yield self._conn
                    self._conn.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        self._conn.execute("ROLLBACK")
                    raise
            except (sqlite3.Error, ValueError, TypeError) as exc:
                raise ClusterError(f"{type(exc).__name__}: {exc}") from None

    def park(self, owner: str, ttl: float, add: Sequence[Parked], remove: Sequence[str]) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO owners (spider, owner, alive_until) VALUES (?, ?, ?)",
                (self.spider, owner, time.time() + ttl),
            )
            conn.executemany(
                "INSERT OR REPLACE INTO parked (spider, owner, key, origin, blob) "
                "VALUES (?, ?, ?, ?, ?)",
                [(self.spider, owner, key, origin, blob) for key, origin, blob in add],
            )
            conn.executemany(
                "DELETE FROM parked WHERE spider = ? AND owner = ? AND key = ?",
                [(self.spider, owner, key) for key in remove],
            )

    def adopt(self, owner: str, ttl: float, limit: int) -> list[Parked]:
        now = time.time()
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO owners (spider, owner, alive_until) VALUES (?, ?, ?)",
                (self.spider, owner, now + ttl),
            )
            rows = conn.execute(
                "SELECT p.owner, p.key, p.origin, p.blob FROM parked p "
                "LEFT JOIN owners o ON o.spider = p.spider AND o.owner = p.owner "
                "WHERE p.spider = ? AND p.owner != ? "
                "AND (o.alive_until IS NULL OR NOT (o.alive_until >= ?)) LIMIT ?",
                (self.spider, owner, now, limit),
            ).fetchall()
            mine = _present(conn, self.spider, owner, [row[1] for row in rows])
            adopted: list[Parked] = []
            for dead, key, origin, blob in rows:
                conn.execute(
                    "DELETE FROM parked WHERE spider = ? AND owner = ? AND key = ?",
                    (self.spider, dead, key),
                )
                if key in mine:
                    continue  # a duplicate of one we hold: collapses
                mine.add(key)
                conn.execute(
                    "INSERT INTO parked (spider, owner, key, origin, blob) VALUES (?, ?, ?, ?, ?)",
                    (self.spider, owner, key, origin, blob),
                )
                adopted.append((str(key), str(origin), bytes(blob)))
            conn.execute(
                "DELETE FROM owners WHERE spider = ? AND NOT (alive_until >= ?) AND owner NOT IN "
                "(SELECT owner FROM parked WHERE spider = ?)",
                (self.spider, now, self.spider),
            )
        return adopted

    def retire(self, owner: str, *, keep: bool) -> None:
        with self._write() as conn:
            conn.execute(
                "UPDATE owners SET alive_until = 0 WHERE spider = ? AND owner = ?",
                (self.spider, owner),
            )
            if not keep:
                conn.execute(
                    "DELETE FROM parked WHERE spider = ? AND owner = ?", (self.spider, owner)
                )
                conn.execute(
                    "DELETE FROM owners WHERE spider = ? AND owner = ?", (self.spider, owner)
                )

    def parked(self, owner: str | None = None) -> list[Parked]:
        query = "SELECT key, origin, blob FROM parked WHERE spider = ?"
        args: tuple[str, ...] = (self.spider,)
        if owner:
            query += " AND owner = ?"
            args += (owner,)
        try:
            with self._lock:
                rows = self._conn.execute(query, args).fetchall()
        except sqlite3.Error as exc:
            raise ClusterError(f"{type(exc).__name__}: {exc}") from None
        return [(str(k), str(o), bytes(b)) for k, o, b in rows]

    def reserve_turn(
        self, origin: str, spacing: float, horizon: float, not_before: float = 0.0
    ) -> tuple[bool, float]:
        with self._write() as conn:
            now = time.time()
            row = conn.execute(
                "SELECT next_at FROM turns WHERE spider = ? AND origin = ?", (self.spider, origin)
            ).fetchone()
            try:
                next_at = float(row[0]) if row is not None else 0.0
            except (TypeError, ValueError):
                next_at = 0.0  # an unreadable row is broken, not obeyed
            if next_at > now + horizon + spacing:
                next_at = 0.0  # absurd (a clock jump): broken, not obeyed
            start = max(now + max(not_before, 0.0), next_at)
            if start - now > horizon:
                return False, start - now - horizon
            conn.execute(
                "INSERT OR REPLACE INTO turns (spider, origin, next_at) VALUES (?, ?, ?)",
                (self.spider, origin, start + spacing),
            )
            return True, start - now

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._conn.close()


def _present(conn: sqlite3.Connection, spider: str, owner: str, keys: Iterable[str]) -> set[str]:
    found: set[str] = set()
    for key in set(keys):
        row = conn.execute(
            "SELECT 1 FROM parked WHERE spider = ? AND owner = ? AND key = ?", (spider, owner, key)
        ).fetchone()
        if row is not None:
            found.add(key)
    return found


def open_cluster(storage_spec: str, spider: str) -> ClusterStore | None:
    """The cluster primitives for ``REP_STORAGE``'s store, or None when it is not shared
    across processes (``memory``, a custom class). Raises ClusterError when the store
    cannot be opened."""
    lowered = storage_spec.strip().lower()
    if lowered.startswith(("redis://", "rediss://", "unix://")):
        try:
            return RedisCluster.from_url(storage_spec.strip(), spider)
        except (ImportError, ValueError, TypeError) as exc:
            raise ClusterError(f"{type(exc).__name__}") from None
    if lowered == "sqlite" or lowered.startswith("sqlite:"):
        from scrapy_rep.storage.sqlite_store import SqliteStorage

        path = SqliteStorage.path_from_spec(storage_spec.strip())
        assert path is not None
        return SqliteCluster.beside(path, spider)
    return None
