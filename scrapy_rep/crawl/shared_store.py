"""The shared store outside a crawl, and scrapy-redis's idle close.

A crawl's durable ledger (``crawl/store_ledger.py``) and cluster-wide Crawl-delay
(``crawl/cluster_delay.py``) use the cluster primitives of the crawl's own robots.txt
store (``RobotsStorage.cluster``: one connection per store). ``open_cluster`` opens a
store of its own, for tools and tests that look at what a crawl parked.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from scrapy_rep.policy.config import Config, SettingError, storage_spec
from scrapy_rep.storage.cluster import ClusterError, SpiderCluster

if TYPE_CHECKING:
    from scrapy_rep.storage.cluster import ClusterStore


def open_cluster(storage: str | Config, spider: str) -> ClusterStore | None:
    """``spider``'s cluster primitives on a store of its own, opened from a ``Config``
    or a spelling of ``REP_STORAGE`` (for tools, tests and benchmarks: a crawl uses its
    robots.txt store's, ``RobotsStorage.cluster``); closing it closes that store. None when the
    store is not shared across processes (``memory``, a custom class). Raises
    ClusterError when the store cannot be opened."""
    from scrapy_rep.storage.factory import create_storage

    try:
        config = storage if isinstance(storage, Config) else Config(storage=storage_spec(storage))
        store = create_storage(config)
    except SettingError as exc:  # (its message never shows a Redis password)
        raise ClusterError(str(exc)) from None
    try:
        cluster = store.cluster(spider)
    except ClusterError:
        store.close()
        raise
    if cluster is None:
        store.close()
        return None
    return SpiderCluster(store, spider, owns_store=True)


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
