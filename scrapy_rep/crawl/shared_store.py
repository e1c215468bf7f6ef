"""The shared store as the waiting room and the cluster see it: which ``REP_STORAGE``
values are shared across processes (Redis; SQLite for processes on one machine) and
their cluster primitives (``storage/cluster.py``), and scrapy-redis's idle close.

Used by the durable ledger (``crawl/store_ledger.py``) and the cluster-wide Crawl-delay
(``crawl/cluster_delay.py``); each opens its own connection.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from scrapy_rep.storage.cluster import ClusterError

if TYPE_CHECKING:
    from scrapy_rep.storage.cluster import ClusterStore


def open_cluster(storage_spec: str, spider: str) -> ClusterStore | None:
    """The cluster primitives for ``REP_STORAGE``'s store (its own connection), or None
    when the store is not shared across processes (``memory``, a custom class). Raises
    ClusterError when the store cannot be opened."""
    spec = storage_spec.strip()
    lowered = spec.lower()
    if lowered.startswith(("redis://", "rediss://", "unix://")):
        from scrapy_rep.storage.cluster import RedisCluster

        try:
            return RedisCluster.from_url(spec, spider)
        except (ImportError, ValueError, TypeError) as exc:
            # the type only: a bad URL's message may quote its password
            raise ClusterError(type(exc).__name__) from None
    if lowered == "sqlite" or lowered.startswith("sqlite:"):
        from scrapy_rep.storage.cluster_sqlite import SqliteCluster
        from scrapy_rep.storage.sqlite_store import SqliteStorage

        path = SqliteStorage.path_from_spec(spec)
        assert path is not None
        return SqliteCluster.beside(path, spider)
    return None


def scrapy_redis_idle_expired(spider: Any) -> bool:
    """Whether a scrapy-redis spider (``RedisMixin``) has been idle for its
    ``MAX_IDLE_TIME_BEFORE_CLOSE`` and so wants to close: its own ``spider_idle``
    receiver then stops raising ``DontCloseSpider`` (scrapy-redis 0.9 semantics: idle
    time counts from the last time its start-URL key had data)."""
    max_idle = getattr(spider, "max_idle_time", None)
    since = getattr(spider, "spider_idle_start_time", None)
    if not isinstance(max_idle, int) or max_idle <= 0 or not isinstance(since, int):
        return False
    return int(time.time()) - since >= max_idle
