"""Crawl-delay kept on Scrapy's download slots (docs/behaviour.md, "Crawl-delay"; Google:
Crawl-delay is a minimum spacing between requests to a site).

A slot's delay is raised to the Crawl-delay and its random jitter narrowed so that the
shortest gap is still the Crawl-delay; the same timing is kept for the slots Scrapy
makes for that key later, so a slot made again after its 60 s idle collection keeps it,
and it is re-asserted before each download, because AutoThrottle rewrites the slot's
delay on every response. Scrapy's slots are reached through ``compat`` only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import signals

from scrapy_rep.crawl import compat

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler


class SlotDelays:
    def __init__(self, crawler: Crawler, max_delay: float) -> None:
        self.crawler = crawler
        self.max_delay = max_delay
        # slot key -> crawl-delay we must keep on it (see on_reached_downloader)
        self._delays: dict[str, float] = {}

    def apply(self, request: Request, delay: float) -> None:
        """Keep *request*'s download slot at least *delay* apart (capped at
        REP_MAX_CRAWL_DELAY), also for slots Scrapy creates anew later."""
        if delay <= 0:
            return
        delay = min(delay, self.max_delay)
        downloader = compat.downloader_of(self.crawler)
        if downloader is None:
            return
        key = downloader.get_slot_key(request)
        if self._delays.get(key, 0.0) >= delay:
            return
        if not self._delays:
            # Listen from the first Crawl-delay on: until then there is nothing to
            # re-assert, and a receiver costs every request a signal dispatch.
            self.crawler.signals.connect(
                self.on_reached_downloader, signal=signals.request_reached_downloader
            )
        self._delays[key] = delay
        # Kept for the slots Scrapy makes for this key later too, so the delay survives
        # the slot being garbage-collected after 60 s idle.
        slot_delay, jitter = compat.new_slot_timing(downloader, key)
        slot_delay = max(slot_delay, delay)
        compat.keep_new_slot_timing(
            downloader, key, slot_delay, _bounded_jitter(slot_delay, jitter, delay)
        )
        slot = compat.download_slot(downloader, key)
        if slot is not None:
            _hold_slot_to(slot, delay)
        self.crawler.stats.set_value(f"robotstxt/crawl_delay/{key}", delay)

    def on_reached_downloader(self, request: Request, spider: Any = None) -> None:
        """Re-assert Crawl-delay before each download: AutoThrottle rewrites slot.delay
        on every response and floors it only at DOWNLOAD_DELAY."""
        if not self._delays:
            return
        downloader = compat.downloader_of(self.crawler)
        if downloader is None:
            return
        key = request.meta.get("download_slot")
        delay = self._delays.get(key) if key is not None else None
        if delay is None:
            return
        slot = compat.download_slot(downloader, key)
        if slot is not None:
            _hold_slot_to(slot, delay)


def _bounded_jitter(slot_delay: float, jitter: float, crawl_delay: float) -> float:
    """The largest jitter <= ``jitter`` whose shortest gap is still ``crawl_delay``.

    Scrapy varies each slot delay by +/- ``jitter`` (+/-50 % by default), so a slot
    delay of exactly the Crawl-delay would space requests as little as half of it apart.
    Crawl-delay is a minimum spacing: narrow the jitter (never the delay) so that
    ``slot_delay * (1 - jitter) >= crawl_delay``. Before Scrapy 2.19 a slot's delay is
    varied by +/-50 % or not at all: a jitter of 0.5 narrowed below it turns randomising
    off (``compat.set_slot_jitter``).
    """
    if jitter <= 0 or slot_delay <= 0:
        return max(jitter, 0.0)
    return max(0.0, min(jitter, 1.0 - crawl_delay / slot_delay))


def _hold_slot_to(slot: Any, crawl_delay: float) -> None:
    """Raise the slot delay to the Crawl-delay and bound its jitter (see above)."""
    slot_delay = compat.raise_slot_delay(slot, crawl_delay)
    jitter = compat.slot_jitter(slot)
    if jitter:
        compat.set_slot_jitter(slot, _bounded_jitter(slot_delay, jitter, crawl_delay))
