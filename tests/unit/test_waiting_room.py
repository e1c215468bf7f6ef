"""``WaitingRoom`` on its own: held and timed requests, the spill to disk beyond its
memory bound, and closing, on a ``Clock`` (no crawl, no reactor turns)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import scrapy
from scrapy import Request
from scrapy.utils.test import get_crawler

from scrapy_rep.crawl.request_codec import RequestCodec
from scrapy_rep.crawl.waiting_room import Spill, WaitingRoom, spill_root
from tests.support.clock import new_clock, pending_timers
from tests.support.runtime import RecordingLedger

A = "https://a.example"
B = "https://b.example"
C = "https://c.example"


class HeldSpider(scrapy.Spider):
    name = "held"

    def parse_item(self, response: Any) -> None:
        pass


class Room:
    """A room on a Clock with a recording ledger; ``due``: what its timer handed on."""

    def __init__(
        self,
        tmp_path: Path | None = None,
        memory_bound: int = 0,
        serialise: bool = False,
    ) -> None:
        self.clock = new_clock()
        self.ledger = RecordingLedger()
        self.due: list[tuple[str, str, float]] = []
        self.unserialisable: list[str] = []
        codec = make_spill = None
        if serialise or memory_bound:
            crawler = get_crawler(HeldSpider, {"JOBDIR": str(tmp_path)} if tmp_path else {})
            crawler.spider = self.spider = HeldSpider.from_crawler(crawler)
            codec = RequestCodec(crawler)
            make_spill = lambda: Spill(spill_root(crawler.settings))  # noqa: E731
        self.room = WaitingRoom(
            self.ledger,
            self.clock.seconds,
            self.clock.callLater,
            lambda origin, request, since: self.due.append((origin, request.url, since)),
            memory_bound=memory_bound,
            make_spill=make_spill,
            on_unserialisable=lambda request: self.unserialisable.append(request.url),
            codec=codec,
        )


def urls(taken: list[tuple[Request, float]]) -> list[str]:
    return [request.url for request, _ in taken]


# -- held until the origin is decided ----------------------------------------------------


def test_hold_then_take_gives_the_origins_requests_oldest_first_with_their_wait() -> None:
    box = Room()
    room, clock = box.room, box.clock
    start = clock.seconds()
    room.hold(A, Request(A + "/1"))
    clock.advance(2)
    room.hold(B, Request(B + "/1"))
    room.hold(A, Request(A + "/2"))
    assert (len(room), room.count(A), room.count(B), room.count(C)) == (3, 2, 1, 0)
    assert box.ledger.urls() == {A: [A + "/1", A + "/2"], B: [B + "/1"]}

    taken = room.take(A)

    assert urls(taken) == [A + "/1", A + "/2"]
    assert [since for _, since in taken] == [start, start + 2]
    assert (len(room), room.count(A)) == (1, 0)
    assert box.ledger.urls() == {B: [B + "/1"]}  # what left the room is forgotten
    assert room.take(A) == []  # taking twice hands nothing out twice
    assert list(room.origins()) == [B]


def test_held_requests_are_kept_as_bytes_and_come_back_whole() -> None:
    box = Room(serialise=True)
    request = Request(A + "/page", callback=box.spider.parse_item, meta={"depth": 3}, priority=7)
    box.room.hold(A, request)
    [(restored, _)] = box.room.take(A)
    assert restored is not request  # it was stored as bytes
    assert (restored.url, restored.meta["depth"], restored.priority) == (A + "/page", 3, 7)
    assert restored.callback == box.spider.parse_item


def test_the_room_keeps_every_copy_it_is_given_and_lists_each_origin_once(
    tmp_path: Path,
) -> None:
    # Duplicates are filtered before the room (the scheduler's dupefilter, in
    # SchedulerBridge.seen_before): the room itself loses nothing it was given.
    box = Room(tmp_path, memory_bound=2)
    room = box.room
    for _ in range(2):
        room.hold(A, Request(A + "/same"))
    room.hold(A, Request(A + "/spilled"))  # beyond the bound: on disk
    room.hold_until(A, Request(A + "/timed"), box.clock.seconds() + 5, "turn")
    room.hold_until(B, Request(B + "/timed"), box.clock.seconds() + 5, "turn")
    assert room.count(A) == 4
    assert sorted(room.origins()) == [A, B]
    assert urls(room.take(A)) == [A + "/same", A + "/same", A + "/spilled"]


def in_memory(room: WaitingRoom) -> int:
    """Requests the room keeps in RAM: all of them but those spilled to disk."""
    return len(room) - (room.spill.total if room.spill else 0)


# -- beyond the memory bound -------------------------------------------------------------


def test_beyond_the_memory_bound_requests_spill_to_disk_and_come_back_in_order(
    tmp_path: Path,
) -> None:
    box = Room(tmp_path, memory_bound=2)
    room = box.room
    for n in range(5):
        room.hold(A, Request(f"{A}/{n}", callback=box.spider.parse_item))
    room.hold(B, Request(B + "/0", callback=box.spider.parse_item))

    assert in_memory(room) == 2
    assert (len(room), room.count(A), room.count(B), room.spilled_total) == (6, 5, 1, 4)
    held_dir = tmp_path / "rep-held"
    assert held_dir.is_dir() and len(list(held_dir.iterdir())) == 2  # one queue per origin

    taken = room.take(A)

    assert urls(taken) == [f"{A}/{n}" for n in range(5)]
    assert all(request.callback == box.spider.parse_item for request, _ in taken)
    assert (len(room), room.count(A)) == (1, 0)
    assert len(list(held_dir.iterdir())) == 1  # A's queue is gone from disk
    room.close()
    assert not held_dir.exists()


def test_a_request_that_cannot_be_serialised_stays_in_memory_beyond_the_bound(
    tmp_path: Path,
) -> None:
    box = Room(tmp_path, memory_bound=1)
    room = box.room
    room.hold(A, Request(A + "/0"))
    lambda_callback = Request(A + "/lambda", callback=lambda response: None)
    room.hold(A, lambda_callback)  # a lambda is no spider method: not picklable

    assert box.unserialisable == [A + "/lambda"]
    assert (in_memory(room), room.spilled_total) == (2, 0)
    taken = room.take(A)
    assert urls(taken) == [A + "/0", A + "/lambda"]
    assert taken[1][0] is lambda_callback


# -- held until a time -------------------------------------------------------------------


def test_timed_holds_are_handed_on_when_due_by_one_timer_in_deadline_order() -> None:
    box = Room()
    room, clock = box.room, box.clock
    start = clock.seconds()
    room.hold_until(A, Request(A + "/late"), start + 5, "Crawl-delay turn")
    room.hold_until(B, Request(B + "/early"), start + 2, "backend down")
    room.hold_until(A, Request(A + "/early"), start + 2, "Crawl-delay turn")

    assert pending_timers(clock) == [2.0]  # one timer, moved to the earliest deadline
    assert (len(room), room.count(A), room.count(B)) == (3, 2, 1)
    assert room.timed_reasons() == {B: "backend down", A: "Crawl-delay turn"}
    assert box.ledger.urls() == {A: [A + "/late", A + "/early"], B: [B + "/early"]}

    clock.advance(1.99)
    assert box.due == []
    clock.advance(0.01)
    assert box.due == [(B, B + "/early", start), (A, A + "/early", start)]
    assert box.ledger.urls() == {A: [A + "/late"]}  # forgotten before being handed on
    assert pending_timers(clock) == pytest.approx([3.0])  # re-armed for the next one

    clock.advance(3)
    assert [url for _, url, _ in box.due] == [B + "/early", A + "/early", A + "/late"]
    assert (len(room), pending_timers(clock), box.ledger.urls()) == (0, [], {})


def test_a_later_deadline_does_not_move_the_timer() -> None:
    box = Room()
    start = box.clock.seconds()
    box.room.hold_until(A, Request(A + "/1"), start + 2, "turn")
    box.room.hold_until(A, Request(A + "/2"), start + 9, "turn")
    assert pending_timers(box.clock) == [2.0]


# -- closing -----------------------------------------------------------------------------


def test_take_everything_empties_held_spilled_and_timed_requests(tmp_path: Path) -> None:
    box = Room(tmp_path, memory_bound=1)
    room = box.room
    room.hold(A, Request(A + "/held", callback=box.spider.parse_item))
    room.hold(B, Request(B + "/spilled", callback=box.spider.parse_item))
    room.hold_until(C, Request(C + "/timed"), box.clock.seconds() + 60, "turn")

    everything = room.take_everything()

    assert sorted((origin, request.url) for origin, request, _ in everything) == [
        (A, A + "/held"),
        (B, B + "/spilled"),
        (C, C + "/timed"),
    ]
    assert (len(room), list(room.origins()), box.ledger.urls()) == (0, [], {})


def test_take_everything_can_leave_the_ledger_its_records() -> None:
    # A durable ledger keeps them for another process (forget=False).
    box = Room()
    box.room.hold(A, Request(A + "/held"))
    box.room.hold_until(B, Request(B + "/timed"), box.clock.seconds() + 60, "turn")
    assert len(box.room.take_everything(forget=False)) == 2
    assert box.ledger.urls() == {A: [A + "/held"], B: [B + "/timed"]}


def test_close_cancels_the_timer_and_arms_no_other() -> None:
    box = Room()
    room, clock = box.room, box.clock
    room.hold_until(A, Request(A + "/1"), clock.seconds() + 2, "turn")
    room.close()
    assert pending_timers(clock) == []
    room.hold_until(A, Request(A + "/2"), clock.seconds() + 1, "turn")
    assert pending_timers(clock) == []
    clock.advance(10)
    assert box.due == []
    assert room.count(A) == 2  # still in the room, for take_everything at close
