"""What the demo spiders share: the demo site's origins and its pages."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, ClassVar

import scrapy
from scrapy.http import Response

# Next to scrapy.cfg; where `demo_site.py --write` puts it when run by hand.
DEFAULT_SITE_FILE = Path(__file__).resolve().parents[2] / ".demo_site.json"

# The pages of the "rules" origin. Every spider asks for all of them, each with its own
# product token, so the verdicts can be compared side by side.
RULES_PAGES = [
    "/",
    "/public/news.html",
    "/drafts/plan.html",
    "/private/report.html",
    "/shop/cart.html",
]


class DemoSpider(scrapy.Spider):
    """Crawls ``pages`` ({role: [path, ...]}) of the demo site.

    The site's origins (one port each) come from the JSON that ``demo_site.py`` writes:
    ``-a site=FILE``, else ``$DEMO_SITE``, else ``.demo_site.json`` next to scrapy.cfg.
    """

    pages: ClassVar[dict[str, list[str]]] = {}

    def __init__(self, *args: Any, site: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        path = Path(site or os.environ.get("DEMO_SITE") or DEFAULT_SITE_FILE)
        if not path.is_file():
            raise ValueError(
                f"no demo site description at {path}: run `python run_demo.py`, or start "
                "`python demo_site.py --write .demo_site.json` and pass -a site=.demo_site.json"
            )
        self.origins: dict[str, str] = json.loads(path.read_text("utf-8"))["origins"]

    def page(self, role: str, path: str, **kwargs: Any) -> scrapy.Request:
        return scrapy.Request(self.origins[role] + path, callback=self.parse, **kwargs)

    async def start(self) -> AsyncIterator[scrapy.Request]:
        for role, paths in self.pages.items():
            for path in paths:
                yield self.page(role, path)

    def parse(self, response: Response) -> Iterator[dict[str, Any]]:
        yield {"url": response.url, "title": response.css("title::text").get()}
