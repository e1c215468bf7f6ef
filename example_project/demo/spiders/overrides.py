"""Spider-level product token overrides, both ways scrapy-rep reads them."""

from __future__ import annotations

from typing import Any, ClassVar

from demo.spiders._base import RULES_PAGES, DemoSpider


class NightOwlSpider(DemoSpider):
    """The spider attribute: robots.txt groups for ``NightOwl`` apply to this spider only.
    (The User-Agent header it sends stays the project's DemoBot/1.0.)"""

    name = "nightowl"
    robotstxt_user_agent = "NightOwl"
    pages: ClassVar[dict[str, list[str]]] = {"rules": RULES_PAGES}


class ArchiveSpider(DemoSpider):
    """``custom_settings``: ROBOTSTXT_USER_AGENT set for this spider's crawl only."""

    name = "archive"
    custom_settings: ClassVar[dict[str, Any]] = {"ROBOTSTXT_USER_AGENT": "ArchiveBot"}
    pages: ClassVar[dict[str, list[str]]] = {"rules": RULES_PAGES}
