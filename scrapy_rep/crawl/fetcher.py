"""Fetch one origin's robots.txt through Scrapy's own downloader.

Going through ``engine.download_async`` means proxies, TLS settings, default headers,
download handlers and downloader middlewares all apply, as for any page. What differs
from a page fetch is the budget (SPEC section 2):
- redirects are followed here, hop by hop, up to ``REP_MAX_REDIRECTS`` (RFC 9309 2.3.1.2:
  "SHOULD follow at least five consecutive redirects"), not by RedirectMiddleware;
- there are no immediate retries (``dont_retry``): the policy's backoff replaces them;
- ``REP_FETCH_TIMEOUT`` is the timeout;
- the body is cut at ``REP_MAX_SIZE`` by a ``bytes_received`` handler (RFC 9309 2.5).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from scrapy import Request, signals
from scrapy.exceptions import StopDownload
from scrapy.http.request import NO_CALLBACK

from scrapy_rep.policy.config import Config
from scrapy_rep.policy.origin import robots_url
from scrapy_rep.policy.records import ALLOW_ALL, UNREACHABLE
from scrapy_rep.policy.robots_policy import FetchOutcome, classify_status

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger("scrapy_rep")

FETCH_META_KEY = "rep_robots_fetch"
_BYTES_META_KEY = "rep_robots_bytes"
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Decompressed bodies may be larger than the wire bytes we cap; this bounds a gzip bomb.
_DECOMPRESSED_FACTOR = 64


class RobotsFetcher:
    """Downloads robots.txt and classifies the outcome; keeps no state between fetches."""

    def __init__(self, crawler: Crawler, config: Config, clock: Callable[[], float]) -> None:
        self.crawler = crawler
        self.config = config
        self.clock = clock
        # The size cap listens to bytes_received only while a robots.txt fetch is in
        # flight: the signal fires for every chunk of every page, and each receiver
        # costs the whole crawl a dispatch per chunk.
        self._in_flight = 0

    def _request(self, url: str, origin: str) -> Request:
        maxsize = self.config.max_size * _DECOMPRESSED_FACTOR
        return Request(
            url,
            priority=1000,
            callback=NO_CALLBACK,
            dont_filter=True,
            meta={
                "dont_obey_robotstxt": True,
                FETCH_META_KEY: origin,
                "dont_redirect": True,
                "dont_retry": True,
                "dont_cache": True,
                "allow_offsite": True,
                "handle_httpstatus_all": True,
                "download_timeout": self.config.fetch_timeout,
                "download_maxsize": maxsize,
                "download_warnsize": maxsize,
                "download_fail_on_dataloss": True,
            },
        )

    def _on_bytes_received(self, data: bytes, request: Request, spider: Any = None) -> None:
        if FETCH_META_KEY not in request.meta:
            return
        received = request.meta.get(_BYTES_META_KEY, 0) + len(data)
        request.meta[_BYTES_META_KEY] = received
        if received > self.config.max_size:
            # RFC 9309 2.5: a file over the limit is not an error; parse what fits.
            raise StopDownload(fail=False)

    async def fetch(self, origin: str) -> FetchOutcome:
        signal_manager = self.crawler.signals
        if not self._in_flight:
            signal_manager.connect(self._on_bytes_received, signal=signals.bytes_received)
        self._in_flight += 1
        try:
            return await self._fetch(origin)
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                signal_manager.disconnect(self._on_bytes_received, signal=signals.bytes_received)

    async def _fetch(self, origin: str) -> FetchOutcome:
        stats = self.crawler.stats
        assert stats is not None
        assert self.crawler.engine is not None
        url = robots_url(origin)
        seen = {url}
        for hop in range(self.config.max_redirects + 1):
            stats.inc_value("robotstxt/request_count")
            try:
                response = await self.crawler.engine.download_async(self._request(url, origin))
            except Exception as exc:
                # DNS errors, refused connections, timeouts, resets, data loss: RFC 9309
                # 2.3.1.4 calls these unreachable; so does Google. Not allow-all.
                stats.inc_value(f"robotstxt/exception_count/{type(exc)}")
                detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                return FetchOutcome(UNREACHABLE, detail[:300], final_url=url)
            stats.inc_value("robotstxt/response_count")
            stats.inc_value(f"robotstxt/response_status_count/{response.status}")
            location = response.headers.get(b"Location")
            if response.status in _REDIRECT_STATUSES and location:
                target = urljoin(response.url, location.decode("latin-1").strip())
                if urlsplit(target).scheme not in ("http", "https"):
                    return FetchOutcome(ALLOW_ALL, f"redirect to {target[:100]}", final_url=url)
                if target in seen or hop == self.config.max_redirects:
                    # Google: more than five hops (or a loop) is handled as a 404.
                    reason = "redirect loop" if target in seen else "too many redirects"
                    return FetchOutcome(ALLOW_ALL, reason, status=response.status, final_url=url)
                seen.add(target)
                url = target
                continue
            return self._classify(response, url)
        raise AssertionError("unreachable: the loop always returns")  # pragma: no cover

    def _classify(self, response: Response, url: str) -> FetchOutcome:
        headers = {
            key.decode("latin-1").lower(): value.decode("latin-1")
            for key, value in ((k, response.headers.get(k)) for k in response.headers)
            if value is not None
        }
        body = response.body
        truncated = "download_stopped" in response.flags or len(body) > self.config.max_size
        outcome = classify_status(
            response.status,
            headers,
            body[: self.config.max_size],
            self.clock(),
            truncated=truncated,
        )
        if truncated:
            assert self.crawler.stats is not None
            self.crawler.stats.inc_value("robotstxt/truncated")
        return replace(outcome, final_url=url)
