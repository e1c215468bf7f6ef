"""A Redis outage while held requests are released (docs/cluster.md): three
scrapy-redis workers share one Redis (their queue, their dupefilter, the scrapy-rep
store). Their requests wait on robots.txt answering 503; Redis is stopped, robots.txt
then answers, so every release happens while scrapy-redis cannot enqueue. Redis comes
back (empty: it runs without persistence) and every URL is crawled exactly once. What
the mock server received is the evidence."""

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
OUTAGE_LINE = "the scheduler cannot take released requests"
#: Said at INFO while the outage lasts (LOGSTATS_INTERVAL, 5 s for these workers).
STILL_DOWN_LINE = "the scheduler's backend still does not answer"
BACK_LINE = "the scheduler takes released requests again"

#: Fast retries of robots.txt, a short heartbeat, no scrapy-redis idle close.
WORKER: dict[str, Any] = {
    "REP_RETRY_BACKOFF": 0.5,
    "REP_MAX_RETRY_BACKOFF": 1,
    "REP_CLUSTER_HEARTBEAT": 2,
    "MAX_IDLE_TIME_BEFORE_CLOSE": 0,
}


@pytest.mark.slow
def test_requests_released_while_redis_is_down_are_crawled_once_it_is_back(
    mockserver: MockServer, cluster: Cluster
) -> None:
    hosts = [mockserver.unique_host(f"outage{i}") for i in range(3)]
    for host in hosts:
        mockserver.configure(host, {"robots": UNAVAILABLE})
    tags = ("w1", "w2", "w3")
    # Each worker has URLs of its own on every origin, so each holds some of them.
    wanted = {host: [f"/{tag}-{k}" for tag in tags for k in range(4)] for host in hosts}
    for tag in tags:
        urls = [mockserver.url(h, f"/{tag}-{k}") for h in hosts for k in range(4)]
        cluster.start(tag, urls, WORKER)
    workers = [cluster.workers[tag] for tag in tags]
    redis_url = cluster.redis.url

    def parked_by_each() -> bool:
        parked = parked_by_pid(redis_url)
        return all(parked.get(w.pid) == 12 for w in workers)

    wait_for(parked_by_each, "each worker holds (and has parked) its 12 requests", timeout=90)

    # Redis goes down; then robots.txt answers, so the origins are decided and their
    # requests released while scrapy-redis cannot enqueue anything.
    cluster.redis.stop()
    for host in hosts:
        mockserver.configure(host, {"robots": ROBOTS_OK})
    wait_for(
        lambda: all(OUTAGE_LINE in w.log() for w in workers),
        "every worker's releases fail on the outage",
        timeout=90,
    )
    # Retries keep failing (1 s, 2 s, 4 s later) and the crawl keeps saying so.
    wait_for(
        lambda: all(STILL_DOWN_LINE in w.log() for w in workers),
        "every worker says that it still waits for the backend",
        timeout=90,
    )
    assert all(pages_of(mockserver, host) == [] for host in hosts)

    cluster.redis.start()
    wait_for(
        lambda: all(set(pages_of(mockserver, h)) >= set(wanted[h]) for h in hosts),
        "every URL crawled after Redis is back",
        timeout=120,
    )
    for tag in tags:
        cluster.terminate(tag)
    codes = cluster.wait_all(timeout=90)
    assert codes == dict.fromkeys(tags, 0), [w.log()[-3000:] for w in workers]

    for host in hosts:
        received = Counter(pages_of(mockserver, host))
        assert received == Counter(wanted[host]), host  # every URL exactly once
    for worker in workers:
        log = worker.log()
        assert BACK_LINE in log, log[-3000:]
        assert "could not re-inject" not in log and "is lost" not in log, log[-3000:]
        result = worker.result()
        assert result is not None, log[-3000:]
        stats = result["stats"]
        assert stats.get("robotstxt/release_retried", 0) >= 1
        assert stats.get("robotstxt/release_backend_down", 0) >= 1
        assert "robotstxt/release_failed" not in stats
        assert "robotstxt/dropped_at_close" not in stats
