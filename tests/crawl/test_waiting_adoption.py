"""Real crawls for durable waiting across runs (docs/waiting.md): a crawler
process killed with ``kill -9`` while it holds dont_filter requests, most of them
spilled to disk, loses none; the next run of the spider on the same SQLite store adopts
them as soon as it is idle and crawls each exactly once."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from scrapy_rep.crawl.durable_waiting import open_cluster
from tests.crawl.test_crawl_storage_shared import start_process
from tests.support.crawl import DISALLOW_PRIVATE, REP, ListSpider, pages_of
from tests.support.waits import wait_until

#: The spider of tests/support/subprocess_spider.py: the store keys parked requests by it.
SUBPROCESS_SPIDER = "shared_store"


class NextRun(ListSpider):
    """The next run of that spider: no requests of its own; ``parse`` and ``on_error``
    are the callbacks the killed process's requests name."""

    name = SUBPROCESS_SPIDER


def owners_alive(cluster_file: Path) -> int:
    with sqlite3.connect(cluster_file) as conn:
        row = conn.execute(
            "SELECT COUNT(*) FROM owners WHERE alive_until >= ?", (time.time(),)
        ).fetchone()
    return int(row[0])


@pytest.mark.slow
@pytest_twisted.ensureDeferred
async def test_spilled_dont_filter_requests_of_a_killed_process_are_crawled_once_next_run(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    mockserver.configure(host, {"robots": {"status": 503}})
    db = tmp_path / "store.db"
    spec = f"sqlite:{db}"
    (tmp_path / "go").write_text("go")  # the subprocess spider's start barrier, open
    paths = [f"/k{i}" for i in range(10)]
    extra = (
        "-s", "REP_MEMORY_MAX_HELD=2",
        "-s", "REP_CLUSTER_HEARTBEAT=1",
        "-s", "REP_DURABLE_WAITING=True",
        "-s", "REP_RETRY_BACKOFF=0.5",
        "-s", "REP_MAX_RETRY_BACKOFF=1",
        "-s", "LOG_LEVEL=INFO",
    )  # fmt: skip
    urls = [mockserver.url(host, p) for p in paths]
    proc, result, log = start_process(tmp_path, subprocess_env, spec, "killed", urls, extra)
    cluster = open_cluster(spec, SUBPROCESS_SPIDER)
    assert cluster is not None
    try:
        try:
            await wait_until(
                lambda: len(cluster.parked()) == 10 or proc.poll() is not None,
                "10 requests parked by the holder",
                timeout=60,
            )
            assert proc.poll() is None, log.read_text()[-3000:]
        finally:
            proc.kill()  # SIGKILL: no close, no hand-back; the store is all that is left
            proc.wait()
        assert not result.exists()
        assert pages_of(mockserver, host) == []
        mockserver.configure(host, {"robots": {"body": DISALLOW_PRIVATE}})
        # The killed holder's heartbeat runs out (REP_CLUSTER_HEARTBEAT = 1 s).
        await wait_until(lambda: owners_alive(Path(f"{db}.cluster")) == 0, "a dead owner")

        settings = {
            **REP,
            "REP_STORAGE": spec,
            "REP_CLUSTER_HEARTBEAT": 1,
            "REP_DURABLE_WAITING": True,
        }
        crawler = await run_crawl([], settings=settings, spider_cls=NextRun)
        received = Counter(p.split("?")[0] for p in pages_of(mockserver, host))
        assert received == Counter(paths)  # each exactly once
        assert crawler.stat("robotstxt/ledger/adopted") == 10
        assert cluster.parked() == []
        assert not crawler.messages(logging.ERROR)
    finally:
        cluster.close()
