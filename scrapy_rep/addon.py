"""``ADDONS = {"scrapy_rep.Addon": 0}``: swap Scrapy's robots.txt middleware for ours."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

# Where Scrapy's own RobotsTxtMiddleware sits in DOWNLOADER_MIDDLEWARES_BASE.
STOCK_PRIORITY = 100


class Addon:
    """Puts ``scrapy_rep.RobotsTxtMiddleware`` where the stock one was and disables the
    stock one, so robots.txt is never fetched twice. ``ROBOTSTXT_OBEY`` stays the switch."""

    def update_settings(self, settings: BaseSettings) -> None:
        from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware as Stock

        from scrapy_rep.middleware import RobotsTxtMiddleware

        # replace_in_component_priority_dict raises KeyError here: the stock class is
        # in DOWNLOADER_MIDDLEWARES_BASE, not DOWNLOADER_MIDDLEWARES (SCRAPY_NOTES).
        settings.set_in_component_priority_dict("DOWNLOADER_MIDDLEWARES", Stock, None)
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", RobotsTxtMiddleware, STOCK_PRIORITY
        )
