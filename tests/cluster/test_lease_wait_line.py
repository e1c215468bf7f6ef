"""The INFO line said while another process holds an origin's fetch lease quotes the
bound that holds (a real crawl against a lease held in a real SQLite store): a live
holder renews its lease while its fetch runs, so the wait is bounded by the fetch
(REP_FETCH_TIMEOUT per request, one request per redirect hop) plus REP_LEASE_TTL,
not by REP_LEASE_TTL alone."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from scrapy_rep.policy.origin import origin_of
from scrapy_rep.storage.sqlite_store import SqliteStorage
from tests.support.crawl import DISALLOW_PRIVATE, pages_of
from tests.support.crawl_storage import REP

#: Another machine's crawler, alive as far as this machine can tell.
REMOTE_HOLDER = "crawler-b+0000:4242:77:feedbeef"


@pytest.mark.slow
@pytest_twisted.ensureDeferred
async def test_the_lease_wait_line_quotes_the_fetch_bound(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Path
) -> None:
    """Another machine holds the lease for 12 s (the line comes after 5 s of waiting,
    and the crawl takes a few seconds to start).
    With REP_FETCH_TIMEOUT = 4, REP_MAX_REDIRECTS = 2 and REP_LEASE_TTL = 20 the
    holder's fetch can keep it about 4 x 3 + 20 = 32 s: the line says so, and does not
    claim that the wait ends within REP_LEASE_TTL."""
    mockserver.configure(host, {"robots": {"body": DISALLOW_PRIVATE}})
    path = tmp_path / "store.db"
    other = SqliteStorage(str(path))
    try:
        assert other.acquire_lease(origin_of(mockserver.url(host, "/")), REMOTE_HOLDER, 12)
    finally:
        other.close()
    settings = {
        **REP,
        "REP_STORAGE": f"sqlite:{path}",
        "REP_FETCH_TIMEOUT": 4,
        "REP_MAX_REDIRECTS": 2,
        "REP_LEASE_TTL": 20,
    }
    urls = [mockserver.url(host, p) for p in ("/a", "/private/b")]
    crawler = await run_crawl(urls, settings, timeout=60)
    assert pages_of(mockserver, host) == ["/a"]
    waits = [m for m in crawler.messages(logging.INFO) if "holds its fetch lease" in m]
    assert len(waits) == 1, waits
    line = waits[0]
    assert "pid 4242 on crawler-b" in line
    assert "about 32 s" in line, line
    assert "REP_FETCH_TIMEOUT (4 s) for each of up to 3 request(s)" in line, line
    assert "REP_MAX_REDIRECTS = 2" in line and "REP_LEASE_TTL (20 s)" in line, line
    assert "ends within REP_LEASE_TTL" not in line, line
