"""What the real-crawl storage tests share: settings, a gated spider, a store fixture."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import defer

from tests.support.crawl import ListSpider
from tests.support.redis_server import RedisServer

#: scrapy-rep enabled (the store is each test's ``REP_STORAGE``), short retry backoffs.
REP: dict[str, Any] = {
    "ADDONS": {"scrapy_rep.Addon": 0},
    "RETRY_ENABLED": False,
    "REP_RETRY_BACKOFF": 0.2,
    "REP_MAX_RETRY_BACKOFF": 0.5,
    "REP_FETCH_TIMEOUT": 3,
}


class GatedSpider(ListSpider):
    """Yields ``phases`` (lists of URLs) one after another; before each later phase it
    waits for the matching Deferred of ``gates``, which the test fires. Appends itself
    to ``probe`` so the test can read its crawler's stats while it runs."""

    name = "gated"

    def __init__(
        self,
        phases: list[list[str]],
        gates: list[defer.Deferred[None]],
        probe: list[GatedSpider],
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.phases = phases
        self.gates = gates
        probe.append(self)

    def stat(self, key: str) -> Any:
        assert self.crawler.stats is not None
        return self.crawler.stats.get_value(key, 0)

    async def start(self) -> AsyncIterator[Any]:
        for index, phase in enumerate(self.phases):
            if index:
                await maybe_deferred_to_future(self.gates[index - 1])
            for url in phase:
                yield self.request_for(url)

    def request_for(self, url: str) -> Any:
        from scrapy import Request

        return Request(url, callback=self.parse, errback=self.on_error)


def warnings_of(crawler: Any) -> list[str]:
    return crawler.messages(logging.WARNING, logger="scrapy_rep")


@pytest.fixture(params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A ``REP_STORAGE`` value: a fresh SQLite file, or the session's redis-server
    (every test uses fresh hostnames, so its keys are its own).

    A test module using it must also provide the ``redis_server`` fixture."""
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'store.db'}"
    server: RedisServer = request.getfixturevalue("redis_server")
    return server.url
