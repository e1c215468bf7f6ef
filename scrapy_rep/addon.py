"""``ADDONS = {"scrapy_rep.Addon": 0}``: swap Scrapy's robots.txt middleware for ours,
and enable the page-level directives spider middleware beside it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.utils.misc import load_object

from scrapy_rep.crawl.compat import STOCK_PATH, is_stock_middleware

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

# Where Scrapy's own RobotsTxtMiddleware sits in DOWNLOADER_MIDDLEWARES_BASE.
STOCK_PRIORITY = 100
OUR_PATH = "scrapy_rep.middleware.RobotsTxtMiddleware"
# The page-level directives spider middleware (docs/page.md): closest to the spider, so
# it reads what the callback yields before any other spider middleware, and its
# process_spider_input runs after HttpErrorMiddleware has dropped error pages.
PAGE_PATH = "scrapy_rep.page_directives.PageDirectivesMiddleware"
PAGE_PRIORITY = 950


class Addon:
    """Puts ``scrapy_rep.RobotsTxtMiddleware`` where the stock one was and disables the
    stock one and every subclass of it the project enabled, so robots.txt is fetched
    once and only scrapy-rep decides. ``ROBOTSTXT_OBEY`` stays the switch."""

    def update_settings(self, settings: BaseSettings) -> None:
        # Disabled by its import path, the key of DOWNLOADER_MIDDLEWARES_BASE (so
        # replace_in_component_priority_dict raises KeyError; 2.14 ignores a class key).
        ours = _resolve(OUR_PATH)
        middlewares = settings.getdict("DOWNLOADER_MIDDLEWARES")
        for key in list(middlewares):
            if key == STOCK_PATH or not is_stock_middleware(key):
                continue
            if _resolve(key) is _resolve(STOCK_PATH):
                del middlewares[key]  # the stock class by another key: one key is enough
            elif middlewares[key] is not None:
                # A subclass would fetch robots.txt twice and drop by the stock rules.
                middlewares[key] = None
                logger.info(
                    "scrapy-rep add-on: disabled %s (a subclass of Scrapy's "
                    "RobotsTxtMiddleware); scrapy_rep.RobotsTxtMiddleware replaces it",
                    key if isinstance(key, str) else f"{key.__module__}.{key.__qualname__}",
                )
        middlewares[STOCK_PATH] = None
        if not any(_is_subclass(_resolve(key), ours) for key in middlewares):
            # A user who placed our middleware (or a subclass) elsewhere keeps it there.
            middlewares[OUR_PATH] = STOCK_PRIORITY
        _replace(settings, "DOWNLOADER_MIDDLEWARES", middlewares)
        spider_middlewares = settings.getdict("SPIDER_MIDDLEWARES")
        if PAGE_PATH not in spider_middlewares:  # (a user's own placement is kept)
            spider_middlewares[PAGE_PATH] = PAGE_PRIORITY
            _replace(settings, "SPIDER_MIDDLEWARES", spider_middlewares)


def _replace(settings: BaseSettings, name: str, value: dict[Any, Any]) -> None:
    # at the priority it has: Settings.set ignores a value of a lower priority
    settings.set(name, value, priority=settings.getpriority(name) or 0)


def _resolve(key: object) -> object:
    """A component dict key (import path or class) as the class it names."""
    return load_object(key) if isinstance(key, str) else key


def _is_subclass(component: object, base: object) -> bool:
    return isinstance(component, type) and isinstance(base, type) and issubclass(component, base)
