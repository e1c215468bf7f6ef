"""Cluster coordination on the shared stores: parked requests, heartbeats, Crawl-delay turns.

The primitives (docs/cluster.md) are methods of the store, on its own connection;
``RobotsStorage.cluster(spider)`` binds them to a spider. Every method blocks (callers
run them off the reactor thread) and raises ``ClusterError``, never a driver exception.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

#: (key, origin, blob) of one parked request.
Parked = tuple[str, str, bytes]


class ClusterError(Exception):
    """The shared store could not do a cluster operation (outage, damaged entry)."""


_NO_CLUSTER = "this robots.txt store keeps no cluster state"


class ClusterBackend(abc.ABC):
    """A store's cluster primitives, for every spider: ``SpiderCluster``'s methods with the
    spider's name first. ``RobotsStorage`` derives from it; the defaults raise, as a store
    that is not shared across processes keeps no cluster state."""

    def park(
        self, spider: str, owner: str, ttl: float, add: Sequence[Parked], remove: Sequence[str]
    ) -> None:
        raise ClusterError(_NO_CLUSTER)

    def adopt(self, spider: str, owner: str, ttl: float, limit: int) -> list[Parked]:
        raise ClusterError(_NO_CLUSTER)

    def retire(self, spider: str, owner: str, *, keep: bool) -> None:
        raise ClusterError(_NO_CLUSTER)

    def parked(self, spider: str, owner: str | None = None) -> list[Parked]:
        raise ClusterError(_NO_CLUSTER)

    def reserve_turn(
        self, spider: str, origin: str, spacing: float, horizon: float, not_before: float = 0.0
    ) -> tuple[bool, float]:
        raise ClusterError(_NO_CLUSTER)

    @abc.abstractmethod
    def close(self) -> None: ...


class SpiderCluster:
    """One spider's cluster primitives on a shared store. ``close`` closes the store only
    when this view owns it (a tool's or a test's); in a crawl the middleware closes it."""

    def __init__(self, store: ClusterBackend, spider: str, *, owns_store: bool = False) -> None:
        self.store = store
        self.spider = spider
        self.owns_store = owns_store

    def park(self, owner: str, ttl: float, add: Sequence[Parked], remove: Sequence[str]) -> None:
        """Beat ``owner``'s heartbeat, then add and remove its parked requests. An entry
        of the same key under another owner is taken over (one parked copy per request)."""
        self.store.park(self.spider, owner, ttl, add, remove)

    def adopt(self, owner: str, ttl: float, limit: int) -> list[Parked]:
        """Beat ``owner``'s heartbeat, move at most ``limit`` parked requests of dead owners
        to it and return them (keys it already has are dropped, not returned)."""
        return self.store.adopt(self.spider, owner, ttl, limit)

    def retire(self, owner: str, *, keep: bool) -> None:
        """End ``owner``'s heartbeat; its parked requests stay for adoption when ``keep``."""
        self.store.retire(self.spider, owner, keep=keep)

    def parked(self, owner: str | None = None) -> list[Parked]:
        return self.store.parked(self.spider, owner)

    def reserve_turn(
        self, origin: str, spacing: float, horizon: float, not_before: float = 0.0
    ) -> tuple[bool, float]:
        """Reserve the origin's next turn: the later of now (+ ``not_before``) and its next
        allowed time, which then moves ``spacing`` past it. Returns (reserved, seconds
        until the turn). A turn more than ``horizon`` seconds away is not reserved (a
        process that dies wastes at most ``horizon`` of the origin's turns); the answer
        then says how long until one may be."""
        return self.store.reserve_turn(self.spider, origin, spacing, horizon, not_before)

    def close(self) -> None:
        if self.owns_store:
            self.store.close()


#: The type callers (the durable waiting room, cluster-wide Crawl-delay) hold.
ClusterStore = SpiderCluster
