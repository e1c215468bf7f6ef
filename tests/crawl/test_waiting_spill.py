"""Real crawls for the memory bound on held requests (docs/waiting.md):
beyond REP_MEMORY_MAX_HELD they spill to disk with Scrapy's own disk queues, and come
back intact; a request that cannot be serialised stays in memory and is counted."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import pytest_twisted
from scrapy import Request

from tests.support.crawl import DISALLOW_PRIVATE, REP, ListSpider, pages_of


class CallbackSpider(ListSpider):
    """Its requests use spider-method callbacks and cb_kwargs, which must survive disk."""

    name = "callback"

    def parse_item(self, response: Any, tag: str) -> None:
        self.responses.append(response)
        self.tags = [*getattr(self, "tags", []), tag]


def assert_nothing_parked(store: str, spider_name: str) -> None:
    """No request of *spider_name* is left parked in the shared *store*."""
    from scrapy_rep.crawl.durable_waiting import open_cluster

    cluster = open_cluster(store, spider_name)
    assert cluster is not None
    try:
        assert cluster.parked() == []
    finally:
        cluster.close()


@pytest.mark.parametrize("jobdir", [False, True], ids=["tempdir", "jobdir"])
@pytest_twisted.ensureDeferred
async def test_held_requests_beyond_the_bound_spill_and_come_back(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Any, jobdir: bool
) -> None:
    # The first answer (a 503, then retried) is held until every request has been yielded:
    # otherwise, on a slow machine, the origin can be decided before the lambda request
    # arrives, and it is then never held at all.
    gate = f"spill-{host}"
    first = {"status": 503, "hold": gate, "hold_max": 60}
    mockserver.configure(host, {"robots": [first, {"body": DISALLOW_PRIVATE}]})
    spider = CallbackSpider
    requests = [
        Request(mockserver.url(host, f"/p{i}"), callback=None, cb_kwargs={"tag": f"t{i}"})
        for i in range(40)
    ]
    unserialisable = Request(mockserver.url(host, "/lambda"), callback=lambda r: None)
    settings: dict[str, Any] = {**REP, "REP_MEMORY_MAX_HELD": 5}
    if jobdir:
        settings["JOBDIR"] = str(tmp_path / "job")

    class Start(spider):
        async def start(self) -> Any:
            for request in requests:
                yield request.replace(callback=self.parse_item, errback=self.on_error)
            yield unserialisable
            mockserver.open_gate(gate)

    crawler = await run_crawl([], settings=settings, spider_cls=Start)
    assert sorted(pages_of(mockserver, host)) == sorted([f"/p{i}" for i in range(40)] + ["/lambda"])
    assert sorted(crawler.spider.tags) == sorted(f"t{i}" for i in range(40))
    assert crawler.stat("robotstxt/spilled") == 35  # 5 in memory, the lambda stays there
    assert crawler.stat("robotstxt/held_unserialisable") == 1
    assert crawler.stat("robotstxt/released") == 41
    spilled_root = tmp_path / "job" / "rep-held"
    assert not spilled_root.exists() or not any(spilled_root.iterdir())
    assert not crawler.messages(logging.ERROR)


@pytest_twisted.ensureDeferred
async def test_dont_filter_requests_beyond_the_bound_leave_nothing_parked(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Any
) -> None:
    """With durable waiting (a shared store) a dont_filter request's ledger key is not
    its fingerprint: it travels in the request's bytes (a private meta key), so one
    that comes back from disk as a new object is still forgotten. Copies of one URL
    spill like any request, each is crawled, and nothing is left parked."""
    mockserver.configure(host, {"robots": [{"status": 503}, {"body": DISALLOW_PRIVATE}]})
    store = f"sqlite:{tmp_path / 'store.db'}"
    settings: dict[str, Any] = {
        **REP,
        "REP_STORAGE": store,
        "REP_DURABLE_WAITING": True,
        "REP_MEMORY_MAX_HELD": 2,
    }
    urls = [mockserver.url(host, f"/same?{i % 3}") for i in range(12)]

    class Start(CallbackSpider):
        async def start(self) -> Any:
            for url in urls:
                yield Request(url, dont_filter=True, callback=self.parse, errback=self.on_error)

    crawler = await run_crawl([], settings=settings, spider_cls=Start)
    assert len(pages_of(mockserver, host)) == 12  # dont_filter: every copy is crawled
    assert crawler.stat("robotstxt/released") == 12
    assert crawler.stat("robotstxt/spilled") == 10  # 2 in memory, the rest on disk
    assert_nothing_parked(store, Start.name)
    assert not crawler.messages(logging.ERROR)


@pytest_twisted.ensureDeferred
async def test_spilled_dont_filter_requests_are_each_crawled_once_and_not_again(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Any
) -> None:
    """Distinct dont_filter requests beyond REP_MEMORY_MAX_HELD, with durable waiting:
    each is crawled exactly once, the ledger keys leave with them (not in the
    responses' meta), nothing stays parked, and the next run of the spider on the same
    store finds nothing to adopt."""
    from scrapy_rep.crawl.durable_waiting import KEY_META

    mockserver.configure(host, {"robots": [{"status": 503}, {"body": DISALLOW_PRIVATE}]})
    store = f"sqlite:{tmp_path / 'store.db'}"
    settings: dict[str, Any] = {
        **REP,
        "REP_STORAGE": store,
        "REP_DURABLE_WAITING": True,
        "REP_MEMORY_MAX_HELD": 3,
    }
    paths = [f"/d{i}" for i in range(30)]

    class Start(CallbackSpider):
        async def start(self) -> Any:
            for path in paths:
                yield Request(
                    mockserver.url(host, path),
                    dont_filter=True,
                    callback=self.parse,
                    errback=self.on_error,
                )

    crawler = await run_crawl([], settings=settings, spider_cls=Start)
    assert sorted(pages_of(mockserver, host)) == sorted(paths)  # each once, none twice
    assert crawler.stat("robotstxt/spilled") == 27
    assert crawler.stat("robotstxt/released") == 30
    assert not any(KEY_META in r.meta for r in crawler.spider.responses)
    assert_nothing_parked(store, Start.name)
    again = await run_crawl([], settings=settings, spider_cls=CallbackSpider)
    assert sorted(pages_of(mockserver, host)) == sorted(paths)
    assert not again.stat("robotstxt/ledger/adopted")
    assert not crawler.messages(logging.ERROR)
