"""The origin state kept by ``OriginCoordinator`` (with its ``Origins`` and
``OriginRuntime``s), driven directly: a fake fetcher answers, a ``Clock`` moves time.

The policy's clock and the coordinator's timers are the same ``Clock``, so a backoff
or a refresh is tested by advancing it; only the fetch itself (an asyncio task) and
its answer need turns of the real reactor (``reactor_turns``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pytest
import pytest_twisted

from scrapy_rep.crawl.coordinator import MAX_TIMER
from scrapy_rep.crawl.origins import WAITED_META_KEY
from scrapy_rep.policy.records import ALLOW_ALL, RULES
from scrapy_rep.policy.robots_policy import FRESH
from tests.support.clock import pending_timers, reactor_turns, settle_reactor
from tests.support.fake_fetcher import ALLOW_NOTHING_UNDER_PRIVATE
from tests.support.runtime import Runtime, build_runtime

A = "https://a.example"
B = "https://b.example"
C = "https://c.example"
BODY_1000 = b"User-agent: *\nDisallow: /private\n" + b"# padding\n" * 97


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    built = build_runtime()
    yield built
    built.close()


async def fetch_started(runtime: Runtime, origin: str, count: int = 1) -> None:
    await reactor_turns(
        lambda: runtime.fetcher.count(origin) >= count, f"fetch #{count} of {origin}"
    )
    await settle_reactor()  # a second one, if any, would start in the same turns
    assert runtime.fetcher.count(origin) == count


async def released(runtime: Runtime, origin: str, count: int) -> None:
    await reactor_turns(
        lambda: len(runtime.released_urls(origin)) >= count, f"{count} released of {origin}"
    )


async def first_copy(
    runtime: Runtime,
    origin: str,
    status: int = 200,
    *,
    body: bytes = ALLOW_NOTHING_UNDER_PRIVATE,
    headers: Mapping[str, str] | None = None,
) -> None:
    """The origin's first fetch, answered."""
    runtime.coordinator.evaluate(origin)
    await fetch_started(runtime, origin)
    runtime.fetcher.answer(origin, status, body=body, headers=headers)
    await reactor_turns(
        lambda: not runtime.coordinator.runtime(origin).fetching, f"the fetch of {origin} ends"
    )


# -- the first fetch ---------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_an_unknown_origin_waits_for_its_first_fetch_then_its_requests_go_in_order(
    runtime: Runtime,
) -> None:
    coordinator = runtime.coordinator
    evaluation = coordinator.evaluate(A)
    assert not evaluation.ready
    runtime.hold(A, "/1", "/2")
    await fetch_started(runtime, A)
    runtime.clock.advance(3)
    runtime.hold(A, "/3")
    assert runtime.released == [] and runtime.room.count(A) == 3

    runtime.fetcher.answer(A, 200)
    await released(runtime, A, 3)

    assert runtime.released_urls(A) == [A + "/1", A + "/2", A + "/3"]
    waited = [request.meta[WAITED_META_KEY] for _, request in runtime.released]
    assert waited == [3.0, 3.0, 0.0]  # the time each was held back (Clock seconds)
    assert runtime.room.count(A) == 0
    stored = runtime.storage.get(A)
    assert stored is not None and stored.kind == RULES
    after = coordinator.evaluate(A)
    assert (after.ready, after.source, after.kind) == (True, FRESH, RULES)
    assert runtime.stats["robotstxt/delayed"] == 3
    assert runtime.stats["robotstxt/released"] == 3
    assert not coordinator.busy()


@pytest_twisted.ensureDeferred
async def test_one_fetch_in_flight_per_origin_however_many_requests_ask(
    runtime: Runtime,
) -> None:
    coordinator = runtime.coordinator
    for n in range(50):
        assert not coordinator.evaluate(A).ready
        runtime.hold(A, f"/{n}")
    coordinator.evaluate(B)  # another origin fetches beside it
    await fetch_started(runtime, A)
    await fetch_started(runtime, B)
    assert coordinator.fetching_now() == 2
    runtime.fetcher.answer(A, 200)
    await released(runtime, A, 50)
    assert runtime.fetcher.count(A) == 1


@pytest_twisted.ensureDeferred
async def test_a_404_allows_everything_and_releases_the_held_requests(runtime: Runtime) -> None:
    runtime.coordinator.evaluate(A)
    runtime.hold(A, "/1")
    await fetch_started(runtime, A)
    runtime.fetcher.answer(A, 404, body=b"Not Found")
    await released(runtime, A, 1)
    evaluation = runtime.coordinator.evaluate(A)
    assert (evaluation.ready, evaluation.kind) == (True, ALLOW_ALL)


# -- unreachable: 5xx, timeouts, backoff -------------------------------------------------


@pytest.mark.parametrize("failure", ["503", "timeout"])
@pytest_twisted.ensureDeferred
async def test_an_unreachable_origin_holds_its_requests_and_retries_with_doubling_backoff(
    runtime: Runtime, failure: str
) -> None:
    coordinator, clock, fetcher = runtime.coordinator, runtime.clock, runtime.fetcher
    backoff = runtime.config.retry_backoff  # 10 s, doubled per consecutive failure
    coordinator.evaluate(A)
    runtime.hold(A, "/1")
    for attempt, wait in enumerate((backoff, 2 * backoff), start=1):
        await fetch_started(runtime, A, attempt)
        if failure == "503":
            fetcher.answer(A, 503)
        else:
            fetcher.time_out(A)
        await reactor_turns(lambda: not coordinator.runtime(A).fetching, "the fetch ends")
        assert not coordinator.evaluate(A).ready
        assert runtime.released == [] and runtime.room.count(A) == 1
        assert pending_timers(clock) == [pytest.approx(wait)]  # the origin's wake-up
        clock.advance(wait - 0.01)
        await settle_reactor()
        assert fetcher.count(A) == attempt  # not before the backoff is over
        clock.advance(0.01)
    await fetch_started(runtime, A, 3)
    fetcher.answer(A, 200)
    await released(runtime, A, 1)
    assert runtime.stats["robotstxt/unreachable"] == 1  # one spell, however many tries
    assert runtime.stats["robotstxt/recovered"] == 1
    assert coordinator.runtime(A).unreachable_spells == 1


@pytest_twisted.ensureDeferred
async def test_retry_after_sets_the_next_try_and_long_waits_wake_in_bounded_steps(
    runtime: Runtime,
) -> None:
    coordinator, clock, fetcher = runtime.coordinator, runtime.clock, runtime.fetcher
    await first_copy(runtime, A, 503, headers={"Retry-After": "120"})
    assert pending_timers(clock) == [MAX_TIMER]  # never one long sleep (clock changes)
    clock.advance(MAX_TIMER)
    assert pending_timers(clock) == [pytest.approx(120 - MAX_TIMER)]
    clock.advance(120 - MAX_TIMER - 0.01)
    await settle_reactor()
    assert fetcher.count(A) == 1
    clock.advance(0.01)
    await fetch_started(runtime, A, 2)
    assert not coordinator.evaluate(A).ready


# -- a good copy's lifetime --------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_a_good_copy_is_refetched_ahead_of_its_expiry_while_requests_go_on(
    runtime: Runtime,
) -> None:
    coordinator, clock, fetcher = runtime.coordinator, runtime.clock, runtime.fetcher
    # max-age 1000 s: the refetch starts in the last tenth of the copy's lifetime.
    await first_copy(runtime, A, 200, headers={"Cache-Control": "max-age=1000"})
    clock.advance(899.99)
    assert coordinator.evaluate(A).ready
    await settle_reactor()
    assert fetcher.count(A) == 1
    clock.advance(0.01)
    evaluation = coordinator.evaluate(A)
    assert (evaluation.ready, evaluation.source) == (True, FRESH)  # requests go on
    await fetch_started(runtime, A, 2)
    for _ in range(10):
        assert coordinator.evaluate(A).ready
    await settle_reactor()
    assert fetcher.count(A) == 2  # one refetch, however many requests
    fetcher.answer(A, 200, headers={"Cache-Control": "max-age=1000"})
    await reactor_turns(lambda: not coordinator.runtime(A).fetching, "the refetch ends")
    assert runtime.stats["robotstxt/refetch"] == 1
    assert coordinator.runtime(A).record.expires_at == pytest.approx(clock.seconds() + 1000)
    assert runtime.stats["robotstxt/delayed"] == 0


@pytest_twisted.ensureDeferred
async def test_no_request_is_decided_by_an_expired_copy(runtime: Runtime) -> None:
    coordinator, clock, fetcher = runtime.coordinator, runtime.clock, runtime.fetcher
    await first_copy(runtime, A, 200, headers={"Cache-Control": "max-age=1000"})
    clock.advance(900)
    assert coordinator.evaluate(A).ready  # the refetch starts and does not answer
    await fetch_started(runtime, A, 2)
    clock.advance(99.99)
    assert runtime.coordinator.origins.fresh(A, clock.seconds()) is not None
    clock.advance(0.01)  # the copy expires while its refetch still runs

    assert runtime.coordinator.origins.fresh(A, clock.seconds()) is None
    assert not coordinator.evaluate(A).ready
    runtime.hold(A, "/after-expiry")
    await settle_reactor()
    assert fetcher.count(A) == 2 and runtime.released == []
    fetcher.answer(A, 200)
    await released(runtime, A, 1)
    assert coordinator.evaluate(A).ready


# -- bounded memory: evictions never drop a busy origin ----------------------------------


@pytest_twisted.ensureDeferred
async def test_evictions_by_count_pass_over_an_origin_with_held_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runtime = build_runtime(memory_max_origins=2)
    coordinator, registry = runtime.coordinator, runtime.coordinator.origins
    try:
        coordinator.evaluate(A)
        runtime.hold(A, "/held")
        await fetch_started(runtime, A)
        busy = registry.lookup(A)
        others = [f"https://o{n}.example" for n in range(6)]
        for origin in others:
            await first_copy(runtime, origin)
            assert len(registry) <= 2
        assert registry.lookup(A) is busy and runtime.room.count(A) == 1
        assert registry.lookup(others[0]) is None  # idle ones went
        runtime.fetcher.answer(A, 200)
        await released(runtime, A, 1)
        assert runtime.released_urls(A) == [A + "/held"]
        # An evicted origin's record stays in the store: it comes back without a fetch.
        assert coordinator.evaluate(others[0]).ready
        await settle_reactor()
        assert runtime.fetcher.count(others[0]) == 1
        assert runtime.stats["robotstxt/cache_hit"] == 1
    finally:
        runtime.close()


@pytest_twisted.ensureDeferred
async def test_evictions_by_bytes_unload_idle_copies_and_keep_a_busy_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each copy is estimated at a little over 1,250 bytes: two fit, three do not.
    runtime = build_runtime(memory_max_bytes=3_000)
    coordinator, registry, clock = runtime.coordinator, runtime.coordinator.origins, runtime.clock
    try:
        age = {"Cache-Control": "max-age=1000"}
        await first_copy(runtime, A, 200, body=BODY_1000, headers=age)
        clock.advance(900)
        assert coordinator.evaluate(A).ready  # its refetch is in flight: A is busy
        await fetch_started(runtime, A, 2)
        await first_copy(runtime, B, 200, body=BODY_1000, headers=age)
        await first_copy(runtime, C, 200, body=BODY_1000, headers=age)

        assert registry.unloaded == 1
        assert registry.resident_bytes <= 3_000
        assert coordinator.runtime(A).loaded and coordinator.runtime(A).record.body == BODY_1000
        assert not coordinator.runtime(B).loaded  # the least recently used idle copy
        assert coordinator.runtime(B).record.body == b""
        # An unloaded copy is read back from the store, not fetched again.
        assert coordinator.evaluate(B).ready
        await settle_reactor()
        assert runtime.fetcher.count(B) == 1
        assert coordinator.runtime(B).record.body == BODY_1000
    finally:
        runtime.close()
