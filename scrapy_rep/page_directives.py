"""``PageDirectivesMiddleware``: the robots meta tag, ``X-Robots-Tag`` and rel=nofollow in a crawl.

robots.txt decides what is fetched; page-level directives decide what a fetched page's
links and content may be used for (docs/page.md, ``REP_PAGE_MODE``).
"""

from __future__ import annotations

import logging
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import NotConfigured
from scrapy.http import HtmlResponse
from scrapy.utils.response import get_base_url
from w3lib.url import safe_url_string

from scrapy_rep.crawl import compat
from scrapy_rep.crawl.product_token import ProductTokens
from scrapy_rep.crawl.record import NullRecorder, recorder_for
from scrapy_rep.crawl.report import log_page_directives
from scrapy_rep.crawl.stepping import run_steps
from scrapy_rep.crawl.usage import decided_token, header_lines
from scrapy_rep.policy.config import Config, SettingError
from scrapy_rep.policy.origin import origin_of_memo
from scrapy_rep.robotstxt._page import NofollowLinks, PageDirectives, head_may_name, page_directives

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Generator, Iterable, Iterator

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

__all__ = ["META_KEY", "ActingPageDirectivesMiddleware", "PageDirectivesMiddleware"]

logger = logging.getLogger(__name__)

META_KEY = "rep_page"
# Directives counted by name in the stats; any other name counts as "other", so that a
# site cannot grow the stats with made-up names.
KNOWN = frozenset({
    "all", "index", "follow", "noindex", "nofollow", "none", "noarchive", "nocache",
    "nosnippet", "noimageindex", "notranslate", "indexifembedded", "max-snippet",
    "max-image-preview", "max-video-preview", "unavailable_after", "noai", "noimageai",
})  # fmt: skip
# Why a request or an item is dropped (or would be): the stats key's last part.
NOFOLLOW_PAGE = "request_nofollow"
REL_NOFOLLOW = "request_rel_nofollow"
NOINDEX_PAGE = "item_noindex"
_X_ROBOTS_TAG = b"X-Robots-Tag"  # (as Headers.normkey spells it: title case)


class PageDirectivesMiddleware:
    """Reads page-level directives on every response; drops what they forbid on request."""

    def __init__(
        self, crawler: Crawler, config: Config, tokens: ProductTokens, recorder: NullRecorder
    ) -> None:
        self.mode = config.page_mode
        self.tokens = tokens
        self.recorder = recorder
        assert crawler.stats is not None
        self.stats = crawler.stats
        # origin -> counts of pages and drops, for the closing summary
        self.per_origin: dict[str, dict[str, int]] = {}
        # (audit, enforce) pages with directives whose record line waits for their
        # output's drops (taken by the output check, or by process_spider_exception)
        self._unrecorded: weakref.WeakKeyDictionary[Response, dict[str, Any]] = (
            weakref.WeakKeyDictionary()
        )
        crawler.signals.connect(self._on_spider_closed, signal=signals.spider_closed)
        logger.info(
            "page-level directives (robots meta tag, X-Robots-Tag): %s",
            {
                "record": "recorded (REP_PAGE_MODE = 'record')",
                "audit": "recorded, what enforce would drop counted (REP_PAGE_MODE = 'audit')",
                "enforce": "nofollow and noindex obeyed (REP_PAGE_MODE = 'enforce')",
            }[self.mode],
        )

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PageDirectivesMiddleware:
        try:
            config = Config.from_settings(crawler.settings)
            if not config.obey or config.page_mode == "off":
                raise NotConfigured
            # the same recorder (and file) as the robots.txt middleware's
            recorder = recorder_for(crawler, config, config.clock or time.time)
        except SettingError as exc:
            logger.error("the crawl cannot start: %s", exc)
            raise
        middleware = cls if config.page_mode == "record" else ActingPageDirectivesMiddleware
        return middleware(crawler, config, ProductTokens(config, crawler), recorder)

    def process_spider_input(self, response: Response, spider: Spider | None = None) -> None:
        request = response.request
        if request is None or response.meta.get("dont_obey_robotstxt"):
            return
        lines = header_lines(response.headers, _X_ROBOTS_TAG)
        is_html = isinstance(response, HtmlResponse)
        token = decided_token(request, self.tokens.token_for)
        if not lines and not (is_html and head_may_name(response.body, token)):
            doc = _empty_doc(response.url, token)  # nearly every page: nothing can name us
        else:
            meta_tags = None
            selector = compat.cached_selector(response) if is_html else None
            if selector is not None:  # the spider's parse: the tags, without a second look
                meta_tags = [
                    (tag.attrib.get("name", ""), tag.attrib.get("content", ""))
                    for tag in selector.xpath("//head/meta[@name]")
                ]
            found = page_directives(
                lines, response.body if is_html else None, token, meta_tags=meta_tags
            )
            doc = {**found.to_json(), "url": response.url, "product_token": token}
            self._count_page(found, response.url)
        response.meta[META_KEY] = doc
        self._read(response, doc)

    def _read(self, response: Response, doc: dict[str, Any]) -> None:
        # in ``record`` mode a page's record line is complete once it is read
        if doc["directives"]:
            self.record_page(doc)

    def record_page(
        self, doc: dict[str, Any], dropped_requests: int = 0, dropped_items: int = 0
    ) -> None:
        """The page's one ``P`` line in the compliance record (docs/record.md)."""
        self.recorder.page(
            doc["url"], doc["product_token"], doc["sources"], dropped_requests, dropped_items
        )

    def _count_page(self, found: PageDirectives, url: str) -> None:
        inc = self.stats.inc_value
        for name in found.effective():
            inc(f"rep/page/directive/{name if name in KNOWN else 'other'}")
        if found.issues:
            inc("rep/page/issues", len(found.issues))
        if found.noindex or found.nofollow:
            counts = self.origin_counts(url)
            counts["noindex"] += found.noindex
            counts["nofollow"] += found.nofollow

    def origin_counts(self, url: str) -> dict[str, int]:
        fresh = dict.fromkeys(("noindex", "nofollow", "requests", "items"), 0)
        return self.per_origin.setdefault(origin_of_memo(url) or url, fresh)

    def _on_spider_closed(self, spider: Spider, reason: str) -> None:
        log_page_directives(self.per_origin, mode=self.mode)


class ActingPageDirectivesMiddleware(PageDirectivesMiddleware):
    """``audit`` and ``enforce``: also checks what each page's callback yields (in
    ``record`` mode there are no output hooks, so Scrapy adds no step to any output)."""

    def _read(self, response: Response, doc: dict[str, Any]) -> None:
        if not _output_checked(response, doc):
            super()._read(response, doc)  # nothing can be dropped: its line is complete
        elif doc["directives"]:
            self._unrecorded[response] = doc

    def process_spider_exception(
        self, response: Response, exception: Exception, spider: Spider | None = None
    ) -> None:
        """The callback failed before its output reached the check: the page's line now."""
        doc = self._unrecorded.pop(response, None)
        if doc is not None:
            self.record_page(doc)

    def _page_state(self, response: Response) -> _PageOutput | None:
        """What to check in this response's output, or None when nothing can be dropped."""
        doc = response.meta.get(META_KEY)
        if response.meta.get("dont_obey_robotstxt") or not isinstance(doc, dict):
            return None
        if doc.get("url") != response.url or not _output_checked(response, doc):
            return None
        links = None
        if isinstance(response, HtmlResponse) and not doc["nofollow"]:
            # read only when the callback yields a request (and then in steps); a link's
            # URL spelled as a Request built from it spells it (Request escapes its URL)
            links = NofollowLinks(response.body, get_base_url(response), normalise=safe_url_string)
        writes_line = self._unrecorded.pop(response, None) is not None
        return _PageOutput(self, response, doc, links, writes_line)

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Spider | None = None
    ) -> Iterable[Any]:
        state = self._page_state(response)
        return result if state is None else self._checked(state, result)

    def _checked(self, state: _PageOutput, result: Iterable[Any]) -> Iterator[Any]:
        try:
            for output in result:
                if state.keep(output):
                    yield output
        finally:
            state.close()

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Spider | None = None
    ) -> AsyncIterator[Any]:
        state = self._page_state(response)
        if state is None:
            async for output in result:
                yield output
            return
        try:
            async for output in result:
                if isinstance(output, Request) and state.links is not None and not state.links.done:
                    # A 10 MB page's links: read in steps, the reactor serving others between.
                    await run_steps(_steps(state.links))
                if state.keep(output):
                    yield output
        finally:
            state.close()


@dataclass(slots=True)
class _PageOutput:
    """One page's callback output, checked against its directives; one DEBUG line at close."""

    middleware: PageDirectivesMiddleware
    response: Response
    doc: dict[str, Any]
    links: NofollowLinks | None
    writes_line: bool  # the page has directives: its line, at close
    dropped: dict[str, int] = field(default_factory=dict)

    def keep(self, output: Any) -> bool:
        if isinstance(output, Request):
            if output.meta.get("dont_obey_robotstxt"):
                return True
            if self.doc["nofollow"]:
                return self._drop(NOFOLLOW_PAGE)
            # (read in steps by the async path; a sync callback, as before Scrapy 2.15, reads
            # them here in one go)
            if self.links is not None and self.links.scan().nofollow_only(output.url):
                return self._drop(REL_NOFOLLOW)
            return True
        if self.doc["noindex"]:
            return self._drop(NOINDEX_PAGE)
        return True

    def _drop(self, cause: str) -> bool:
        self.dropped[cause] = self.dropped.get(cause, 0) + 1
        return self.middleware.mode != "enforce"

    def close(self) -> None:
        middleware, dropped = self.middleware, self.dropped
        requests = dropped.get(NOFOLLOW_PAGE, 0) + dropped.get(REL_NOFOLLOW, 0)
        items = dropped.get(NOINDEX_PAGE, 0)
        if self.writes_line or dropped:
            # (in audit mode, what would be dropped: the record's header says the mode)
            middleware.record_page(self.doc, requests, items)
        if not dropped:
            return
        enforce = middleware.mode == "enforce"
        prefix = "rep/page/dropped/" if enforce else "rep/page/audit/would_drop/"
        for cause, count in dropped.items():
            middleware.stats.inc_value(prefix + cause, count)
        counts = middleware.origin_counts(self.response.url)
        counts["requests"] += requests
        counts["items"] += items
        logger.debug(
            "%s from %s: %s",
            "Dropped, page-level directives" if enforce else "Would be dropped (audit mode)",
            self.response,
            "; ".join(self._reasons()),
        )

    def _reasons(self) -> Iterator[str]:
        sources = self.doc["sources"]
        for cause, count in sorted(self.dropped.items()):
            if cause == REL_NOFOLLOW:
                yield f'{count} requests for URLs linked only with rel="nofollow"'
                continue
            name = "nofollow" if cause == NOFOLLOW_PAGE else "noindex"
            what = "requests" if cause == NOFOLLOW_PAGE else "items"
            why = [
                s["text"] if s["from"] == "meta" else f"X-Robots-Tag: {s['text']}"
                for key in (name, "none") + (("unavailable_after",) if name == "noindex" else ())
                for s in sources.get(key, ())
            ]
            yield f"{count} {what}, the page is {name} ({', '.join(why)})"


def _output_checked(response: Response, doc: dict[str, Any]) -> bool:
    """Whether audit and enforce check what this page's callback yields: an HTML page
    (its rel=nofollow links), or any page that is nofollow or noindex."""
    return isinstance(response, HtmlResponse) or doc["nofollow"] or doc["noindex"]


def _empty_doc(url: str, token: str) -> dict[str, Any]:
    """``page_directives`` of a page with no directive, built without parsing."""
    return {
        "directives": [],
        "noindex": False,
        "nofollow": False,
        "sources": {},
        "values": {},
        "unavailable_after": None,
        "ignored": [],
        "issues": [],
        "url": url,
        "product_token": token,
    }


def _steps(links: NofollowLinks) -> Generator[None, None, None]:
    while not links.scan_step():
        yield
