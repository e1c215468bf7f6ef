"""Crawler processes killed for real while they hold leases or write the store.

* a holder frozen by SIGSTOP (alive, so nobody can call it dead) stops renewing: its
  lease runs out after REP_LEASE_TTL and another crawl takes over (SQLite and Redis);
  a holder killed with ``kill -9`` is taken over at once (test_crawl_storage_shared.py);
* 30 ``kill -9`` at random moments of crawls writing one SQLite store leave a file that
  opens without a warning and passes ``PRAGMA integrity_check``, and the next run
  refetches no robots.txt the store holds."""

from __future__ import annotations

import logging
import os
import random
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from scrapy_rep.policy.origin import origin_of
from scrapy_rep.storage.sqlite_store import SqliteStorage
from tests.crawl.test_crawl_storage_shared import start_process, stored_lease_expiry
from tests.storage.test_storage import ours
from tests.support import redis_server as redis_helper
from tests.support.crawl import DISALLOW_PRIVATE, pages_of
from tests.support.crawl_storage import REP, store
from tests.support.waits import sleep, wait_until

redis_server = redis_helper.redis_server  # the `store` fixture's redis-server

__all__ = ["store"]  # a fixture used below

SHORT_LEASES = ("-s", "REP_LEASE_TTL=2", "-s", "REP_LEASE_RENEW_INTERVAL=0.5")


@pytest.mark.slow
@pytest_twisted.ensureDeferred
async def test_a_frozen_holder_loses_its_lease_after_the_ttl(
    mockserver: Any,
    run_crawl: Any,
    host: str,
    tmp_path: Path,
    subprocess_env: dict[str, str],
    store: str,
) -> None:
    """A crawler process fetching a slow robots.txt is frozen (SIGSTOP): alive, so its
    lease cannot be called dead, but it no longer renews it. Another crawl sharing the
    store waits for the 2 s lease to run out, takes it over, fetches robots.txt itself
    and crawls normally, however long the frozen fetch's DOWNLOAD_TIMEOUT."""
    hanging = {"body": DISALLOW_PRIVATE, "delay": 30}
    mockserver.configure(host, {"robots": [hanging, {"body": DISALLOW_PRIVATE}]})
    (tmp_path / "go").write_text("go")
    origin = origin_of(mockserver.url(host, "/"))
    proc, _, log = start_process(
        tmp_path,
        subprocess_env,
        store,
        "frozen",
        [mockserver.url(host, "/a")],
        (*SHORT_LEASES, "-s", "DOWNLOAD_TIMEOUT=600"),
    )
    try:
        await wait_until(
            lambda: mockserver.count(host, "/robots.txt") == 1 or proc.poll() is not None,
            "the frozen process's robots.txt request",
            timeout=60,
        )
        assert proc.poll() is None, log.read_text()[-3000:]
        await sleep(1.0)  # a renewal or two: the lease is renewed while the fetch runs
        assert stored_lease_expiry(store, origin) > time.time()
        os.kill(proc.pid, signal.SIGSTOP)

        urls = [mockserver.url(host, "/b"), mockserver.url(host, "/private/c")]
        crawler = await run_crawl(urls, settings={**REP, "REP_STORAGE": store}, timeout=60)
    finally:
        proc.kill()  # SIGKILL ends a stopped process too
        proc.wait()
    assert mockserver.paths(host) == ["/robots.txt", "/robots.txt", "/b"]
    assert crawler.stat("robotstxt/request_count") == 1
    assert crawler.stat("robotstxt/forbidden") == 1
    assert crawler.spider.response_urls == [mockserver.url(host, "/b")]


@pytest.mark.slow
@pytest_twisted.ensureDeferred
async def test_thirty_kills_during_writes_leave_a_sound_store(
    mockserver: Any,
    run_crawl: Any,
    tmp_path: Path,
    subprocess_env: dict[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """30 crawler processes, one after another, share one SQLite store; each crawls 12
    origins of its own plus 12 shared by all, and is killed with SIGKILL at a random
    moment after its first robots.txt request, while it takes leases and writes
    records."""
    rng = random.Random(2024)
    shared = [mockserver.unique_host("killed-shared") for _ in range(12)]
    own = [[mockserver.unique_host(f"killed-{n}") for _ in range(12)] for n in range(30)]
    hosts = shared + [h for group in own for h in group]
    mockserver.configure_many(
        {h: {"robots": {"body": DISALLOW_PRIVATE, "delay": rng.uniform(0.0, 0.5)}} for h in hosts}
    )
    db = tmp_path / "store.db"
    spec = f"sqlite:{db}"
    (tmp_path / "go").write_text("go")
    killed_mid_crawl = 0
    for n in range(30):
        urls = [mockserver.url(h, "/p") for h in own[n] + shared]
        proc, result, _ = start_process(
            tmp_path, subprocess_env, spec, f"k{n}", urls, ("-s", "LOG_LEVEL=INFO")
        )
        try:
            await wait_until(
                lambda group=own[n], proc=proc: (
                    any(mockserver.count(h, "/robots.txt") for h in group)
                    or proc.poll() is not None
                ),
                "the process's first robots.txt request",
                timeout=60,
            )
            await sleep(rng.uniform(0.0, 0.6))
        finally:
            if proc.poll() is None and not result.exists():
                killed_mid_crawl += 1
            proc.kill()
            proc.wait()
    assert killed_mid_crawl >= 20, "most kills must land while the crawl is running"

    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="scrapy_rep"):
        check = SqliteStorage(db)
        stored = {h for h in hosts if check.get(origin_of(mockserver.url(h, "/"))) is not None}
        check.close()
    assert not ours(caplog), [r.getMessage() for r in ours(caplog)]
    assert len(stored) >= 30, "the killed crawls stored (almost) nothing"
    before = {h: mockserver.count(h, "/robots.txt") for h in hosts}

    crawler = await run_crawl(
        [mockserver.url(h, "/final") for h in hosts],
        settings={**REP, "REP_STORAGE": spec, "CONCURRENT_REQUESTS": 32},
        timeout=120,
    )
    for h in hosts:
        refetched = mockserver.count(h, "/robots.txt") - before[h]
        assert refetched == (0 if h in stored else 1), (h, h in stored, refetched)
        assert "/final" in pages_of(mockserver, h)
    assert crawler.stat("robotstxt/cache_hit") == len(stored)
    assert crawler.stat("robotstxt/request_count", 0) == len(hosts) - len(stored)
    print(f"{killed_mid_crawl} of 30 kills mid-crawl; {len(stored)} of {len(hosts)} stored")
