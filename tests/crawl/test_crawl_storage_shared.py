"""Several crawler processes sharing one persistent store (docs/storage.md).

* two crawler processes sharing a store fetch each robots.txt exactly once;
* a process killed while it holds a fetch lease does not strand the others."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from scrapy_rep.policy.origin import origin_of
from scrapy_rep.storage.redis_store import RedisStorage
from tests.support import redis_server as redis_helper
from tests.support.crawl import DISALLOW_PRIVATE
from tests.support.crawl_storage import REP, store
from tests.support.resolver import RESOLVER_SETTING
from tests.support.scrapy_compat import RESOLVER_SETTING_NAME
from tests.support.subprocess_spider import SPIDER_FILE
from tests.support.waits import wait_for_files, wait_until

redis_server = redis_helper.redis_server  # the `store` fixture's redis-server

__all__ = ["store"]  # a fixture used below


def start_process(
    tmp_path: Path,
    env: dict[str, str],
    store: str,
    tag: str,
    urls: list[str],
    extra: tuple[str, ...] = (),
) -> tuple[subprocess.Popen[bytes], Path, Path]:
    result = tmp_path / f"result-{tag}.json"
    log = tmp_path / f"log-{tag}.txt"
    config = {"urls": urls, "tag": tag, "gate_dir": str(tmp_path), "result": str(result)}
    with log.open("wb") as log_file:
        command = [
            sys.executable, "-m", "scrapy", "runspider", str(SPIDER_FILE),
            "-s", f"{RESOLVER_SETTING_NAME}={RESOLVER_SETTING}",
            "-s", f"REP_STORAGE={store}",
            *extra,
        ]  # fmt: skip
        proc = subprocess.Popen(
            command,
            env={**env, "REP_TEST_CONFIG": json.dumps(config)},
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=log_file,
        )
    return proc, result, log


@pytest.mark.slow
def test_two_processes_fetch_each_robots_txt_once(
    mockserver: Any, tmp_path: Path, subprocess_env: dict[str, str], store: str
) -> None:
    """Two `scrapy runspider` processes start their requests at the same moment (a
    file barrier) against 5 origins whose robots.txt answers after 1 s: whichever
    process takes an origin's lease fetches it, the other waits on the shared store.
    Each robots.txt is requested once in all, and both processes decide alike."""
    hosts = [mockserver.unique_host(f"procs-{i}") for i in range(5)]
    robots = {"body": DISALLOW_PRIVATE, "delay": 1.0}
    mockserver.configure_many({h: {"robots": robots} for h in hosts})
    paths = ["/a", "/b", "/private/c"]
    urls = [mockserver.url(h, p) for p in paths for h in hosts]
    procs, results, logs = [], [], []
    try:
        for tag in ("one", "two"):
            proc, result, log = start_process(tmp_path, subprocess_env, store, tag, urls)
            procs.append(proc)
            results.append(result)
            logs.append(log)
        wait_for_files([tmp_path / "ready-one", tmp_path / "ready-two"], procs)
        (tmp_path / "go").write_text("go")
        for proc in procs:
            proc.wait(timeout=60)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for proc, log in zip(procs, logs, strict=True):
        assert proc.returncode == 0, log.read_text()[-3000:]

    for h in hosts:
        assert mockserver.count(h, "/robots.txt") == 1, (h, mockserver.paths(h))
        received = sorted(p for p in mockserver.paths(h) if p != "/robots.txt")
        assert received == ["/a?p=one", "/a?p=two", "/b?p=one", "/b?p=two"]

    outcomes = [json.loads(result.read_text()) for result in results]
    fetched = 0
    for tag, outcome in zip(("one", "two"), outcomes, strict=True):
        stats = outcome["stats"]
        assert outcome["reason"] == "finished"
        expected = sorted(mockserver.url(h, f"{p}?p={tag}") for h in hosts for p in ("/a", "/b"))
        assert outcome["downloaded"] == expected
        assert stats["robotstxt/forbidden"] == len(hosts)
        assert outcome["failed"] == sorted(
            ["IgnoreRequest", "Forbidden by robots.txt", mockserver.url(h, f"/private/c?p={tag}")]
            for h in hosts
        )
        # Both started before any robots.txt was known: every request waited.
        assert stats["robotstxt/delayed"] == len(urls)
        assert stats["robotstxt/released"] == len(urls)
        assert "robotstxt/dropped_at_close" not in stats
        fetched += stats.get("robotstxt/request_count", 0)
    assert fetched == len(hosts)


def stored_lease_expiry(store: str, origin: str) -> float:
    """When the fetch lease of ``origin`` in ``store`` expires (0: no lease)."""
    if store.startswith("sqlite:"):
        conn = sqlite3.connect(store.removeprefix("sqlite:"))
        try:
            row = conn.execute(
                "SELECT expires_at FROM leases WHERE origin = ?", (origin,)
            ).fetchone()
        finally:
            conn.close()
        return 0.0 if row is None else float(row[0])
    import redis

    client = redis.Redis.from_url(store)
    try:
        ttl_ms = client.pttl(RedisStorage.lease_key(origin))
    finally:
        client.close()
    return 0.0 if ttl_ms < 0 else time.time() + ttl_ms / 1000


@pytest.mark.slow
@pytest_twisted.ensureDeferred
async def test_a_dead_lease_holder_does_not_strand_the_others(
    mockserver: Any,
    run_crawl: Any,
    host: str,
    tmp_path: Path,
    subprocess_env: dict[str, str],
    store: str,
) -> None:
    """A crawler process is killed (SIGKILL) while it holds an origin's fetch lease
    (REP_LEASE_TTL=2, renewed every 0.5 s). Another crawler sharing the store sees that
    the holder was a process of this machine that no longer runs, takes the lease over
    at once (without that, within REP_LEASE_TTL: test_crawl_storage_kills.py), fetches
    robots.txt itself and crawls normally."""
    hanging = {"body": DISALLOW_PRIVATE, "delay": 10}
    mockserver.configure(host, {"robots": [hanging, {"body": DISALLOW_PRIVATE}]})
    (tmp_path / "go").write_text("go")
    urls = [mockserver.url(host, "/a")]
    proc, _, log = start_process(
        tmp_path,
        subprocess_env,
        store,
        "doomed",
        urls,
        ("-s", "REP_LEASE_TTL=2", "-s", "REP_LEASE_RENEW_INTERVAL=0.5"),
    )
    try:
        await wait_until(
            lambda: mockserver.count(host, "/robots.txt") == 1 or proc.poll() is not None,
            "the doomed process's robots.txt request",
            timeout=60,
        )
        assert proc.poll() is None, log.read_text()[-3000:]
    finally:
        proc.kill()
        proc.wait()

    # The dead process's lease is still in the store, so the next crawl has to wait.
    assert stored_lease_expiry(store, origin_of(mockserver.url(host, "/"))) > time.time()

    urls = [mockserver.url(host, "/b"), mockserver.url(host, "/private/c")]
    crawler = await run_crawl(urls, settings={**REP, "REP_STORAGE": store})
    assert mockserver.paths(host) == ["/robots.txt", "/robots.txt", "/b"]
    assert not [m for m in crawler.messages() if "holds its fetch lease" in m], "no wait"
    assert crawler.stat("robotstxt/request_count") == 1
    assert crawler.stat("robotstxt/forbidden") == 1
    assert crawler.spider.response_urls == [mockserver.url(host, "/b")]
