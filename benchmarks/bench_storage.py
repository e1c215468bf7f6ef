"""Benchmark the robots.txt stores: memory footprint, SQLite size, raw throughput.

Usage (from the repository root):

    python benchmarks/bench_storage.py [--origins 100000] [--sqlite-origins 100000]
                                       [--ops 20000] [--redis-url URL]

Measures:

(a) MemoryStorage: bytes of Python heap per cached origin (tracemalloc, everything
    kept alive) for ``--origins`` origins, with a realistic ~2 KB robots.txt body per
    origin and with an empty body.
(b) SqliteStorage: file size on disk per origin for ``--sqlite-origins`` origins with
    the ~2 KB body, after a checkpoint (the WAL folded into the main file).
(c) get / put / lease throughput in operations per second for every backend. Redis
    uses ``--redis-url``, or else a throw-away ``redis-server`` on a free port when one
    is installed (tests/support/redis_server.py); otherwise it is skipped.

``store_overhead_per_request()`` is the reusable piece for the crawl benchmark: the
store work the middleware does per request, amortised, for a given backend.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from scrapy_rep.policy.config import Config  # noqa: E402
from scrapy_rep.policy.records import RULES, OriginRecord  # noqa: E402
from scrapy_rep.storage.base import MemoryStorage, RobotsStorage  # noqa: E402
from scrapy_rep.storage.sqlite_store import SqliteStorage  # noqa: E402

_RULES = [
    "User-agent: *",
    "Disallow: /wp-admin/",
    "Allow: /wp-admin/admin-ajax.php",
    "Disallow: /search",
    "Disallow: /*?replytocom=",
    "Disallow: /cart/",
    "Disallow: /checkout/",
    "Disallow: /account/",
    "",
    "User-agent: GPTBot",
    "Disallow: /",
    "",
    "Sitemap: https://www.example.com/sitemap_index.xml",
]


def robots_body(index: int, size: int = 2048) -> bytes:
    """A plausible robots.txt of about ``size`` bytes, different for every origin."""
    lines = [f"# robots.txt for origin {index}", *_RULES]
    n = 0
    while sum(len(line) + 1 for line in lines) < size:
        lines.insert(-2, f"Disallow: /section-{index}/{n}/private/")
        n += 1
    return "\n".join(lines).encode()[:size]


DEFAULT_CORPUS = Path("/work/shared/corpus/robots")
#: Real robots.txt files of 1.5-3 KB when a corpus is available (see --corpus).
CORPUS_BODIES: list[bytes] = []


def load_corpus(directory: Path, low: int = 1500, high: int = 3000) -> list[bytes]:
    if not directory.is_dir():
        return []
    files = sorted(p for p in directory.iterdir() if p.is_file())
    return [b for b in (p.read_bytes() for p in files) if low <= len(b) <= high]


def make_record(index: int, body_size: int = 2048) -> OriginRecord:
    now = 1_700_000_000.0 + index
    if not body_size:
        body = b""
    elif CORPUS_BODIES:
        # A real file, made unique per origin as every origin's copy is its own object.
        body = f"# origin {index}\n".encode() + CORPUS_BODIES[index % len(CORPUS_BODIES)]
    else:
        body = robots_body(index, body_size)
    return OriginRecord(
        kind=RULES,
        body=body,
        fetched_at=now,
        expires_at=now + 86_400,
        last_outcome="200",
    )


def origin_name(index: int) -> str:
    return f"https://www.site-{index:07d}.example"


# -- (a) memory --------------------------------------------------------------------


def memory_per_origin(origins: int, body_size: int) -> float:
    """Heap bytes per origin held by a MemoryStorage (records, bodies and keys)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    store = MemoryStorage(max_origins=origins)
    for i in range(origins):
        store.put(origin_name(i), make_record(i, body_size))
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(store) == origins
    return (after - before) / origins


# -- (b) SQLite size -----------------------------------------------------------------


def sqlite_bytes_per_origin(origins: int, body_size: int = 2048) -> tuple[float, float]:
    """(bytes on disk per origin, seconds to write them all) for a fresh file."""
    directory = Path(tempfile.mkdtemp(prefix="scrapy-rep-bench-"))
    try:
        path = directory / "robots.sqlite3"
        store = SqliteStorage(path)
        started = time.perf_counter()
        for i in range(origins):
            store.put(origin_name(i), make_record(i, body_size))
        elapsed = time.perf_counter() - started
        store.close()  # the last connection checkpoints and removes the WAL
        total = sum(p.stat().st_size for p in directory.glob("robots.sqlite3*"))
        return total / origins, elapsed
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# -- (c) throughput ------------------------------------------------------------------


def _rate(count: int, action: Callable[[int], object]) -> float:
    started = time.perf_counter()
    for i in range(count):
        action(i)
    return count / (time.perf_counter() - started)


def throughput(store: RobotsStorage, ops: int) -> dict[str, float]:
    """Operations per second for put, get (hit), get (miss) and a lease round trip."""
    records = [make_record(i) for i in range(min(ops, 1000))]
    names = [origin_name(i) for i in range(ops)]
    misses = [f"https://missing-{i}.example" for i in range(ops)]
    result = {
        "put": _rate(ops, lambda i: store.put(names[i], records[i % len(records)])),
        "get hit": _rate(ops, lambda i: store.get(names[i])),
        "get miss": _rate(ops, lambda i: store.get(misses[i])),
    }

    def lease(i: int) -> None:
        store.acquire_lease(names[i], "bench", 60)
        store.release_lease(names[i], "bench")

    result["lease+release"] = _rate(ops, lease)
    for name in names:
        store.acquire_lease(name, "bench", 60)
    result["renew"] = _rate(ops, lambda i: store.renew_lease(names[i], "bench", 60))
    return result


def zip_bomb_read_cost(expanded: int = 64 * 1024 * 1024) -> tuple[float, float]:
    """Seconds to reject a stored zip bomb (``expanded`` bytes of spaces): with the
    codec's streaming limit, and decompressing up to the old fixed 64 MiB limit."""
    import zlib

    from scrapy_rep.storage.base import unpack_record

    bomb = zlib.compress(b"{" + b" " * expanded, 9)
    started = time.perf_counter()
    for _ in range(5):
        assert unpack_record(bomb) is None
    bounded = (time.perf_counter() - started) / 5
    started = time.perf_counter()
    for _ in range(5):
        zlib.decompressobj().decompress(bomb, 64 * 1024 * 1024)
    old = (time.perf_counter() - started) / 5
    return bounded, old


def store_overhead_per_request(
    store: RobotsStorage, *, origins: int = 1000, requests_per_origin: int = 20
) -> float:
    """Seconds of store work per crawled request, amortised.

    Models what the middleware does: on first contact with an origin it reads the store
    (a miss), takes the fetch lease and re-reads (another process may have finished the
    fetch; one pipelined round trip on Redis), reads once more before writing (a shared
    store), writes the record and releases the lease (one round trip on Redis); later
    requests are answered from the middleware's in-process state, and on a shared store
    every request costs one more read at most when its origin's entry is due. The fetch
    itself is not timed.
    """
    names = [f"https://overhead-{i}.example" for i in range(origins)]
    records = [make_record(i) for i in range(origins)]  # built before the clock starts
    started = time.perf_counter()
    for i, name in enumerate(names):
        store.get(name)
        if store.acquire_lease_and_get(name, "bench", 60)[0]:
            if store.shared:
                store.get(name)
            store.put_and_release_lease(name, records[i], "bench")
        if store.shared:
            store.get(name)  # the recheck when the entry is consulted again
    return (time.perf_counter() - started) / (origins * requests_per_origin)


@contextmanager
def redis_store(url: str | None) -> Iterator[RobotsStorage | None]:
    from scrapy_rep.storage.redis_store import RedisStorage

    server = None
    if url is None:
        if shutil.which("redis-server") is None:
            yield None
            return
        from tests.support.redis_server import RedisServer

        server = RedisServer(shutil.which("redis-server") or "redis-server")
        server.start()
        url = server.url
    store = RedisStorage.from_url(url, Config())
    try:
        yield store
    finally:
        store.close()
        if server is not None:
            server.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--origins", type=int, default=100_000)
    parser.add_argument("--sqlite-origins", type=int, default=100_000)
    parser.add_argument("--ops", type=int, default=20_000)
    parser.add_argument("--redis-url", default=None)
    parser.add_argument(
        "--corpus",
        type=Path,
        default=DEFAULT_CORPUS,
        help="directory of real robots.txt files; those of 1.5-3 KB are the bodies "
        "(default: %(default)s; a synthetic 2 KB body when missing)",
    )
    args = parser.parse_args(argv)
    CORPUS_BODIES[:] = load_corpus(args.corpus)
    if CORPUS_BODIES:
        mean = sum(map(len, CORPUS_BODIES)) / len(CORPUS_BODIES)
        source = (
            f"{len(CORPUS_BODIES)} real robots.txt files from {args.corpus}, mean {mean:,.0f} B"
        )
    else:
        source = "a synthetic 2048 B robots.txt"

    print(f"Python {sys.version.split()[0]}, SQLite {__import__('sqlite3').sqlite_version}")
    print(f"Bodies: {source}")
    print(f"\n(a) MemoryStorage, {args.origins:,} origins (tracemalloc)")
    for size, label in ((2048, "~2 KB body"), (0, "empty body")):
        per = memory_per_origin(args.origins, size)
        total = per * args.origins / 2**20
        print(f"    {label}: {per:>8,.0f} B/origin  ({total:,.1f} MiB in all)")

    print(f"\n(b) SqliteStorage on disk, {args.sqlite_origins:,} origins, ~2 KB body")
    per_file, seconds = sqlite_bytes_per_origin(args.sqlite_origins)
    total = per_file * args.sqlite_origins / 2**20
    print(f"    {per_file:,.0f} B/origin ({total:,.1f} MiB file), written in {seconds:.1f} s")

    print(f"\n(c) throughput, {args.ops:,} ops each (ops/s; one process, one thread)")
    directory = Path(tempfile.mkdtemp(prefix="scrapy-rep-bench-"))
    overhead: dict[str, float] = {}
    try:
        backends: list[tuple[str, Callable[[], object]]] = [
            ("memory", lambda: MemoryStorage()),
            ("sqlite", lambda: SqliteStorage(directory / "tp.sqlite3")),
        ]
        header = f"    {'backend':<8}" + "".join(
            f"{k:>15}" for k in ("put", "get hit", "get miss", "lease+release", "renew")
        )
        print(header)

        def report(name: str, store: RobotsStorage) -> None:
            rates = throughput(store, args.ops)
            print(f"    {name:<8}" + "".join(f"{v:>15,.0f}" for v in rates.values()))
            overhead[name] = store_overhead_per_request(store)

        for name, factory in backends:
            store = factory()
            assert isinstance(store, RobotsStorage)
            report(name, store)
            store.close()
        with redis_store(args.redis_url) as redis:
            if redis is None:
                print("    redis    skipped: no --redis-url and no redis-server on PATH")
            else:
                report("redis", redis)
    finally:
        shutil.rmtree(directory, ignore_errors=True)

    print("\n    store overhead per request (1000 origins x 20 requests, amortised):")
    for name, seconds in overhead.items():
        print(f"    {name:<8} {seconds * 1e6:8.1f} us/request")

    bounded, old = zip_bomb_read_cost()
    print("\n(d) reading a stored zip bomb (64 MiB of spaces in ~64 KiB), per read:")
    print(f"    streaming limit (REP_MAX_SIZE): {bounded * 1e3:8.2f} ms")
    print(f"    old fixed 64 MiB limit:         {old * 1e3:8.2f} ms  ({old / bounded:,.0f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
