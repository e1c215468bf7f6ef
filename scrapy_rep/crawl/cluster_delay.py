"""Crawl-delay kept by a whole cluster, not by each process on its own.

As docs/cluster.md (Crawl-delay) describes: on top of the download slot's delay
(``decide.py``), an allowed request reserves the origin's next turn in the shared store
(``ClusterStore.reserve_turn``: atomic, on the store's clock) and waits for a future turn
in the waiting room (``hold_until``), holding no download slot. A store that cannot be
reached lets the request go: a failing store must not stop a crawl.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import threads
from twisted.internet.task import deferLater

from scrapy_rep.crawl import compat
from scrapy_rep.crawl.store_calls import installed_reactor
from scrapy_rep.policy.records import RULES
from scrapy_rep.storage.cluster import ClusterError

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request
    from scrapy.crawler import Crawler

    from scrapy_rep.crawl.decide import Decider
    from scrapy_rep.policy.config import Config
    from scrapy_rep.policy.robots_policy import Evaluation
    from scrapy_rep.storage.base import RobotsStorage
    from scrapy_rep.storage.cluster import ClusterStore

logger = logging.getLogger(__name__)

#: The time (clock seconds) a request waits for before it may be scheduled again.
WAIT_META_KEY = "rep_turn_wait"
#: The time of the turn a request reserved; it goes then without reserving another.
TURN_META_KEY = "rep_turn"
#: Seconds of an origin's turns that may be reserved ahead of now.
HORIZON = 30.0
#: Added to the Crawl-delay between two turns. A request goes no later than ``LATE`` after
#: its turn, so two leave here at least ``Crawl-delay + TURN_MARGIN - LATE`` apart; the rest
#: covers the trip to the server, which varies by tens of milliseconds on a loaded machine
#: (Crawl-delay is a minimum spacing as the site sees the requests).
TURN_MARGIN = 0.1
#: How late after its turn a request may still go (see TURN_MARGIN).
LATE = 0.03
#: Added once more after this process's first request to an origin: its trip is slow (a new
#: connection, the download handler's lazy first use), up to 0.15 s later than TURN_MARGIN
#: allows on a busy machine, so the next holder's request followed it too closely.
FIRST_MARGIN = 0.4
#: A timer that fires this early still counts as the turn (timer granularity).
EARLY = 0.002
#: A turn this close is waited for in ``process_request``, not back through the scheduler,
#: whose trip could make it late; a request in the room comes back NEAR / 2 before its turn.
NEAR = 0.25
#: The latest time (clock seconds) a request holding a turn may go.
DEADLINE_META_KEY = "rep_turn_deadline"
#: Reservations in a row for one request that all came back too late to be used.
_MAX_TRIES = 3
STAT = "robotstxt/cluster_delay/"
_MAX_TURN_STATES = 10_000  # origins whose last logged turn state is remembered


class ClusterDelay:
    """Reserves Crawl-delay turns in the shared store (see the module docstring)."""

    def __init__(
        self,
        crawler: Crawler,
        config: Config,
        cluster: ClusterStore,
        decider: Decider,
        hold_until: Callable[[str, Request, float, str], None],
        ready: Callable[[str], bool],
        origin_of: Callable[[str], str | None],
        clock: Callable[[], float],
    ) -> None:
        self.crawler = crawler
        self.config = config
        self.cluster = cluster
        self.decider = decider
        self.hold_until = hold_until
        self.ready = ready
        self.origin_of = origin_of
        self.clock = clock
        assert crawler.stats is not None
        self.stats = crawler.stats
        self._waiting_for_room: dict[str, int] = {}
        self._warned = False
        # origin -> (turn reserved, Crawl-delay) last logged at DEBUG
        self._turn_states: dict[str, tuple[bool, float]] = {}
        # Origins this process reserved a turn for (FIRST_MARGIN), bounded as _turn_states.
        self._reserved_for: set[str] = set()
        crawler.signals.connect(self._on_request_scheduled, signal=signals.request_scheduled)
        crawler.signals.connect(cluster.close, signal=signals.spider_closed)

    def _log_turn_state(
        self, origin: str, request: Request, reserved: bool, delay: float, wait: float
    ) -> None:
        """DEBUG once per origin and change of (reserved, Crawl-delay), not per request (a
        long crawl of one origin would log every page); the stats count every turn."""
        state = (reserved, delay)
        if self._turn_states.get(origin) == state:
            return
        if len(self._turn_states) >= _MAX_TURN_STATES:
            self._turn_states.clear()  # a broad crawl: a few lines said again, no growth
        self._turn_states[origin] = state
        logger.debug(
            "Crawl-delay turns of %s (Crawl-delay %g s) %s, from %s (in %.3f s); said "
            "again when that changes",
            origin,
            delay,
            "reserved in the shared store" if reserved else "wait: the horizon is full",
            request,
            wait,
        )

    async def turn(self, request: Request, origin: str, evaluation: Evaluation) -> Request | None:
        """None: download now; a request: return it from ``process_request`` and it waits
        in the room until its turn. A request goes between its turn and ``LATE`` after it,
        never later (the next holder would follow it by less than the Crawl-delay); past
        that it takes a new turn (``robotstxt/cluster_delay/late``)."""
        if evaluation.kind != RULES:
            return None
        # the copy decide() used (a large file is never parsed in one piece here)
        robots = await self.decider.parsed_for(origin, evaluation.body, request)
        delay = robots.crawl_delay(self.decider.token_for(request))
        if not delay or delay <= 0:
            return None
        delay = float(min(delay, self.config.max_crawl_delay))
        meta = request.meta
        turn = meta.pop(TURN_META_KEY, None)
        if turn is not None:
            deadline = float(meta.pop(DEADLINE_META_KEY, float(turn) + LATE))
            used, later = await self._at_turn(request, float(turn), deadline)
            if used:
                return later
        spacing = delay + TURN_MARGIN + self._first_margin(origin)
        for _ in range(_MAX_TRIES):
            not_before = self._slot_ready_in(request)
            try:
                reserved, wait, asked, answered = await maybe_deferred_to_future(
                    threads.deferToThread(self._reserve, origin, spacing, not_before)
                )
            except ClusterError as exc:
                self.stats.inc_value(f"{STAT}store_errors")
                if not self._warned:
                    self._warned = True
                    logger.warning(
                        "cannot reserve Crawl-delay turns in the shared store "
                        "(%s): each process keeps the Crawl-delay on its own until it can",
                        exc,
                    )
                return None
            self._log_turn_state(origin, request, reserved, delay, wait)
            if not reserved:
                # Horizon full: ask again when there is room, one Crawl-delay after this
                # process's previous request that found it full.
                place = self._waiting_for_room.get(origin, 0)
                self._waiting_for_room[origin] = place + 1
                self.stats.inc_value(f"{STAT}horizon_full")
                return self._wait(request, self.clock() + wait + place * delay, None)
            self.stats.inc_value(f"{STAT}turns")
            # The store read its clock between ``asked`` and ``answered``: going at
            # ``answered + wait`` is never early, ``asked + wait + LATE`` never too late.
            used, later = await self._at_turn(request, answered + wait, asked + wait + LATE)
            if used:
                return later
        # Every turn came back too late (a stalled reactor): try again a Crawl-delay later.
        return self._wait(request, self.clock() + delay, None)

    def _first_margin(self, origin: str) -> float:
        if origin in self._reserved_for:
            return 0.0
        if len(self._reserved_for) >= _MAX_TURN_STATES:
            self._reserved_for.clear()
        self._reserved_for.add(origin)
        return FIRST_MARGIN

    def _reserve(self, origin: str, spacing: float, not_before: float) -> tuple[Any, ...]:
        """In a worker thread: the reservation, our clock read either side of it (not on the
        reactor, whose delays would widen the bracket)."""
        asked = self.clock()
        reserved, wait = self.cluster.reserve_turn(origin, spacing, HORIZON, not_before)
        return reserved, wait, asked, self.clock()

    async def _at_turn(
        self, request: Request, turn: float, deadline: float
    ) -> tuple[bool, Request | None]:
        """A request whose turn is ``turn``: (True, None) goes now, (True, a request)
        is sent back to wait for it, (False, None) is too late (the turn is lost)."""
        now = self.clock()
        ahead = turn - now
        if ahead > NEAR:
            return True, self._wait(request, turn - NEAR / 2, deadline, turn=turn)
        if ahead > EARLY:
            # Near: waited here; the scheduler's trip could make the request late.
            await maybe_deferred_to_future(deferLater(installed_reactor(), ahead, lambda: None))
            now = self.clock()
        if now <= deadline:
            return True, None
        self.stats.inc_value(f"{STAT}late")
        logger.debug(
            "Crawl-delay turn missed by %.3f s for %s: taking another", now - turn, request
        )
        return False, None

    def _slot_ready_in(self, request: Request) -> float:
        """Seconds until this process's download slot lets the request go: a turn reserved
        sooner would be spent in the slot, and the next holder would follow too closely."""
        downloader = compat.downloader_of(self.crawler)
        if downloader is None:
            return 0.0
        slot = compat.download_slot(downloader, downloader.get_slot_key(request))
        return 0.0 if slot is None else compat.slot_ready_in(slot)

    def _wait(
        self, request: Request, when: float, deadline: float | None, turn: float | None = None
    ) -> Request:
        """Send ``request`` back to wait until ``when``; with a ``deadline`` it holds a turn
        (at ``turn``, else ``when``) and goes then without reserving another."""
        self.stats.inc_value(f"{STAT}waited")
        meta = {**request.meta, WAIT_META_KEY: when}
        if deadline is not None:
            meta[TURN_META_KEY] = when if turn is None else turn
            meta[DEADLINE_META_KEY] = deadline
        # dont_filter: the dupefilter saw it when it was first scheduled.
        return request.replace(dont_filter=True, meta=meta)

    def _on_request_scheduled(self, request: Request, spider: Any = None) -> None:
        when = request.meta.get(WAIT_META_KEY)
        if when is None:
            return
        del request.meta[WAIT_META_KEY]
        origin = self.origin_of(request.url)
        if origin is None:
            return
        if TURN_META_KEY not in request.meta:
            left = self._waiting_for_room.pop(origin, 1) - 1
            if left > 0:
                self._waiting_for_room[origin] = left
        if when <= self.clock() + EARLY or not self.ready(origin):
            # Due, or undecided again: the room's own gate holds it (twice would release
            # it twice).
            return
        self.hold_until(origin, request, when, "Crawl-delay turn shared by the cluster")
        # From a request_scheduled receiver: kept out of the scheduler, no errback.
        raise IgnoreRequest(f"waiting for its Crawl-delay turn on {origin}")


def make_cluster_delay(
    crawler: Crawler,
    config: Config,
    decider: Decider,
    storage: RobotsStorage,
    *,
    hold_until: Callable[[str, Request, float, str], None],
    ready: Callable[[str], bool],
    origin_of: Callable[[str], str | None],
    clock: Callable[[], float],
) -> ClusterDelay | None:
    """A ClusterDelay when the store is shared and Crawl-delay is obeyed, else None."""
    if not config.crawl_delay or not config.enforce:
        return None
    try:
        cluster = storage.cluster(crawler.spidercls.name)
    except ClusterError as exc:
        logger.warning("no cluster-wide Crawl-delay (the shared store cannot be opened: %s)", exc)
        return None
    if cluster is None:
        return None
    return ClusterDelay(crawler, config, cluster, decider, hold_until, ready, origin_of, clock)
