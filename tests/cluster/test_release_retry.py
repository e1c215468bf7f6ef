"""Released requests and a scheduler that cannot take them, in one process: a backend
that is down (the error is not about the request) is waited out and every request is
crawled once; a request the scheduler refuses for itself is dropped, logged and counted.
Real crawls against the suite's server; only the scheduler's enqueue is made to fail."""

from __future__ import annotations

import logging
import pickle
from typing import Any, ClassVar

import pytest
import pytest_twisted
import redis
from scrapy.core.scheduler import Scheduler

from scrapy_rep.crawl.origins import WAITED_META_KEY
from scrapy_rep.crawl.release_retry import refused_for_itself
from tests.support.crawl import DISALLOW_PRIVATE, REP, pages_of


class BackendDownScheduler(Scheduler):
    """Fails the first ``FAILURES`` enqueues of released requests (those that waited) as
    scrapy-redis fails while Redis is down; ``poison`` URLs it refuses for themselves."""

    FAILURES = 3
    failed: ClassVar[list[str]] = []

    def enqueue_request(self, request: Any) -> bool:
        if "poison" in request.url:
            raise ValueError(f"cannot serialise {request.url}")
        if WAITED_META_KEY in request.meta and len(self.failed) < self.FAILURES:
            self.failed.append(request.url)
            raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:6379.")
        return bool(super().enqueue_request(request))


@pytest.mark.slow
@pytest_twisted.ensureDeferred
async def test_released_requests_wait_out_a_backend_outage(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """Eight requests wait on a 503 robots.txt; when it answers, the scheduler fails the
    first release and the two retries after it (1 s, then 2 s later). All eight are
    crawled once, one probe per try (not one failure per request), and the crawl said
    so at INFO; the poison request alone is dropped."""
    BackendDownScheduler.failed.clear()
    mockserver.configure(host, {"robots": [{"status": 503}, {"body": DISALLOW_PRIVATE}]})
    paths = [f"/p{i}" for i in range(8)]
    urls = [mockserver.url(host, p) for p in [*paths, "/poison"]]
    settings = {**REP, "SCHEDULER": f"{__name__}.BackendDownScheduler"}
    crawler = await run_crawl(urls, settings=settings, timeout=60)
    assert sorted(pages_of(mockserver, host)) == sorted(paths)  # each exactly once
    assert len(BackendDownScheduler.failed) == 3
    assert crawler.stat("robotstxt/released") == 9
    assert crawler.stat("robotstxt/release_backend_down") == 1
    assert crawler.stat("robotstxt/release_failed") == 1  # the poison request only
    # The first failure holds all eight; each failed try holds them again.
    assert crawler.stat("robotstxt/release_retried") >= 8
    infos = crawler.messages(logging.INFO, logger="scrapy_rep")
    assert any("the scheduler cannot take released requests" in m for m in infos)
    assert any("the scheduler takes released requests again" in m for m in infos)
    errors = crawler.messages(logging.ERROR, logger="scrapy_rep")
    assert len(errors) == 1 and mockserver.url(host, "/poison") in errors[0], errors
    assert "refuses the request itself" in errors[0]


@pytest.mark.parametrize(
    ("error", "its_own"),
    [
        (redis.ConnectionError("refused"), False),
        (redis.TimeoutError("timed out"), False),
        (redis.BusyLoadingError("loading"), False),
        (redis.ResponseError("OOM command not allowed"), False),
        (ConnectionRefusedError(111, "refused"), False),
        (TimeoutError("timed out"), False),
        (RuntimeError("something else"), False),
        (ValueError("Function <lambda> is not an instance method"), True),
        (pickle.PicklingError("cannot pickle"), True),
        (TypeError("cannot pickle '_thread.lock' object"), True),
        (AttributeError("Can't pickle local object"), True),
    ],
)
def test_what_counts_as_the_request_refused_for_itself(error: Exception, its_own: bool) -> None:
    assert refused_for_itself(error) is its_own
