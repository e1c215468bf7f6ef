"""``tour``: every origin of the demo site, with the project-wide product token."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import ClassVar

import scrapy

from demo.spiders._base import RULES_PAGES, DemoSpider


class TourSpider(DemoSpider):
    """No override: robots.txt is matched as ``ROBOTSTXT_USER_AGENT`` (settings.py), except
    for one request that names its own token in ``meta``."""

    name = "tour"
    pages: ClassVar[dict[str, list[str]]] = {
        "rules": RULES_PAGES,
        # 404 robots.txt: everything is allowed, /private/ included.
        "missing": ["/", "/about.html", "/private/anything.html"],
        # 503 then 200: these wait for the retry, then the rules apply (/tmp/ dropped).
        "flaky": ["/", "/status.html", "/tmp/scratch.html"],
        # robots.txt reached through two redirects via the cdn port; it disallows /old/.
        "redirect": ["/", "/old/page.html", "/new/page.html"],
        # Crawl-delay: 1, so these three are spaced at least a second apart.
        "delay": ["/", "/a.html", "/b.html"],
        # robots.txt takes 2 s: these wait, the other origins do not wait for them.
        "slow": ["/", "/admin/login.html"],
    }

    async def start(self) -> AsyncIterator[scrapy.Request]:
        async for request in super().start():
            yield request
        # Per-request override: the same URL as above, judged as PressBot, whose group
        # allows it. dont_filter, or the duplicate filter would drop the second copy.
        yield self.page(
            "rules",
            "/private/report.html",
            meta={"robotstxt_user_agent": "PressBot"},
            dont_filter=True,
        )
