"""Crawl-delay kept on Scrapy's download slots (docs/behaviour.md, "Crawl-delay"; Google:
Crawl-delay is a minimum spacing between requests to a site).

A slot's delay is raised to the Crawl-delay and its random jitter narrowed so that the
shortest gap is still the Crawl-delay; the delay also goes into the downloader's
``per_slot_settings``, so a slot Scrapy creates again after its 60 s idle collection
keeps it (Scrapy drops a slot idle for 60 s), and it is re-asserted before each download, because
AutoThrottle rewrites ``slot.delay`` on every response.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import signals

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
        engine = self.crawler.engine
        downloader = getattr(engine, "downloader", None)
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
        # per_slot_settings is what a new slot reads, so the delay survives the slot
        # being garbage-collected after 60 s idle (Downloader._slot_gc).
        slot_settings = downloader.per_slot_settings.setdefault(key, {})
        slot_delay = max(float(slot_settings.get("delay", _downloader_delay(downloader))), delay)
        slot_settings["delay"] = slot_delay
        if hasattr(downloader, "_jitter"):  # Scrapy 2.19+: a jitter fraction
            jitter = float(slot_settings.get("jitter", downloader._jitter))
            slot_settings["jitter"] = _bounded_jitter(slot_delay, jitter, delay)
        else:  # earlier: RANDOMIZE_DOWNLOAD_DELAY, on (+/-50 %) or off
            randomize = bool(slot_settings.get("randomize_delay", downloader.randomize_delay))
            slot_settings["randomize_delay"] = randomize and _halved_gap_fits(slot_delay, delay)
        slot = downloader.slots.get(key)
        if slot is not None:
            _hold_slot_to(slot, delay)
        self.crawler.stats.set_value(f"robotstxt/crawl_delay/{key}", delay)

    def on_reached_downloader(self, request: Request, spider: Any = None) -> None:
        """Re-assert Crawl-delay before each download: AutoThrottle rewrites slot.delay
        on every response and floors it only at DOWNLOAD_DELAY."""
        if not self._delays:
            return
        engine = self.crawler.engine
        downloader = getattr(engine, "downloader", None)
        if downloader is None:
            return
        key = request.meta.get("download_slot")
        delay = self._delays.get(key) if key is not None else None
        if delay is None:
            return
        slot = downloader.slots.get(key)
        if slot is not None:
            _hold_slot_to(slot, delay)


def _downloader_delay(downloader: Any) -> float:
    """DOWNLOAD_DELAY as the downloader applies it to new slots."""
    if hasattr(downloader, "_delay"):  # Scrapy 2.19+
        return float(downloader._delay or 0.0)
    # Earlier versions read it for each new slot: the spider's download_delay
    # attribute, else the setting.
    spider = getattr(downloader.crawler, "spider", None)
    delay = getattr(spider, "download_delay", None)
    if delay is None:
        delay = downloader.settings.getfloat("DOWNLOAD_DELAY")
    return float(delay or 0.0)


def _bounded_jitter(slot_delay: float, jitter: float, crawl_delay: float) -> float:
    """The largest jitter <= ``jitter`` whose shortest gap is still ``crawl_delay``.

    Scrapy varies each slot delay by +/- ``jitter`` (RANDOMIZE_DOWNLOAD_DELAY is on by
    default: +/-50 %), so a slot delay of exactly the Crawl-delay would space requests
    as little as half of it apart. Crawl-delay is a minimum spacing: narrow the jitter
    (never the delay) so that ``slot_delay * (1 - jitter) >= crawl_delay``.
    """
    if jitter <= 0 or slot_delay <= 0:
        return max(jitter, 0.0)
    return max(0.0, min(jitter, 1.0 - crawl_delay / slot_delay))


def _halved_gap_fits(slot_delay: float, crawl_delay: float) -> bool:
    """Before Scrapy 2.19 a slot's delay is varied by +/-50 % or not at all: whether
    the shortest such gap is still the Crawl-delay (else randomising is turned off)."""
    return _bounded_jitter(slot_delay, 0.5, crawl_delay) >= 0.5


def _hold_slot_to(slot: Any, crawl_delay: float) -> None:
    """Raise the slot delay to the Crawl-delay and bound its jitter (see above)."""
    if slot.delay < crawl_delay:
        slot.delay = crawl_delay
    if hasattr(slot, "jitter"):  # Scrapy 2.19+ (randomize_delay is then deprecated)
        if slot.jitter:
            slot.jitter = _bounded_jitter(slot.delay, float(slot.jitter), crawl_delay)
    elif getattr(slot, "randomize_delay", False) and not _halved_gap_fits(slot.delay, crawl_delay):
        slot.randomize_delay = False
