"""Every gap at the server is at least the Crawl-delay (docs/cluster.md,
"Cluster-wide Crawl-delay"; Google: Crawl-delay is a minimum spacing between requests to
a site): four
scrapy-redis workers share one store (Redis, or one SQLite file), each with pages of one
origin with ``Crawl-delay: 1``. The server's own receive times are the evidence, and
every gap is checked, with no allowance but a float epsilon."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import Cluster
from tests.support.crawl import pages_of, receive_times
from tests.support.mockserver import MockServer
from tests.support.waits import wait_for

DELAY = 1.0
EPSILON = 1e-6
PAGES = 5
TAGS = ("w1", "w2", "w3", "w4")


@pytest.mark.slow
@pytest.mark.parametrize("store", ["redis", "sqlite"])
def test_four_workers_never_send_two_requests_closer_than_the_crawl_delay(
    mockserver: MockServer, cluster: Cluster, tmp_path: Path, store: str
) -> None:
    host = mockserver.unique_host("gaps")
    robots = f"User-agent: *\nCrawl-delay: {DELAY:g}\nAllow: /\n"
    mockserver.configure(host, {"robots": {"body": robots}})
    shared: dict[str, Any] = {"MAX_IDLE_TIME_BEFORE_CLOSE": 0}
    if store == "sqlite":
        shared["REP_STORAGE"] = f"sqlite:{tmp_path / 'store.db'}"
    for tag in TAGS:
        urls = [mockserver.url(host, f"/p{i}?w={tag}") for i in range(PAGES)]
        # a queue of its own each: all four want the origin at once
        queue = {
            "SCHEDULER_QUEUE_KEY": f"{tag}:requests",
            "SCHEDULER_DUPEFILTER_KEY": f"{tag}:dupefilter",
        }
        cluster.start(tag, urls, {**shared, **queue})
    total = len(TAGS) * PAGES
    wait_for(lambda: len(pages_of(mockserver, host)) == total, "all pages", timeout=180)
    for tag in TAGS:
        cluster.terminate(tag)
    codes = cluster.wait_all(timeout=60)
    assert codes == dict.fromkeys(TAGS, 0), cluster.workers["w1"].log()[-3000:]

    received = pages_of(mockserver, host)
    assert sorted(received) == sorted(f"/p{i}?w={t}" for t in TAGS for i in range(PAGES))
    times = receive_times(mockserver, host)
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert min(gaps) >= DELAY - EPSILON, [round(g, 3) for g in gaps]
    stats = [w.result()["stats"] for w in cluster.workers.values()]  # type: ignore[index]
    assert not any(s.get("robotstxt/cluster_delay/store_errors") for s in stats)
