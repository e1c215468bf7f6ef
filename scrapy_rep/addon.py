"""``ADDONS = {"scrapy_rep.Addon": 0}``: swap Scrapy's robots.txt middleware for ours."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

# Where Scrapy's own RobotsTxtMiddleware sits in DOWNLOADER_MIDDLEWARES_BASE.
STOCK_PRIORITY = 100
STOCK_PATH = "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware"
OUR_PATH = "scrapy_rep.middleware.RobotsTxtMiddleware"


class Addon:
    """Puts ``scrapy_rep.RobotsTxtMiddleware`` where the stock one was and disables the
    stock one, so robots.txt is never fetched twice. ``ROBOTSTXT_OBEY`` stays the switch."""

    def update_settings(self, settings: BaseSettings) -> None:
        # replace_in_component_priority_dict raises KeyError here: the stock class is
        # in DOWNLOADER_MIDDLEWARES_BASE, not DOWNLOADER_MIDDLEWARES (SCRAPY_NOTES).
        # Disabling it by its import path, the key the base dict uses, works on every
        # supported Scrapy (2.14 ignores a class key set to None for a path key).
        stock, ours = _resolve(STOCK_PATH), _resolve(OUR_PATH)
        middlewares = settings.getdict("DOWNLOADER_MIDDLEWARES")
        for key in list(middlewares):
            if _resolve(key) is stock:
                del middlewares[key]
        middlewares[STOCK_PATH] = None
        if not any(_resolve(key) is ours for key in middlewares):
            # A user who placed our middleware at another priority keeps it there.
            middlewares[OUR_PATH] = STOCK_PRIORITY
        settings.set(
            "DOWNLOADER_MIDDLEWARES",
            middlewares,
            priority=settings.getpriority("DOWNLOADER_MIDDLEWARES") or 0,
        )


def _resolve(key: object) -> object:
    """A component dict key (import path or class) as the class it names."""
    from scrapy.utils.misc import load_object

    return load_object(key) if isinstance(key, str) else key
