"""Held requests in a real scrapy-redis cluster survive their holder (docs/cluster.md):
three workers share one Redis (queue, dupefilter, scrapy-rep store);
one origin answers 503 for robots.txt until the test lets it recover. What the mock
server received is the evidence."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.support.cluster import Cluster, parked_by_pid
from tests.support.crawl import pages_of
from tests.support.mockserver import MockServer
from tests.support.waits import wait_for

UNAVAILABLE = {"status": 503}
ROBOTS_OK = {"body": "User-agent: *\nAllow: /\n"}

#: Fast retries of robots.txt, a short heartbeat (a dead holder's requests are adopted
#: 2 s after its last beat), no scrapy-redis idle close unless a test sets one.
WORKER: dict[str, Any] = {
    "REP_RETRY_BACKOFF": 0.5,
    "REP_MAX_RETRY_BACKOFF": 1,
    "REP_CLUSTER_HEARTBEAT": 2,
    "MAX_IDLE_TIME_BEFORE_CLOSE": 0,
}


def crawled_once(mockserver: MockServer, host: str, paths: list[str]) -> bool:
    received = Counter(pages_of(mockserver, host))
    return all(received[p] >= 1 for p in paths)


@pytest.mark.slow
def test_sigterm_then_kill_9_of_the_holder_loses_no_held_request(
    mockserver: MockServer, cluster: Cluster
) -> None:
    host = mockserver.unique_host("held")
    mockserver.configure(host, {"robots": UNAVAILABLE})
    paths = [f"/held-{i}" for i in range(25)]
    urls = [mockserver.url(host, p) for p in paths]
    redis_url = cluster.redis.url

    # w1 alone holds the 25 requests (robots.txt answers 503), parked in the store.
    w1 = cluster.start("w1", urls, WORKER)
    wait_for(lambda: parked_by_pid(redis_url).get(w1.pid) == 25, "w1 parks 25 requests")
    w2 = cluster.start("w2", [], WORKER)
    w3 = cluster.start("w3", [], WORKER)
    wait_for(lambda: "Spider opened" in w2.log() and "Spider opened" in w3.log(), "w2, w3 up")

    # SIGTERM: w1 hands them back to the scrapy-redis queue (SCHEDULER_PERSIST); w2 and
    # w3 take them from there and hold them in turn (the origin is still down).
    cluster.terminate("w1")
    assert cluster.wait("w1", 60) == 0, w1.log()[-3000:]
    result = w1.result()
    assert result is not None and result["stats"].get("robotstxt/handed_back") == 25
    wait_for(lambda: sum(parked_by_pid(redis_url).values()) == 25, "25 parked by w2/w3")

    # kill -9 of the (main) holder now: nothing of it runs, its parked entries remain.
    holders = parked_by_pid(redis_url)
    holder = cluster.by_pid(max(holders, key=lambda pid: holders[pid]))
    survivor = next(w for w in (w2, w3) if w is not holder)
    cluster.kill(holder.tag)
    assert pages_of(mockserver, host) == []

    # The origin recovers: the survivor adopts the dead holder's requests (its heartbeat
    # expired) and crawls all 25, each exactly once.
    mockserver.configure(host, {"robots": ROBOTS_OK})
    wait_for(lambda: crawled_once(mockserver, host, paths), "all 25 crawled", timeout=90)
    cluster.terminate(survivor.tag)
    assert cluster.wait(survivor.tag, 60) == 0, survivor.log()[-3000:]
    assert sorted(pages_of(mockserver, host)) == sorted(paths)  # each exactly once
    stats = survivor.result()["stats"]  # type: ignore[index]
    assert stats.get("robotstxt/ledger/adopted") == holders[holder.pid]
    assert "robotstxt/dropped_at_close" not in stats
    assert sum(parked_by_pid(redis_url).values()) == 0


@pytest.mark.slow
def test_a_request_scrapy_redis_cannot_enqueue_does_not_lose_the_others(
    mockserver: MockServer, cluster: Cluster
) -> None:
    """Nine held requests, one with a callback that is not a spider method: scrapy-redis
    cannot serialise it, nor can the store. The eight others are crawled once the
    origin recovers; the bad one is logged and counted, twice over (not parked, not
    re-injected)."""
    host = mockserver.unique_host("bad")
    mockserver.configure(host, {"robots": UNAVAILABLE})
    paths = [f"/good-{i}" for i in range(8)]
    good = [mockserver.url(host, p) for p in paths]
    bad = [mockserver.url(host, "/bad")]
    worker = cluster.start("w1", good, WORKER, unenqueueable=bad)
    wait_for(lambda: parked_by_pid(cluster.redis.url).get(worker.pid) == 8, "8 parked")
    assert "cannot be kept in the shared store" in worker.log()
    mockserver.configure(host, {"robots": ROBOTS_OK})
    wait_for(lambda: crawled_once(mockserver, host, paths), "the 8 crawled", timeout=60)
    cluster.terminate("w1")
    assert cluster.wait("w1", 60) == 0, worker.log()[-3000:]
    assert sorted(pages_of(mockserver, host)) == sorted(paths)
    stats = worker.result()["stats"]  # type: ignore[index]
    assert stats.get("robotstxt/ledger/unserializable") == 1
    assert stats.get("robotstxt/release_failed") == 1
    assert "could not re-inject" in worker.log()


@pytest.mark.slow
def test_scrapy_redis_idle_close_is_honoured_and_the_requests_kept(
    mockserver: MockServer, cluster: Cluster
) -> None:
    """With waiting requests that outlive the worker, a worker idle for
    MAX_IDLE_TIME_BEFORE_CLOSE closes as scrapy-redis says (not after REP_IDLE_WAIT);
    the next worker gets its requests and crawls them when the origin recovers."""
    host = mockserver.unique_host("idle")
    mockserver.configure(host, {"robots": UNAVAILABLE})
    paths = [f"/kept-{i}" for i in range(5)]
    urls = [mockserver.url(host, p) for p in paths]
    first = cluster.start("first", urls, {**WORKER, "MAX_IDLE_TIME_BEFORE_CLOSE": 3})
    assert cluster.wait("first", 60) == 0, first.log()[-3000:]
    result = first.result()
    assert result is not None and result["reason"] == "finished"
    # SCHEDULER_PERSIST: handed back to the scrapy-redis queue, the next worker's
    stats = result["stats"]
    assert stats.get("robotstxt/handed_back", 0) + stats.get("robotstxt/kept_in_store", 0) == 5
    assert "closes on MAX_IDLE_TIME_BEFORE_CLOSE" in first.log()
    mockserver.configure(host, {"robots": ROBOTS_OK})
    second = cluster.start("second", [], WORKER)
    wait_for(lambda: crawled_once(mockserver, host, paths), "the 5 crawled", timeout=60)
    cluster.terminate("second")
    assert cluster.wait("second", 60) == 0, second.log()[-3000:]
    assert sorted(pages_of(mockserver, host)) == sorted(paths)
