"""What Scrapy's own ``RobotsTxtMiddleware`` promises beside the rules (docs/compat.md).

- ``robots_parsed(robotparser, request)`` (Scrapy 2.18+), sent as the stock middleware
  sends it;
- held requests re-enter the scheduler without a second ``request_scheduled``;
- start-up warnings for configuration mistakes: the stock middleware (or a subclass)
  enabled beside scrapy-rep, and a ``ROBOTSTXT_PARSER`` that scrapy-rep does not use.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pydispatch.dispatcher import (  # type: ignore[import-untyped]  # (Scrapy's own dependency)
    getAllReceivers,
    liveReceivers,
)
from scrapy import signals

from scrapy_rep.crawl.parser_plugin import RobotParser, max_size_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

    from scrapy_rep.robotstxt._robotstxt import RobotsTxt

logger = logging.getLogger("scrapy_rep")

STOCK_PATH = "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware"
OUR_PARSER_PATH = "scrapy_rep.RobotParser"


# -- robots_parsed ---------------------------------------------------------------------


async def send_robots_parsed(
    crawler: Crawler,
    body: bytes,
    request: Request,
    parsed: Callable[[bytes, Request], Awaitable[RobotsTxt]] | None = None,
) -> None:
    """Send ``robots_parsed`` for one fetched robots.txt, with the page request that
    triggered the fetch, as ``scrapy.downloadermiddlewares.robotstxt`` does (2.18+).

    ``body`` is what scrapy-rep applies: the (size-capped) file for a 2xx, empty for an
    answer that allows all (4xx), so the parser agrees with the crawl's verdicts.
    When someone listens, the parser carries the copy *parsed* gives (the one the
    crawl's own checks use, a large file parsed in bounded steps), not a second parse
    on the reactor at the receiver's first query.
    """
    signal = getattr(signals, "robots_parsed", None)
    if signal is None:  # Scrapy before 2.18 has no such signal
        return
    robots = None
    if parsed is not None and _has_receivers(crawler, signal):
        try:
            robots = await parsed(body, request)
        except Exception:  # never lose the origin's requests over it: parse on use
            logger.exception("scrapy-rep: could not prepare robots.txt for robots_parsed")
    parser = RobotParser(body, max_size_of(crawler), robots)
    await crawler.signals.send_catch_log_async(signal=signal, robotparser=parser, request=request)


def _has_receivers(crawler: Crawler, signal: object) -> bool:
    # (as scrapy.utils.signal finds the receivers it calls)
    receivers = getAllReceivers(crawler.signals.sender, signal)
    return any(True for _ in liveReceivers(receivers))


# -- request_scheduled once per request -----------------------------------------------


def reschedule(engine: Any, request: Request) -> None:
    """Put a released request into the scheduler without sending ``request_scheduled``.

    The request was announced once already, when the spider scheduled it and scrapy-rep
    held it back (``engine.crawl`` would announce it a second time, and an extension
    counting the signal would count it twice). Every ``request_scheduled`` receiver
    (OffsiteMiddleware among them) saw it then. The rest is what
    ``ExecutionEngine._schedule_request`` does after the signal: the scheduler (and its
    dupefilter, which has not seen this request yet) and ``request_dropped`` if refused.
    """
    slot = engine._slot
    if not slot.scheduler.enqueue_request(request):
        engine.signals.send_catch_log(
            signals.request_dropped, request=request, spider=engine.spider
        )
    slot.nextcall.schedule()


# -- configuration mistakes -----------------------------------------------------------


def _load(key: object) -> object:
    from scrapy.utils.misc import load_object

    try:
        return load_object(key) if isinstance(key, str) else key
    except Exception:  # Scrapy itself reports a path it cannot load
        return None


def is_stock_middleware(key: object) -> bool:
    """Whether a component key names Scrapy's RobotsTxtMiddleware or a subclass of it."""
    from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware as Stock

    component = _load(key)
    return isinstance(component, type) and issubclass(component, Stock)


def stock_middlewares_enabled(settings: BaseSettings) -> list[str]:
    """The enabled downloader middlewares that are the stock one or a subclass of it."""
    from scrapy.utils.conf import build_component_list

    enabled = build_component_list(settings.getwithbase("DOWNLOADER_MIDDLEWARES"))
    return [_name(key) for key in enabled if is_stock_middleware(key)]


def _name(key: object) -> str:
    if isinstance(key, type):
        return f"{key.__module__}.{key.__qualname__}"
    return str(key)


def foreign_parser(settings: BaseSettings) -> str | None:
    """``ROBOTSTXT_PARSER`` when the project set it to a parser other than ours."""
    from scrapy.settings import SETTINGS_PRIORITIES

    if settings.getpriority("ROBOTSTXT_PARSER") in (None, SETTINGS_PRIORITIES["default"]):
        return None  # Scrapy's default (Protego), not a choice of the project
    value = settings.get("ROBOTSTXT_PARSER")
    if not value or _load(value) is RobotParser:
        return None
    return _name(value)


def check_configuration(crawler: Crawler) -> None:
    """Log one WARNING per configuration mistake, once, at start-up."""
    settings = crawler.settings
    stock = stock_middlewares_enabled(settings)
    if stock:
        logger.warning(
            "scrapy-rep: %s is enabled beside scrapy_rep.RobotsTxtMiddleware: robots.txt "
            "is fetched twice and Scrapy's middleware drops requests by its own rules. "
            "Enable scrapy-rep with ADDONS = {'scrapy_rep.Addon': 0} (it disables the "
            "stock middleware and its subclasses), or set %s to None in "
            "DOWNLOADER_MIDDLEWARES.",
            " and ".join(stock),
            " and ".join(stock),
        )
    parser = foreign_parser(settings)
    if parser is not None:
        logger.warning(
            "scrapy-rep: ROBOTSTXT_PARSER = %r is ignored: scrapy-rep matches with its own "
            "RFC 9309 engine (explain(), Crawl-delay, the stored copy and 'scrapy robots' "
            "all need it). Remove the setting, or set it to 'scrapy_rep.RobotParser'.",
            parser,
        )


# -- the spider's own selector ----------------------------------------------------------


def cached_selector(response: object) -> Any:
    """The Selector that ``response.selector`` already built, or None.

    Why private: TextResponse keeps it in ``_cached_selector`` and has no public way to
    ask whether it exists; ``response.selector`` would build one (a full lxml parse of
    the page), the cost the page-level directives must not add (docs/page.md).
    """
    return getattr(response, "_cached_selector", None)
