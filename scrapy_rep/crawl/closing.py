"""What becomes of waiting requests when the spider closes (docs/behaviour.md, "nothing
lost"): handed back to a persistent scheduler, kept in a shared store, or dropped with
one summary line and a stats key; the INFO line listing the waiting origins, and the
WARNING that names them, and what Ctrl-C does to them, once per run."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy_rep.crawl import compat
from scrapy_rep.crawl.record import NullRecorder
from scrapy_rep.crawl.visibility import clock_time, duration
from scrapy_rep.policy.origin import origin_of_memo

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler

    from scrapy_rep.crawl.durable_waiting import DurableWaiting
    from scrapy_rep.crawl.origins import Origins
    from scrapy_rep.crawl.scheduling import SchedulerBridge
    from scrapy_rep.crawl.waiting_room import WaitingRoom

logger = logging.getLogger(__name__)

# The waiting-origins lines name at most this many origins (the ones with most requests).
MAX_LISTED = 5


class WaitingAtClose:
    def __init__(
        self,
        crawler: Crawler,
        room: WaitingRoom,
        bridge: SchedulerBridge,
        keeper: DurableWaiting,
        origins: Origins,
        clock: Callable[[], float],
        recorder: NullRecorder | None = None,
    ) -> None:
        self.crawler = crawler
        assert crawler.stats is not None
        self.stats = crawler.stats
        self.room = room
        self.bridge = bridge
        self.keeper = keeper
        self.origins = origins
        self.clock = clock
        # Requests left to durable waiting at close, per origin (said kept in finish).
        self._left_to_keeper: dict[str, int] = {}
        self.recorder = recorder or NullRecorder()  # the compliance record (crawl/record.py)
        # Origins the "stays open only for waiting requests" WARNING has named this run.
        self._named_waiting: set[str] = set()

    def fate(self) -> str:
        return fate_of(self.bridge, self.keeper)

    def waiting_line(self, idle_for: float, idle_wait: float) -> str:
        """The periodic INFO line: the origins with most waiting requests, and why."""
        timed = self.room.timed_reasons()
        per_origin = []
        for origin in self.room.origins():
            rt = self.origins.lookup(origin)
            record = rt.record if rt is not None else None
            why = timed.get(origin) or (
                f"unreachable: {record.last_outcome}"
                if record is not None and record.unreachable
                else "robots.txt pending"
            )
            per_origin.append((origin, self.room.count(origin), why))
        ranked = sorted(per_origin, key=lambda item: (-item[1], item[0]))
        shown = ", ".join(
            f"{origin} ({count}: {why})" for origin, count, why in ranked[:MAX_LISTED]
        )
        more = f" and {len(ranked) - MAX_LISTED} more" if len(ranked) > MAX_LISTED else ""
        return (
            f"nothing to do but wait on robots.txt: {len(self.room)} request(s) of "
            f"{len(ranked)} origin(s) wait: {shown}{more}; idle for {duration(idle_for)}, the "
            f"spider closes after REP_IDLE_WAIT = {duration(idle_wait)}"
        )

    def warn_waiting(self, idle_for: float, idle_wait: float, unreachable_wait: float) -> None:
        """WARNING, once per run and origin, when requests waiting on a robots.txt this run
        found unreachable in the store keep the spider open: its failing refetches are
        DEBUG lines, so a later run would otherwise never name it at WARNING."""
        now = self.clock()
        closes_at = now + max(idle_wait - idle_for, 0.0)
        per_origin: list[tuple[str, int, str]] = []
        for origin in self.room.origins():
            rt = self.origins.lookup(origin)
            # Only an unreachable robots.txt keeps requests waiting for long (the INFO line
            # covers the rest); one that turned unreachable in this run had its WARNING.
            record = None if rt is None or rt.unreachable_spells else rt.record
            if origin in self._named_waiting or record is None or not record.unreachable:
                continue
            self._named_waiting.add(origin)
            ends = (record.unreachable_since or now) + unreachable_wait
            why = f"robots.txt unreachable: {record.last_outcome}"
            if ends < closes_at:
                why += f", until {clock_time(ends, now)} at the latest (REP_UNREACHABLE_WAIT)"
            per_origin.append((origin, self.room.count(origin), why))
        if not per_origin:
            return
        ranked = sorted(per_origin, key=lambda item: (-item[1], item[0]))
        shown = "; ".join(
            f"{origin} ({count} request(s), {why})" for origin, count, why in ranked[:MAX_LISTED]
        )
        more = f" and {len(ranked) - MAX_LISTED} more origin(s)" if len(ranked) > MAX_LISTED else ""
        logger.warning(
            "the spider stays open only for requests waiting on robots.txt: %s%s. With nothing "
            "else to do it waits until %s (REP_IDLE_WAIT); Ctrl-C stops the crawl now, and "
            "the waiting requests are %s",
            shown,
            more,
            clock_time(closes_at, now),
            self.fate(),
        )

    def install_handback(self) -> None:
        """On a graceful stop, give held requests back to a persistent scheduler before it
        closes (Scrapy closes it before sending ``spider_closed``)."""
        compat.run_before_scheduler_close(
            self.bridge.scheduler(), lambda: self.empty_room(handing_back=self.bridge.persists())
        )

    def empty_room(self, *, handing_back: bool) -> None:
        durable = not handing_back and self.keeper.durable
        # Counting is all the other fates need: held requests stay bytes for them.
        entries = self.room.take_everything(forget=not durable, restore=handing_back)
        now = self.clock()
        late = [(origin_of_memo(r.url) or "", r) for r in self.bridge.late]
        self.bridge.late = []
        if durable:
            # Released during the shutdown: the release forgot their entries and no
            # scheduler took them; recorded again, so what is called kept is kept.
            for origin, request in late:
                self.keeper.record(origin, (request,))
        entries += [(origin, r, now) for origin, r in late]
        if not entries:
            return
        requests: list[Any] = [request for _, request, _ in entries]
        per_origin: dict[str, int] = {}
        for origin, _, since in entries:  # (each counts in its origin's longest wait)
            per_origin[origin] = per_origin.get(origin, 0) + 1
            rt = self.origins.lookup(origin)
            if rt is not None:
                rt.longest_wait = max(rt.longest_wait, now - since)
        if handing_back:
            taken = self.bridge.hand_back(requests)
            self.stats.inc_value("robotstxt/handed_back", taken)
            self._count_outcome(per_origin, "handed_back")
            logger.info(
                "%d request(s) waiting on robots.txt handed back to the "
                "scheduler (%s); a resumed crawl will have them",
                taken,
                "JOBDIR" if self.crawler.settings.get("JOBDIR") else "persistent scheduler",
            )
        elif durable:
            for origin, count in per_origin.items():
                self._left_to_keeper[origin] = self._left_to_keeper.get(origin, 0) + count
        else:
            self.recorder.dropped_at_close(entries)
            self._dropped(
                per_origin,
                "the spider closed while they waited on robots.txt (set JOBDIR, use a "
                "persistent scheduler, or set REP_DURABLE_WAITING = True, to keep them)",
            )

    def finish(self, handed_back: bool) -> None:
        """At ``spider_closed``: the keeper writes what is pending; only then are requests
        left to it said to be kept, as many as its store holds; the rest count as dropped."""
        left = sum(self._left_to_keeper.values())
        in_store = self.keeper.close(handed_back and not left)
        if not left:
            return
        kept = left if in_store is None else min(in_store, left)
        if kept:
            self.stats.inc_value("robotstxt/kept_in_store", kept)
            logger.info(
                "%d request(s) waiting on robots.txt kept in the shared store "
                "for another process or the next run",
                kept,
            )
        if kept < left:
            # Not written at close, or never storable: gone with this process.
            per_origin = self._left_to_keeper if not kept else {"": left - kept}
            self._dropped(
                per_origin,
                "they waited on robots.txt and the shared store did not take them (not "
                "written at close, or not storable)",
            )
        self._left_to_keeper = {}

    def _dropped(self, per_origin: dict[str, int], why: str) -> None:
        count = sum(per_origin.values())
        self._count_outcome(per_origin, "dropped_at_close")
        top = sorted(per_origin.items(), key=lambda item: -item[1])[:5]
        self.stats.inc_value("robotstxt/dropped_at_close", count)
        logger.info(
            "dropped %d request(s), %s: %s",
            count,
            why,
            ", ".join(f"{origin} ({n})" for origin, n in top if origin) or "origins not known",
        )

    def _count_outcome(self, per_origin: dict[str, int], field: str) -> None:
        for origin, count in per_origin.items():
            rt = self.origins.lookup(origin)
            if rt is not None:
                setattr(rt, field, getattr(rt, field) + count)


def fate_of(bridge: SchedulerBridge, keeper: DurableWaiting) -> str:
    """What becomes of waiting requests if the spider closes now."""
    if bridge.persists():
        return "handed back to the scheduler"
    if keeper.durable:
        return "kept in the shared store"
    return "dropped"
