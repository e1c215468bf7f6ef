"""Benchmark what durable waiting costs: each held request parked in a shared store.

Usage (from the repository root):

    python benchmarks/bench_cluster.py [--requests 20000] [--redis-url URL]

For ``--requests`` held requests (a typical GET with a callback, meta and headers):

(a) CPU on the reactor thread per held request: the key (request fingerprint) and
    Scrapy's serialisation (``Request.to_dict`` pickled), which ``StoreWaiting.record``
    does; and the reference measured in the same run: Scrapy's own disk queue under
    ``JOBDIR`` (``PickleFifoDiskQueue.push``) for the same requests.
(b) store time per held request (in the ledger's background thread), written in
    batches of ``BATCH`` as ``StoreWaiting`` writes them: park, remove, adopt, for SQLite
    and Redis (``--redis-url``, or a throw-away ``redis-server`` when one is installed).
(c) bytes per parked request: Redis ``MEMORY USAGE`` of the owner's hash, the SQLite
    file's growth.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import scrapy  # noqa: E402
from scrapy.squeues import PickleFifoDiskQueue  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

from scrapy_rep.crawl.durable_waiting import BATCH, StoreWaiting, open_cluster  # noqa: E402
from scrapy_rep.storage.cluster import ClusterStore, Parked  # noqa: E402


class BenchSpider(scrapy.Spider):
    name = "bench"

    def parse(self, response: Any, **kwargs: Any) -> None:
        pass


def make_requests(n: int, spider: BenchSpider) -> list[scrapy.Request]:
    return [
        scrapy.Request(
            f"https://shop-{i % 50}.example/catalog/item-{i}?ref=list&page={i % 7}",
            callback=spider.parse,
            meta={"depth": 2, "item": i},
            headers={"Referer": f"https://shop-{i % 50}.example/catalog"},
            priority=i % 3,
        )
        for i in range(n)
    ]


def per_request(seconds: float, n: int) -> str:
    return f"{seconds / n * 1e6:8.1f} us"


def cpu_cost(n: int) -> tuple[list[Parked], StoreWaiting]:
    crawler = get_crawler(BenchSpider, {})
    spider = crawler.spider = BenchSpider.from_crawler(crawler)
    requests = make_requests(n, spider)

    class NoStore:  # only the in-process part is measured here
        def close(self) -> None:
            pass

    ledger = StoreWaiting(crawler, NoStore(), heartbeat=30.0)  # type: ignore[arg-type]
    start = time.perf_counter()
    keys = [ledger.key(request) for request in requests]
    keyed = time.perf_counter() - start
    start = time.perf_counter()
    keys_again = [ledger.key(request) for request in requests]
    cached = time.perf_counter() - start
    assert keys == keys_again
    start = time.perf_counter()
    blobs = [ledger.blob(request) for request in requests]
    serialised = time.perf_counter() - start
    parked: list[Parked] = []
    for key, blob in zip(keys, blobs, strict=True):
        assert key is not None and blob is not None
        parked.append((key, "https://shop.example", blob))
    ours = cached + serialised

    fresh = make_requests(n, spider)  # the fingerprint cache must not help the reference
    with tempfile.TemporaryDirectory() as tmp:
        queue_cls: Any = PickleFifoDiskQueue
        queue = queue_cls.from_crawler(crawler, str(Path(tmp) / "q"))
        start = time.perf_counter()
        for request in fresh:
            queue.push(request)
        reference = time.perf_counter() - start
        queue.close()
    print(f"(a) CPU per held request, {n:,} requests")
    print(f"    key: request fingerprint, first computed      {per_request(keyed, n)}")
    print(f"    key: fingerprint already computed (cached)    {per_request(cached, n)}")
    print(f"    serialisation: Request.to_dict pickled         {per_request(serialised, n)}")
    print(f"    reference: JOBDIR disk queue push (same reqs)  {per_request(reference, n)}")
    print(
        f"    ratio, record with the dupefilter's fingerprint cached: {ours / reference:.2f}x "
        f"the JOBDIR push ({(keyed + serialised) / reference:.2f}x when not cached)"
    )
    return parked, ledger


def store_cost(name: str, make: Any, parked: list[Parked], size: Any) -> None:
    n = len(parked)
    owner, adopter = make(), make()
    before = size(owner)
    start = time.perf_counter()
    for i in range(0, n, BATCH):
        owner.park("owner-A", 60.0, parked[i : i + BATCH], [])
    park = time.perf_counter() - start
    grown = size(owner) - before
    owner.retire("owner-A", keep=True)
    start = time.perf_counter()
    adopted = 0
    while adopted < n:
        batch = adopter.adopt("owner-B", 60.0, BATCH)
        if not batch:
            break
        adopted += len(batch)
    adopt = time.perf_counter() - start
    keys = [key for key, _, _ in parked]
    start = time.perf_counter()
    for i in range(0, n, BATCH):
        adopter.park("owner-B", 60.0, [], keys[i : i + BATCH])
    remove = time.perf_counter() - start
    assert adopted == n, (adopted, n)
    print(
        f"    {name:<7} park {per_request(park, n)}   adopt {per_request(adopt, n)}   "
        f"remove {per_request(remove, n)}   {grown / n:,.0f} B/request stored"
    )
    owner.close()
    adopter.close()


@contextmanager
def redis_url(given: str | None) -> Iterator[str | None]:
    if given:
        yield given
        return
    if shutil.which("redis-server") is None:
        yield None
        return
    from tests.support.redis_server import RedisServer

    server = RedisServer(shutil.which("redis-server") or "redis-server")
    server.start()
    try:
        yield server.url
    finally:
        server.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--redis-url", default=None)
    args = parser.parse_args(argv)
    parked, _ = cpu_cost(args.requests)
    print(f"\n(b, c) store time per held request, batches of {BATCH:,}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "store.db"

        def sqlite() -> ClusterStore:
            store = open_cluster(f"sqlite:{path}", "bench")
            assert store is not None
            return store

        def file_size(_: ClusterStore) -> int:
            return sum(p.stat().st_size for p in Path(tmp).glob("store.db.cluster*"))

        store_cost("sqlite", sqlite, parked, file_size)
    with redis_url(args.redis_url) as url:
        if url is None:
            print("    redis   skipped: no --redis-url and no redis-server on PATH")
            return 0

        def redis() -> ClusterStore:
            store = open_cluster(url, "bench")
            assert store is not None
            return store

        def memory(store: Any) -> int:
            return int(store._client.memory_usage(store._parked_key("owner-A")) or 0)

        store_cost("redis", redis, parked, memory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
