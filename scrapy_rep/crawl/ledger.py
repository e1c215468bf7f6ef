"""Where held requests are recorded outside this process, so a ``kill -9`` loses none.

The waiting room calls a ``HeldLedger`` at each change of what it holds. The default,
``NullLedger``, records nothing: held requests then live only in this process (and are
handed back to a persistent scheduler at a graceful stop). A shared ledger (branch
``cluster``: held requests serialised into the shared store) is built by
``make_ledger``, the one function that chooses.

A ledger may set ``durable = True``: its records outlive this process, so at close the
requests it still holds are not counted as dropped (another process, or the next run,
adopts them) and ``forget`` is not called for them.

Waiting requests outlive the run only where the crawl itself does (docs/waiting.md):
Scrapy keeps its own queue and its dupefilter past a run only under ``JOBDIR`` or with
a scheduler that persists (scrapy-redis with ``SCHEDULER_PERSIST``). Keeping waiting
requests of a crawl that starts afresh each run would have the next run crawl them on
top of the same pages it finds again. So ``REP_DURABLE_WAITING`` unset means: durable
exactly when the crawl persists; ``True`` or ``False`` is the user's explicit choice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from scrapy_rep.crawl import compat

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from scrapy_rep.crawl.request_codec import RequestCodec
    from scrapy_rep.crawl.store_ledger import StoreLedger
    from scrapy_rep.policy.config import Config
    from scrapy_rep.storage.base import RobotsStorage

logger = logging.getLogger("scrapy_rep")


@runtime_checkable
class HeldLedger(Protocol):
    def record(self, origin: str, requests: Sequence[Request]) -> None:
        """``requests`` of ``origin`` start waiting in this process."""
        ...

    def forget(self, origin: str, requests: Sequence[Request]) -> None:
        """``requests`` left the room: released, dropped or handed back."""
        ...

    def adopt(self) -> Iterable[tuple[str, Request]]:
        """Requests orphaned by dead processes; polled periodically. Adopted requests
        enter the room as held requests of this process."""
        ...

    def close(self, handed_back: bool) -> int | None:
        """The spider closes; ``handed_back``: the room's requests went back to a
        persistent scheduler. A durable ledger returns how many of the requests it still
        holds its records now keep (None: all of them)."""
        ...


class NullLedger:
    """Records nothing: held requests live in this process only."""

    durable = False

    def record(self, origin: str, requests: Sequence[Request]) -> None:
        pass

    def forget(self, origin: str, requests: Sequence[Request]) -> None:
        pass

    def adopt(self) -> Iterable[tuple[str, Request]]:
        return ()

    def close(self, handed_back: bool) -> int | None:
        return 0


def crawl_persistence(settings: Any) -> str | None:
    """Why this crawl outlives a run (its queue and dupefilter are kept), or None:
    ``JOBDIR``, or a scheduler other than Scrapy's own with ``SCHEDULER_PERSIST``
    (scrapy-redis reads that setting; Scrapy's own scheduler does not)."""
    if settings.get("JOBDIR"):
        return "JOBDIR is set"
    scheduler = settings.get("SCHEDULER")
    if not isinstance(scheduler, str):
        scheduler = f"{getattr(scheduler, '__module__', '')}.{getattr(scheduler, '__name__', '')}"
    if _truthy(settings.get("SCHEDULER_PERSIST")) and not scheduler.startswith("scrapy.core."):
        return "the scheduler persists (SCHEDULER_PERSIST)"
    return None


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def durability_choice(config: Config, settings: Any) -> tuple[bool, str]:
    """Whether waiting requests are to be recorded in the shared store, and why."""
    if config.durable_waiting is True:
        return True, "REP_DURABLE_WAITING = True"
    if config.durable_waiting is False:
        return False, "REP_DURABLE_WAITING = False"
    persists = crawl_persistence(settings)
    if persists is not None:
        return True, persists
    return False, "the crawl does not persist: no JOBDIR, no persistent scheduler"


def make_ledger(
    crawler: Crawler, config: Config, storage: Any, codec: RequestCodec | None = None
) -> HeldLedger:
    """The ledger for this crawl: held requests recorded in a shared store (Redis, or
    SQLite for processes on one machine) so a ``kill -9`` loses none, when waiting
    requests are to outlive the run (``durability_choice``); else none. ``codec``: the
    waiting room's, so a request is serialised once for both."""
    wanted, _ = durability_choice(config, crawler.settings)
    if not wanted:
        return NullLedger()
    return make_store_ledger(crawler, config, storage, codec) or NullLedger()


def waiting_fate_line(config: Config, settings: Any, ledger: HeldLedger) -> str:
    """The start-up INFO line: what becomes of requests waiting on robots.txt when the
    crawl stops, and why (said once, so a user knows before the first stop)."""
    wanted, why = durability_choice(config, settings)
    persists = crawl_persistence(settings)
    head = "scrapy-rep: requests waiting on robots.txt"
    if is_durable(ledger):
        if persists is not None:
            return (
                f"{head} outlive this run ({why}): a graceful stop hands them back to the "
                "scheduler, and the shared store keeps them against a kill -9"
            )
        return (
            f"{head} outlive this run ({why}): they are kept in the shared store, and "
            "another process or the next run adopts them"
        )
    if wanted:
        why += ", but REP_STORAGE is not a store shared across processes (or could not be opened)"
    if persists is not None:
        return (
            f"{head} outlive this run ({persists}): a graceful stop hands them back to the "
            f"scheduler; they are not recorded in the store ({why}), so a kill -9 loses them"
        )
    return (
        f"{head} when the crawl stops are dropped, with one summary line and "
        f"robotstxt/dropped_at_close ({why}); set JOBDIR, or REP_DURABLE_WAITING = True, "
        "to keep them"
    )


def make_store_ledger(
    crawler: Crawler,
    config: Config,
    storage: RobotsStorage | None = None,
    codec: RequestCodec | None = None,
) -> StoreLedger | None:
    """A StoreLedger when ``REP_STORAGE`` is shared across processes (Redis, SQLite),
    else None. A store that cannot be opened for it is logged, and requests then wait
    in this process only. ``REP_DURABLE_WAITING = False`` asks for that too. (Whether
    the crawl wants one at all is ``make_ledger``'s choice.)"""
    from scrapy_rep.crawl.shared_store import open_cluster
    from scrapy_rep.crawl.store_ledger import StoreLedger
    from scrapy_rep.storage.cluster import ClusterError

    if config.durable_waiting is False:
        return None
    try:
        # (a caller without the crawl's store gets a store of its own)
        spider = crawler.spidercls.name
        cluster = open_cluster(config, spider) if storage is None else storage.cluster(spider)
    except ClusterError as exc:
        logger.warning(
            "scrapy-rep: waiting requests are kept in this process only: the shared store "
            "cannot hold them (%s)",
            exc,
        )
        return None
    if cluster is None:
        return None
    # The robots.txt store (Redis) says when it is in an outage it already warned of.
    return StoreLedger(
        crawler,
        cluster,
        heartbeat=config.cluster_heartbeat,
        store_degraded=lambda: storage is not None and storage.degraded,
        codec=codec,
    )


def is_durable(ledger: HeldLedger) -> bool:
    return bool(getattr(ledger, "durable", False))


def passed_hook(ledger: HeldLedger) -> Callable[[Request], None] | None:
    """A durable ledger's ``passed(request)``, told of each dont_filter request that
    goes on without waiting (so an adopted copy of it is not crawled again); else None."""
    hook = getattr(ledger, "passed", None)
    return hook if callable(hook) else None


def look_when_idle(ledger: HeldLedger, crawler: Crawler, admit: Callable[[], None]) -> bool:
    """An idle spider asks a durable ledger to look for requests a dead process or an
    earlier run parked, at once rather than at the next periodic adoption. True: keep
    the spider open; when the look lands, ``admit`` takes what was adopted and the
    engine is woken to decide again (it would otherwise wait for its next heartbeat)."""
    look = getattr(ledger, "look_when_idle", None)
    if look is None:
        return False

    def landed() -> None:
        admit()
        compat.wake_engine(crawler)

    return bool(look(landed))
