"""The bounded registry of per-origin runtimes (moved here from tests/policy): idle
runtimes beyond the bound are evicted, busy ones never, and an origin is counted once
in the summary however often it is evicted and comes back."""

from __future__ import annotations

from scrapy_rep.crawl.origins import Origins


def test_registry_keeps_at_most_the_bound_of_idle_runtimes_and_never_a_busy_one() -> None:
    registry = Origins(10)  # (a runtime that is fetching is busy)
    busy = registry.get("http://busy.test")
    busy.fetching = True
    for i in range(100):
        registry.get(f"http://o{i}.test").dropped = 1
    assert len(registry) <= 11
    assert registry.lookup("http://busy.test") is busy  # never evicted while it has work
    totals = registry.evicted.merged(registry.runtimes())
    assert totals.origins == 101 and totals.dropped == 100
    busy.fetching = False
    registry.settle(busy)
    registry.get("http://one-more.test")
    assert len(registry) <= 11


def test_an_evicted_origin_that_returns_is_counted_once() -> None:
    registry = Origins(2)
    for _ in range(5):
        for origin in ("http://a.test", "http://b.test", "http://c.test"):
            registry.get(origin).delayed += 1
    totals = registry.evicted.merged(registry.runtimes())
    assert totals.origins == 3
    assert sum(totals.states.values()) == 3
    assert totals.delayed == 15


def test_eviction_passes_each_busy_runtime_once() -> None:
    """Busy runtimes at the front of the LRU are pinned, not rescanned per new origin."""
    checks: list[str] = []

    def held(origin: str) -> int:  # requests held in the waiting room: busy
        checks.append(origin)
        return 1 if origin.startswith("http://busy") else 0

    registry = Origins(50, held=held)
    for i in range(50):
        registry.get(f"http://busy{i}.test")
    for i in range(1000):
        registry.get(f"http://idle{i}.test")
    assert checks.count("http://busy0.test") == 1
    assert len(checks) <= 50 + 1000
