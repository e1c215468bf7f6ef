"""Spiders run by tests in ``scrapy runspider`` subprocesses (not collected by pytest).

``SharedStoreSpider`` is configured by the ``REP_TEST_CONFIG`` environment variable,
a JSON object:

* ``urls``: the pages to request (each gets ``?p=<tag>`` so the server log tells the
  processes apart; ``dont_filter`` so every one is really requested),
* ``tag``: this process's name,
* ``gate_dir``: a directory; the spider writes ``ready-<tag>`` there once its crawl
  has started, and requests nothing until a ``go`` file appears (a start barrier, so
  several processes reach robots.txt at the same moment),
* ``result``: a path; ``closed()`` writes the stats and the downloaded URLs there as
  JSON.

The store (``REP_STORAGE``) and the resolver come from ``-s`` options.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import scrapy
from scrapy.http import Response
from twisted.python.failure import Failure

CONFIG: dict[str, Any] = json.loads(os.environ.get("REP_TEST_CONFIG", "{}"))
GATE_POLL = 0.02

#: What ``scrapy runspider`` runs.
SPIDER_FILE = Path(__file__).resolve()

#: What every crawler subprocess of the suite runs with (here and in
#: ``tests/support/cluster_spider.py``): scrapy-rep through its add-on, no retries (a test
#: counts the requests a server received), nothing that listens or caches.
SUBPROCESS_SPIDER_SETTINGS: dict[str, Any] = {
    "ADDONS": {"scrapy_rep.Addon": 0},
    "ROBOTSTXT_OBEY": True,
    "RETRY_ENABLED": False,
    "TELNETCONSOLE_ENABLED": False,
    "REMOTE_CONTROL_ENABLED": False,
    "COOKIES_ENABLED": False,
    "HTTPCACHE_ENABLED": False,
    "DOWNLOAD_TIMEOUT": 10,
    "LOG_LEVEL": "DEBUG",
}


class SharedStoreSpider(scrapy.Spider):
    name = "shared_store"
    custom_settings: ClassVar[dict[str, Any]] = SUBPROCESS_SPIDER_SETTINGS

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.downloaded: list[str] = []
        self.failed: list[list[str]] = []

    async def start(self) -> AsyncIterator[Any]:
        gate = Path(CONFIG["gate_dir"])
        tag = CONFIG["tag"]
        (gate / f"ready-{tag}").write_text("ready")
        while not (gate / "go").exists():
            await asyncio.sleep(GATE_POLL)
        for url in CONFIG["urls"]:
            yield scrapy.Request(
                f"{url}?p={tag}", callback=self.parse, errback=self.on_error, dont_filter=True
            )

    def parse(self, response: Response) -> None:
        self.downloaded.append(response.url)

    def on_error(self, failure: Failure) -> None:
        request = getattr(failure, "request", None)
        url = request.url if request is not None else ""
        self.failed.append([type(failure.value).__name__, str(failure.value), url])

    def closed(self, reason: str) -> None:
        assert self.crawler.stats is not None
        result = {
            "reason": reason,
            "stats": self.crawler.stats.get_stats(),
            "downloaded": sorted(self.downloaded),
            "failed": sorted(self.failed),
        }
        Path(CONFIG["result"]).write_text(json.dumps(result, default=str))
