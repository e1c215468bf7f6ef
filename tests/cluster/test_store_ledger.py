"""StoreWaiting on real stores: held requests go to the store in batches with Scrapy's
own serialisation, leave it when they leave the room, and are adopted by another
process's ledger when their owner stopped; an unserialisable request is logged and
counted, never silently lost."""

from __future__ import annotations

import logging
import pickle
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
import scrapy
from scrapy.utils.test import get_crawler

from scrapy_rep.crawl.durable_waiting import StoreWaiting, open_cluster
from scrapy_rep.storage.cluster import ClusterStore
from tests.support import redis_server as redis_helper
from tests.support.redis_server import RedisServer
from tests.support.waits import wait_until as until

redis_server = redis_helper.redis_server


class LedgerSpider(scrapy.Spider):
    name = "ledger"

    def parse(self, response: Any, **kwargs: Any) -> None:
        pass

    def other(self, response: Any) -> None:
        pass


@pytest.fixture(params=["sqlite", "redis"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'store.db'}"
    server: RedisServer = request.getfixturevalue("redis_server")
    client = __import__("redis").Redis.from_url(server.url)
    client.flushdb()
    client.close()
    return server.url


@pytest.fixture
def ledgers(spec: str) -> Iterator[list[StoreWaiting]]:
    made: list[StoreWaiting] = []
    yield made
    for ledger in made:
        ledger.close(handed_back=False)


def new_ledger(spec: str, made: list[StoreWaiting], heartbeat: float = 30.0) -> StoreWaiting:
    crawler = get_crawler(LedgerSpider, {})
    crawler.spider = LedgerSpider.from_crawler(crawler)
    cluster = open_cluster(spec, "ledger")
    assert cluster is not None
    ledger = StoreWaiting(crawler, cluster, heartbeat=heartbeat)
    ledger._start()
    made.append(ledger)
    return ledger


def view(spec: str) -> ClusterStore:
    cluster = open_cluster(spec, "ledger")
    assert cluster is not None
    return cluster


@pytest_twisted.ensureDeferred
async def test_held_requests_are_parked_and_removed(spec: str, ledgers: list[StoreWaiting]) -> None:
    ledger = new_ledger(spec, ledgers)
    spider = ledger.crawler.spider
    requests = [
        scrapy.Request(f"http://a.test/{i}", callback=spider.parse, meta={"n": i}, priority=i)
        for i in range(5)
    ]
    ledger.record("http://a.test", requests)
    store = view(spec)
    await until(lambda: len(store.parked(ledger.owner)) == 5, "5 parked requests")
    blob = store.parked(ledger.owner)[0][2]
    assert pickle.loads(blob)["url"].startswith("http://a.test/")  # Request.to_dict()
    ledger.forget("http://a.test", requests[:3])
    await until(lambda: len(store.parked(ledger.owner)) == 2, "2 left")
    assert ledger.stats.get_value("robotstxt/ledger/parked") == 5
    store.close()


@pytest_twisted.ensureDeferred
async def test_copies_of_one_request_share_one_entry_until_the_last_leaves(
    spec: str, ledgers: list[StoreWaiting]
) -> None:
    """One parked copy per request: duplicates collapse (the fingerprint), and so do
    identical dont_filter requests (their own bytes), while a dont_filter request that
    differs is its own entry. The entry goes with the last copy held here."""
    ledger = new_ledger(spec, ledgers)
    same = [scrapy.Request("http://a.test/same") for _ in range(3)]
    apart = [scrapy.Request("http://a.test/apart", dont_filter=True) for _ in range(2)]
    other = scrapy.Request("http://a.test/apart", dont_filter=True, meta={"page": 2})
    ledger.record("http://a.test", [*same, *apart, other])
    store = view(spec)
    await until(lambda: len(store.parked(ledger.owner)) == 3, "3 entries")
    ledger.forget("http://a.test", apart[:1])
    ledger.forget("http://a.test", [other])
    await until(lambda: len(store.parked(ledger.owner)) == 2, "the other one gone")
    assert sorted(key.count(".") for key, _, _ in store.parked(ledger.owner)) == [0, 1]
    ledger.forget("http://a.test", apart[1:])
    await until(lambda: len(store.parked(ledger.owner)) == 1, "the last copy gone")
    store.close()


@pytest_twisted.ensureDeferred
async def test_another_ledger_adopts_what_a_stopped_owner_kept(
    spec: str, ledgers: list[StoreWaiting]
) -> None:
    first = new_ledger(spec, ledgers)
    spider = first.crawler.spider
    requests = [
        scrapy.Request(f"http://b.test/{i}", callback=spider.other, cb_kwargs={"i": i})
        for i in range(4)
    ]
    first.record("http://b.test", requests)
    store = view(spec)
    await until(lambda: len(store.parked(first.owner)) == 4, "4 parked")
    first.close(handed_back=False)  # kept in the store for another process
    second = new_ledger(spec, ledgers, heartbeat=0.3)
    adopted: list[tuple[str, scrapy.Request]] = []

    def collect() -> bool:
        adopted.extend(second.adopt())
        return len(adopted) == 4

    await until(collect, "4 adopted")
    assert sorted(r.url for _, r in adopted) == sorted(r.url for r in requests)
    assert {o for o, _ in adopted} == {"http://b.test"}
    request = next(r for _, r in adopted if r.url.endswith("/2"))
    assert request.callback == second.crawler.spider.other  # bound to the new spider
    assert request.cb_kwargs == {"i": 2}
    assert second.stats.get_value("robotstxt/ledger/adopted") == 4
    # The adopter released them: forgotten under its own owner id.
    second.forget("http://b.test", [r for _, r in adopted])
    await until(lambda: store.parked() == [], "nothing parked")
    store.close()


@pytest_twisted.ensureDeferred
async def test_handed_back_requests_leave_the_store(spec: str, ledgers: list[StoreWaiting]) -> None:
    ledger = new_ledger(spec, ledgers)
    ledger.record("http://c.test", [scrapy.Request("http://c.test/x")])
    store = view(spec)
    await until(lambda: len(store.parked()) == 1, "parked")
    ledger.close(handed_back=True)
    assert store.parked() == []
    store.close()


@pytest_twisted.ensureDeferred
async def test_a_batch_taken_just_before_close_is_written_at_close(
    spec: str, ledgers: list[StoreWaiting]
) -> None:
    """A flush takes its batch on the reactor thread and writes it from a worker thread.
    A close that comes in between used to drop that batch: forgotten requests stayed
    parked, and the next run adopted and crawled them a second time. Whichever of the
    two gets the store first, the batch is written once."""
    ledger = new_ledger(spec, ledgers)
    requests = [scrapy.Request(f"http://r.test/{i}") for i in range(3)]
    ledger.record("http://r.test", requests)
    store = view(spec)
    await until(lambda: len(store.parked(ledger.owner)) == 3, "3 parked")
    await until(lambda: not ledger._busy, "no write in flight")
    ledger.forget("http://r.test", requests[:2])
    # The worker thread's store call waits for the lock the test holds, so the close
    # below starts while the forget's batch is taken but not written.
    ledger._io_lock.acquire()
    ledger._flush()
    threading.Timer(0.3, ledger._io_lock.release).start()
    ledger.close(handed_back=False)
    assert [pickle.loads(blob)["url"] for _, _, blob in store.parked()] == ["http://r.test/2"]
    await until(lambda: not ledger._busy, "the worker thread's answer")
    store.close()


def elsewhere(response: Any) -> None:
    pass


@pytest_twisted.ensureDeferred
async def test_an_unserialisable_request_is_logged_and_counted(
    spec: str, ledgers: list[StoreWaiting], caplog: pytest.LogCaptureFixture
) -> None:
    ledger = new_ledger(spec, ledgers)
    good = [scrapy.Request(f"http://d.test/{i}") for i in range(3)]
    bad = [scrapy.Request(f"http://d.test/bad{i}", callback=elsewhere) for i in range(2)]
    with caplog.at_level(logging.DEBUG, logger="scrapy_rep"):
        ledger.record("http://d.test", [good[0], *bad, *good[1:]])
    store = view(spec)
    await until(lambda: len(store.parked()) == 3, "the 3 good ones parked")
    assert ledger.stats.get_value("robotstxt/ledger/unserializable") == 2
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "cannot be kept in the shared store" in warnings[0].getMessage()
    store.close()


@pytest_twisted.ensureDeferred
async def test_a_store_outage_keeps_the_batch_for_later(
    ledgers: list[StoreWaiting], caplog: pytest.LogCaptureFixture
) -> None:
    server = RedisServer(redis_helper.require_redis_server())
    server.start()
    try:
        ledger = new_ledger(server.url, ledgers, heartbeat=0.3)
        server.stop()
        with caplog.at_level(logging.INFO, logger="scrapy_rep"):
            ledger.record("http://e.test", [scrapy.Request(f"http://e.test/{i}") for i in range(3)])
            await until(
                lambda: ledger.stats.get_value("robotstxt/ledger/store_errors", 0) > 0, "an error"
            )
            server.start()
            store = view(server.url)
            await until(lambda: len(store.parked()) == 3, "written after the outage", 20)
            store.close()

            def messages() -> list[str]:
                return [r.getMessage() for r in caplog.records]

            # (the INFO line comes when the reactor sees the write done, just after)
            await until(lambda: any("takes parked requests again" in m for m in messages()), "INFO")
        assert sum("cannot write parked requests" in m for m in messages()) == 1
    finally:
        server.cleanup()
