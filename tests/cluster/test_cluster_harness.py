"""The real-cluster harness itself: three scrapy-redis workers share one queue and one
dupefilter, so each page is crawled once by the cluster; kill -9 and SIGTERM reach a
worker for real."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from tests.support.cluster import Cluster
from tests.support.crawl import pages_of
from tests.support.mockserver import MockServer
from tests.support.waits import wait_for


@pytest.mark.slow
def test_three_workers_crawl_each_page_once(mockserver: MockServer, cluster: Cluster) -> None:
    host = mockserver.unique_host("harness")
    pages = [f"/p{i}" for i in range(12)]
    mockserver.configure(host, {"robots": {"body": "User-agent: *\nAllow: /\n"}})
    urls = [mockserver.url(host, p) for p in pages]
    for tag in ("w1", "w2", "w3"):
        cluster.start(tag, urls, {"MAX_IDLE_TIME_BEFORE_CLOSE": 3})
    codes = cluster.wait_all()
    assert codes == {"w1": 0, "w2": 0, "w3": 0}, cluster.workers["w1"].log()[-3000:]
    assert sorted(pages_of(mockserver, host)) == sorted(pages)
    results: list[Any] = [w.result() for w in cluster.workers.values()]
    assert all(r is not None and r["reason"] == "finished" for r in results)
    crawled = sum(r["stats"].get("response_received_count", 0) for r in results)
    # each page once, plus each worker's robots.txt (once in all: the shared store)
    assert crawled == len(pages) + 1


@pytest.mark.slow
def test_kill_and_terminate_reach_the_worker(mockserver: MockServer, cluster: Cluster) -> None:
    host = mockserver.unique_host("signals")
    mockserver.configure(host, {"default": {"delay": 30}})
    slow = [mockserver.url(host, "/slow")]
    cluster.start("doomed", slow, {"MAX_IDLE_TIME_BEFORE_CLOSE": 60})
    cluster.start("stopped", [mockserver.url(host, "/slow2")], {"MAX_IDLE_TIME_BEFORE_CLOSE": 60})
    wait_for(lambda: len(pages_of(mockserver, host)) == 2, "both slow pages requested")
    cluster.kill("doomed")
    assert cluster.workers["doomed"].proc.returncode == -signal.SIGKILL
    assert cluster.workers["doomed"].result() is None  # no cleanup ran
    cluster.terminate("stopped")
    cluster.terminate("stopped")  # the second signal: Scrapy stops without waiting
    assert cluster.wait("stopped", 30) == 0
    assert "shutdown" in cluster.workers["stopped"].log().lower()
