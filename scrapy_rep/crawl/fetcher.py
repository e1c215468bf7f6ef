"""Fetching robots.txt: one origin's file through Scrapy's downloader (``RobotsFetcher``),
and the bound on fetches in flight (``FetchQueue``).

Through ``engine.download_async``, so Scrapy's downloader and its middlewares apply as for
any page, with robots.txt's own budget (docs/behaviour.md): redirects followed here up to
``REP_MAX_REDIRECTS`` (RFC 9309 2.3.1.2: "SHOULD follow at least five"), no immediate
retries, the body cut at ``REP_MAX_SIZE`` (RFC 9309 2.5) and decoded here
(crawl/robots_body.py). Scrapy's own stats keys count one per download as its middleware
does; every hop and retry is counted in scrapy-rep's keys.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, StopDownload
from scrapy.http.request import NO_CALLBACK

from scrapy_rep.crawl import compat
from scrapy_rep.crawl.robots_body import accept_encoding, content_codings, decodable, decode
from scrapy_rep.policy.config import Config
from scrapy_rep.policy.origin import robots_url
from scrapy_rep.policy.records import ALLOW_ALL, UNREACHABLE
from scrapy_rep.policy.robots_policy import FetchOutcome, classify_status

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from scrapy_rep.robotstxt._robotstxt import RobotsTxt

logger = logging.getLogger(__name__)

FETCH_META_KEY = "rep_robots_fetch"
_BYTES_META_KEY = "rep_robots_bytes"
# How many body bytes the download may take: set from the response's headers.
_WIRE_CAP_META_KEY = "rep_robots_wire_cap"
# The content codings the response came with, decoded here (taken off its headers).
_CODINGS_META_KEY = "rep_robots_codings"
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Scrapy's size limits away from the download handler: they bound what
# HttpCompressionMiddleware decodes of a response a middleware answered (no signal sees it).
_DECOMPRESSED_FACTOR = 64
# A compressed body may take this many times REP_MAX_SIZE on the wire: incompressible
# bytes grow a few bytes per 16-64 KiB block in every codec, so twice always suffices.
_COMPRESSED_WIRE_FACTOR = 2


class RobotsFetcher:
    """Downloads robots.txt and classifies the outcome."""

    def __init__(
        self,
        crawler: Crawler,
        config: Config,
        clock: Callable[[], float],
        parsed: Callable[[str, bytes, Request], Awaitable[RobotsTxt]] | None = None,
    ) -> None:
        self.crawler = crawler
        assert crawler.stats is not None
        self.stats = crawler.stats
        self.config = config
        self.clock = clock
        self._maxsize = config.max_size * _DECOMPRESSED_FACTOR
        # (origin, body, page request) -> the crawl's parsed copy (Decider.parsed_for),
        # what robots_parsed receivers get, so that their queries parse nothing
        self.parsed = parsed
        # Signals are connected only while a fetch is in flight: bytes_received fires for
        # every chunk of every page.
        self._in_flight = 0
        # Origins whose last fetch ended unreachable (their next fetch is a backoff retry,
        # not in Scrapy's stock keys) -> the page request that started the spell.
        self._retrying: dict[str, Request | None] = {}
        self._refused_warned: set[str] = set()

    def _request(self, url: str, origin: str) -> Request:
        return Request(
            url,
            priority=1000,
            callback=NO_CALLBACK,
            dont_filter=True,
            # Only what _classify can decode, in bounded memory (HttpCompressionMiddleware
            # keeps a header that is already set).
            headers={"Accept-Encoding": accept_encoding()},
            meta={
                "dont_obey_robotstxt": True,
                FETCH_META_KEY: origin,
                "dont_redirect": True,
                "dont_retry": True,
                "dont_cache": True,
                "allow_offsite": True,
                "handle_httpstatus_all": True,
                "download_timeout": self.config.fetch_timeout,
                "download_maxsize": self._maxsize,
                "download_warnsize": self._maxsize,
                "download_fail_on_dataloss": True,
            },
        )

    def _signal_receivers(self) -> tuple[tuple[Callable[..., None], object], ...]:
        return (
            (self._on_reached_downloader, signals.request_reached_downloader),
            (self._on_headers_received, signals.headers_received),
            (self._on_bytes_received, signals.bytes_received),
            (self._on_response_downloaded, signals.response_downloaded),
        )

    def _on_reached_downloader(self, request: Request, **_: Any) -> None:
        if FETCH_META_KEY not in request.meta:
            return
        # RFC 9309 2.5: a file over the limit is parsed up to it, so the handler must not
        # cancel it for its Content-Length (0 = no limit); _on_bytes_received cuts it.
        request.meta["download_maxsize"] = request.meta["download_warnsize"] = 0

    def _on_headers_received(self, headers: Any, request: Request, **_: Any) -> None:
        if FETCH_META_KEY not in request.meta:
            return
        compressed = content_codings(headers.getlist(b"Content-Encoding"))
        factor = _COMPRESSED_WIRE_FACTOR if compressed else 1
        request.meta[_WIRE_CAP_META_KEY] = self.config.max_size * factor

    def _on_bytes_received(self, data: bytes, request: Request, **_: Any) -> None:
        meta = request.meta
        if FETCH_META_KEY not in meta:
            return
        received = meta.get(_BYTES_META_KEY, 0) + len(data)
        meta[_BYTES_META_KEY] = received
        cap = meta.get(_WIRE_CAP_META_KEY, self.config.max_size * _COMPRESSED_WIRE_FACTOR)
        if received > cap:
            # RFC 9309 2.5: a file over the limit is not an error; parse what fits.
            raise StopDownload(fail=False)

    def _on_response_downloaded(self, response: Response, request: Request, **_: Any) -> None:
        meta = request.meta
        if FETCH_META_KEY not in meta:
            return
        meta["download_maxsize"] = meta["download_warnsize"] = self._maxsize
        codings = content_codings(response.headers.getlist(b"Content-Encoding"))
        if decodable(codings):
            # Before the downloader middlewares: without the header HttpCompressionMiddleware
            # passes it on, and _classify decodes it up to REP_MAX_SIZE.
            del response.headers[b"Content-Encoding"]
            meta[_CODINGS_META_KEY] = codings

    async def fetch(self, origin: str, trigger: Request | None = None) -> FetchOutcome:
        """``trigger``: the page request whose evaluation started this fetch, if any
        (robots_parsed sends it, as Scrapy's middleware does)."""
        retry = origin in self._retrying
        trigger = self._retrying.get(origin) or trigger
        signal_manager = self.crawler.signals
        if not self._in_flight:
            for receiver, signal in self._signal_receivers():
                signal_manager.connect(receiver, signal=signal)
        self._in_flight += 1
        try:
            outcome, answered = await self._fetch(origin, retry)
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                for receiver, signal in self._signal_receivers():
                    signal_manager.disconnect(receiver, signal=signal)
        if outcome.kind == UNREACHABLE:
            self._retrying[origin] = trigger
        else:
            self._retrying.pop(origin, None)
            if answered:
                # Answered by the site: robots_parsed, as Scrapy's middleware sends it.
                await compat.send_robots_parsed(
                    self.crawler,
                    outcome.body,
                    trigger or self._request(robots_url(origin), origin),
                    None if self.parsed is None else partial(self.parsed, origin),
                )
        return outcome

    async def _fetch(self, origin: str, retry: bool) -> tuple[FetchOutcome, bool]:
        """The outcome, and whether the site answered it (a final, non-redirect response)."""
        stats = self.stats
        assert self.crawler.engine is not None
        # (a backoff retry is not counted in Scrapy's stock keys)
        stats.inc_value("robotstxt/retry_count" if retry else "robotstxt/request_count")
        url = robots_url(origin)
        seen = {url}
        for hop in range(self.config.max_redirects + 1):
            stats.inc_value("robotstxt/download_count")
            if hop:
                stats.inc_value("robotstxt/redirect_count")
            request = self._request(url, origin)
            try:
                response = await self.crawler.engine.download_async(request)
            except IgnoreRequest as exc:
                return self._refused(origin, url, exc), False
            except Exception as exc:
                # DNS errors, refused connections, timeouts, resets, data loss: RFC 9309
                # 2.3.1.4 calls these unreachable; so does Google. Not allow-all.
                stats.inc_value(f"robotstxt/download_exception_count/{type(exc)}")
                if not retry:
                    stats.inc_value(f"robotstxt/exception_count/{type(exc)}")
                detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                return FetchOutcome(UNREACHABLE, detail[:300], final_url=url), False
            stats.inc_value(f"robotstxt/download_status_count/{response.status}")
            location = response.headers.get(b"Location")
            if response.status in _REDIRECT_STATUSES and location:
                target = urljoin(response.url, location.decode("latin-1").strip())
                if urlsplit(target).scheme not in ("http", "https"):
                    outcome = FetchOutcome(ALLOW_ALL, f"redirect to {target[:100]}", final_url=url)
                    return outcome, False
                if target in seen or hop == self.config.max_redirects:
                    # Google: more than five hops (or a loop) is handled as a 404.
                    reason = "redirect loop" if target in seen else "too many redirects"
                    outcome = FetchOutcome(ALLOW_ALL, reason, status=response.status, final_url=url)
                    return outcome, False
                seen.add(target)
                url = target
                continue
            if not retry:
                # As the stock middleware counts the response its download ended with.
                stats.inc_value("robotstxt/response_count")
                stats.inc_value(f"robotstxt/response_status_count/{response.status}")
            return self._classify(response, request, origin, url), True
        raise AssertionError("unreachable: the last hop returns")

    def _refused(self, origin: str, url: str, exc: IgnoreRequest) -> FetchOutcome:
        """The crawler's own middleware refused the request (docs/behaviour.md): its choice,
        not the site's answer, so allow-all as with Scrapy's middleware, for REP_MIN_TTL
        only (the crawler is asked again), with no status, so no robots_parsed."""
        self.stats.inc_value("robotstxt/fetch_refused")
        if origin not in self._refused_warned:
            self._refused_warned.add(origin)
            logger.warning(
                "the crawler's own downloader middleware refused the robots.txt "
                "request %s (IgnoreRequest: %s): every URL of %s is allowed, as with "
                "Scrapy's RobotsTxtMiddleware",
                url,
                exc,
                origin,
            )
        # max_age 0 is clamped to REP_MIN_TTL: the crawler is asked again soon
        return FetchOutcome(ALLOW_ALL, "refused by the crawler", max_age=0.0, final_url=url)

    def _classify(
        self, response: Response, request: Request, origin: str, url: str
    ) -> FetchOutcome:
        headers = {
            key.decode("latin-1").lower(): value.decode("latin-1")
            for key, value in ((k, response.headers.get(k)) for k in response.headers)
            if value is not None
        }
        body, truncated, coded = self._body(response, request, origin)
        outcome = classify_status(response.status, headers, body, self.clock(), truncated=truncated)
        if truncated:
            self.stats.inc_value("robotstxt/truncated")
            logger.info(
                "robots.txt of %s is larger than REP_MAX_SIZE = %d bytes%s: its "
                "first %d bytes apply (RFC 9309 2.5)",
                origin,
                self.config.max_size,
                f" once decoded from {coded}" if coded else "",
                len(body),
            )
        return replace(outcome, final_url=url)

    def _body(self, response: Response, request: Request, origin: str) -> tuple[bytes, bool, str]:
        """The body to parse, at most REP_MAX_SIZE bytes, whether the file goes on
        beyond it, and the codings it was decoded from."""
        limit = self.config.max_size
        stopped = "download_stopped" in response.flags
        raw = response.body
        codings: list[bytes] = request.meta.get(_CODINGS_META_KEY) or []
        if codings:
            names = ", ".join(c.decode("latin-1") for c in codings)
            decoded = decode(raw, codings, limit, cut=stopped)
            if decoded.error is None:
                return decoded.body, decoded.cut, names
            self.stats.inc_value("robotstxt/decode_error")
            if decoded.body:
                # A stream that breaks part way: what it gave is the file's first part.
                logger.info(
                    "robots.txt of %s breaks off in its %s stream after %d "
                    "decoded bytes (%s): those apply",
                    origin,
                    names,
                    len(decoded.body),
                    decoded.error,
                )
                return decoded.body, True, names
            # Nothing decodes: a plain file labelled compressed; its bytes are the best guess.
            logger.warning(
                "robots.txt of %s says Content-Encoding: %s but does not decode "
                "(%s): its bytes are parsed as they came",
                origin,
                names,
                decoded.error,
            )
        return raw[:limit], stopped or len(raw) > limit, ""


class FetchQueue:
    """A bound on robots.txt fetches in flight (docs/settings.md, ``CONCURRENT_REQUESTS``):
    ``engine.download_async`` bypasses Scrapy's own bound, and a broad crawl would open
    thousands of connections at once. Beyond it, origins wait in FIFO order; a queued fetch
    starts, and only then takes its lease, when a running one ends.

    Draining never recurses: with a shared store a queued fetch often ends inside its own
    ``start()`` (another process holds the lease, or just stored the answer), and a
    ``done()`` there only frees the slot for the running drain loop, not Python's stack.
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(limit, 1)
        self.running = 0
        self.peak = 0
        self._queued: OrderedDict[str, Callable[[], bool]] = OrderedDict()
        self._draining = False

    def __len__(self) -> int:
        return len(self._queued)

    def submit(self, origin: str, start: Callable[[], bool]) -> None:
        """Run ``start()`` now if under the bound, else when a slot frees up; it returns
        True when it started a fetch (which must end with ``done()``), else False."""
        if origin in self._queued:
            return
        self._queued[origin] = start
        self._pump()

    def done(self) -> None:
        self.running -= 1
        self._pump()

    def clear(self) -> None:
        self._queued.clear()

    def _pump(self) -> None:
        if self._draining:
            return  # called from a start() below: the loop there takes the next fetch
        self._draining = True
        try:
            while self._queued and self.running < self.limit:
                _, start = self._queued.popitem(last=False)
                self.running += 1
                self.peak = max(self.peak, self.running)
                try:
                    started = start()
                except BaseException:
                    self.running -= 1
                    raise
                if not started:
                    self.running -= 1
        finally:
            self._draining = False
