"""The spider a cluster worker runs (``scrapy runspider``; not collected by pytest).

``ClusterSpider`` is a scrapy-redis ``RedisSpider``: the scheduler, the dupefilter and
the idle close (``MAX_IDLE_TIME_BEFORE_CLOSE``) are scrapy-redis's own. It is configured
by the ``REP_CLUSTER_CONFIG`` environment variable, a JSON object:

* ``urls``: start URLs; every worker yields them all, and scrapy-redis's shared
  dupefilter lets each in once for the whole cluster,
* ``follow``: follow the ``<a href>`` links of each page,
* ``unenqueueable``: URLs requested with a callback that is not a spider method, which
  scrapy-redis cannot serialise (and so cannot enqueue),
* ``result``: a path; ``closed()`` writes the close reason and the stats there as JSON.

Everything else (the Redis URL, the store, the resolver) comes from ``-s`` options.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, ClassVar

import scrapy
from scrapy.http import Response, TextResponse
from scrapy_redis.spiders import RedisSpider

from tests.support.subprocess_spider import SUBPROCESS_SPIDER_SETTINGS

CONFIG: dict[str, Any] = json.loads(os.environ.get("REP_CLUSTER_CONFIG", "{}"))


def parse_elsewhere(response: Response) -> None:
    """A callback that is not a spider method: scrapy-redis cannot serialise it."""


class ClusterSpider(RedisSpider):
    name = "cluster"
    custom_settings: ClassVar[dict[str, Any]] = {
        **SUBPROCESS_SPIDER_SETTINGS,
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_PERSIST": True,
        "LOGSTATS_INTERVAL": 5,
        # epoch seconds with milliseconds: the workers' logs interleave by time
        "LOG_FORMAT": "%(created).3f [%(name)s] %(levelname)s: %(message)s",
    }

    async def start(self) -> AsyncIterator[Any]:
        for url in CONFIG.get("urls", []):
            yield scrapy.Request(url, callback=self.parse)
        for url in CONFIG.get("unenqueueable", []):
            yield scrapy.Request(url, callback=parse_elsewhere)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[scrapy.Request]:
        if CONFIG.get("follow") and isinstance(response, TextResponse):
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, callback=self.parse)

    def closed(self, reason: str) -> None:
        if "result" not in CONFIG:
            return
        assert self.crawler.stats is not None
        result = {"reason": reason, "stats": self.crawler.stats.get_stats(), "pid": os.getpid()}
        Path(CONFIG["result"]).write_text(json.dumps(result, default=str))
