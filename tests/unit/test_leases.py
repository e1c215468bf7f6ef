"""Fetch leases: ``LeaseKeeper``'s renewals on a ``Clock``, their release when the
coordinator closes, and which leases of other processes are broken (taken over)."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import pytest_twisted

from scrapy_rep.crawl.store_calls import LEASE_WAIT_LOG_AFTER, LeaseKeeper, StoreCalls
from scrapy_rep.policy.config import Config
from scrapy_rep.storage.base import MemoryStorage, new_holder
from scrapy_rep.storage.sqlite_store import SqliteStorage
from tests.support.clock import new_clock, pending_timers, reactor_turns
from tests.support.runtime import build_runtime

A = "https://a.example"
ANOTHER_PROCESS = "elsewhere:4242:1:0123456789ab"  # another machine: presumed alive


class CountingMemoryStorage(MemoryStorage):
    """The real memory store, counting renewals."""

    def __init__(self) -> None:
        super().__init__()
        self.renewals = 0

    def renew_lease(self, origin: str, holder: str, ttl: float) -> bool:
        self.renewals += 1
        return super().renew_lease(origin, holder, ttl)


# -- renewals ----------------------------------------------------------------------------


def test_a_running_fetch_renews_its_lease_every_third_of_its_ttl_until_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = new_clock()
    storage = CountingMemoryStorage()
    config = Config(storage="memory", lease_ttl=30.0)
    keeper = LeaseKeeper(storage, "us", config, StoreCalls(storage), clock.seconds, clock)
    assert storage.acquire_lease(A, "us", config.lease_ttl)
    keeper.start_renewing(A)

    clock.advance(9.99)
    assert storage.renewals == 0
    clock.advance(0.01)
    assert storage.renewals == 1
    clock.advance(10)
    assert storage.renewals == 2
    assert storage.lease_holder(A) == "us"

    keeper.stop_renewing(A)
    clock.advance(100)
    assert storage.renewals == 2
    assert pending_timers(clock) == []


def test_a_lease_taken_over_is_no_longer_renewed_and_that_is_said(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = new_clock()
    storage = CountingMemoryStorage()
    config = Config(storage="memory", lease_ttl=30.0)
    keeper = LeaseKeeper(storage, "us", config, StoreCalls(storage), clock.seconds, clock)
    storage.acquire_lease(A, "us", config.lease_ttl)
    keeper.start_renewing(A)
    storage.release_lease(A, "us")
    assert storage.acquire_lease(A, ANOTHER_PROCESS, config.lease_ttl)

    with caplog.at_level(logging.INFO, logger="scrapy_rep"):
        clock.advance(10)
    assert storage.renewals == 1
    assert any("lost the fetch lease of " + A in m for m in caplog.messages)
    clock.advance(100)
    assert storage.renewals == 1  # not retried: the lease is the other process's now
    assert storage.lease_holder(A) == ANOTHER_PROCESS


def test_close_stops_every_renewal(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = new_clock()
    storage = CountingMemoryStorage()
    config = Config(storage="memory")
    keeper = LeaseKeeper(storage, "us", config, StoreCalls(storage), clock.seconds, clock)
    for origin in ("https://a.example", "https://b.example"):
        storage.acquire_lease(origin, "us", config.lease_ttl)
        keeper.start_renewing(origin)
    keeper.close()
    clock.advance(100)
    assert storage.renewals == 0 and pending_timers(clock) == []


# -- the coordinator's leases ------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_a_fetch_holds_the_lease_renews_it_and_closing_releases_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    storage = CountingMemoryStorage()
    runtime = build_runtime(storage=storage, lease_ttl=30.0)
    coordinator = runtime.coordinator
    coordinator.evaluate(A)
    await reactor_turns(lambda: runtime.fetcher.count(A) == 1, "the fetch")
    assert storage.lease_holder(A) == coordinator.holder
    runtime.clock.pump([10, 10, 5])  # a fetch longer than two renewal intervals
    assert storage.renewals == 2

    runtime.close()  # the fetch never answered

    assert storage.lease_holder(A) is None  # another process need not wait for its TTL
    runtime.clock.advance(100)
    assert storage.renewals == 2


@pytest_twisted.ensureDeferred
async def test_a_lease_held_elsewhere_is_waited_on_said_once_and_then_taken(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = build_runtime()
    storage, clock = runtime.storage, runtime.clock
    try:
        assert storage.acquire_lease(A, ANOTHER_PROCESS, 30.0)
        with caplog.at_level(logging.INFO, logger="scrapy_rep"):
            assert not runtime.coordinator.evaluate(A).ready
            runtime.hold(A, "/1")
            for _ in range(int(2 * LEASE_WAIT_LOG_AFTER / 0.25)):
                clock.advance(0.25)  # each poll finds the lease still held
        waits = [m for m in caplog.messages if "that holds its fetch lease" in m]
        assert len(waits) == 1 and "elsewhere" in waits[0]
        assert runtime.fetcher.calls == []

        storage.release_lease(A, ANOTHER_PROCESS)  # it ended without an answer
        clock.advance(0.25)
        await reactor_turns(lambda: runtime.fetcher.count(A) == 1, "our own fetch")
        runtime.fetcher.answer(A, 200)
        await reactor_turns(lambda: runtime.released_urls(A) == [A + "/1"], "the release")
    finally:
        runtime.close()


# -- broken leases: taken over at once ---------------------------------------------------


def damage_lease(path: Path, origin: str, holder: object, expires_at: object) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT OR REPLACE INTO leases (origin, holder, expires_at) VALUES (?, ?, ?)",
            (origin, holder, expires_at),
        )


@pytest.mark.parametrize(
    "holder, expires_at, broken",
    [
        pytest.param(ANOTHER_PROCESS, "in 20 s", False, id="readable-control"),
        pytest.param(b"\xff\xfe not utf-8", "in 20 s", True, id="holder-not-text"),
        pytest.param(ANOTHER_PROCESS, "soon", True, id="expiry-not-a-number"),
    ],
)
@pytest_twisted.ensureDeferred
async def test_a_lease_row_that_cannot_be_read_is_broken_and_the_fetch_goes_ahead(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    holder: object,
    expires_at: object,
    broken: bool,
) -> None:
    path = tmp_path / "store.db"
    storage = SqliteStorage(path)
    runtime = build_runtime(storage=storage)
    try:
        storage.get(A)  # the file and its tables exist
        if expires_at == "in 20 s":
            expires_at = time.time() + 20  # within a TTL: a live lease if readable
        damage_lease(path, A, holder, expires_at)

        runtime.coordinator.evaluate(A)
        if broken:
            await reactor_turns(lambda: runtime.fetcher.count(A) == 1, "the fetch")
            assert storage.lease_holder(A) == runtime.coordinator.holder
        else:
            await reactor_turns(
                lambda: runtime.coordinator.fetching_now() == 0, "the lease attempt"
            )
            assert runtime.fetcher.calls == []
            assert storage.lease_holder(A) == ANOTHER_PROCESS
    finally:
        runtime.close()
        storage.close()


def test_leases_claiming_too_long_or_held_by_a_dead_process_are_broken() -> None:
    storage = MemoryStorage()
    # No renewal sets more than the TTL: an hour left is a clock jump or a bug.
    assert storage.acquire_lease(A, ANOTHER_PROCESS, 3600.0)
    assert storage.acquire_lease(A, "us", 30.0)
    # A process of this machine that has exited holds nothing.
    gone = subprocess.run(
        [sys.executable, "-c", "from scrapy_rep.storage.base import new_holder as h; print(h())"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    other = "https://b.example"
    assert storage.acquire_lease(other, gone, 30.0)
    assert storage.acquire_lease(other, new_holder(), 30.0)
    # A live one keeps it.
    assert not storage.acquire_lease(other, "us", 30.0)
