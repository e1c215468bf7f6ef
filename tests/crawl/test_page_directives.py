"""Page-level directives in real crawls: robots meta tags, X-Robots-Tag, rel=nofollow.

One local site mixes meta tags (in the head, in the body, for us and for another
crawler), X-Robots-Tag lines (token-less, for our token, for another), rel=nofollow
links, a redirect whose hop says nofollow but whose final page says noindex, a PDF
with a header, an expired unavailable_after, and a request exempted with
dont_obey_robotstxt. Every mode crawls it; the tests assert on what the server
received, what reached the callbacks and the item pipeline, and the stats.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import pytest_twisted
from scrapy import Request, Spider
from scrapy.http import HtmlResponse, Response
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

from scrapy_rep.policy.config import Config, SettingError
from tests.support.crawl import ListSpider

TOKEN = "PageBot"
REP: dict[str, Any] = {
    "ADDONS": {"scrapy_rep.Addon": 0},
    "REP_STORAGE": "memory",
    "RETRY_ENABLED": False,
    "ROBOTSTXT_USER_AGENT": TOKEN,
    "ITEM_PIPELINES": {"tests.crawl.test_page_directives.CollectItems": 100},
}

# path -> (page spec, what it links to)
PAGES: dict[str, dict[str, Any]] = {
    "/meta-nofollow": {"meta": [["robots", "nofollow"]], "links": ["/from-meta-nofollow"]},
    "/meta-noindex": {"meta": [[TOKEN, "NoIndex"]], "links": ["/from-meta-noindex"]},
    "/other-bot": {
        "meta": [["otherbot", "noindex, nofollow"]],
        "header_lines": [["X-Robots-Tag", "otherbot: noindex, nofollow"]],
        "links": ["/from-other-bot"],
    },
    "/header-nofollow": {
        "header_lines": [["X-Robots-Tag", "noarchive"], ["X-Robots-Tag", "pagebot: nofollow"]],
        "links": ["/from-header-nofollow"],
    },
    "/header-none": {"header_lines": [["X-Robots-Tag", "none"]], "links": ["/from-header-none"]},
    "/body-meta": {"body_meta": [["robots", "noindex, nofollow"]], "links": ["/from-body-meta"]},
    "/rel": {
        "rel_links": [["/rel-only", "nofollow"], ["/rel-both", "ugc nofollow"]],
        "links": ["/rel-both", "/plain-linked"],
    },
    "/redirect": {
        "redirect": "/redirected",
        "header_lines": [["X-Robots-Tag", "nofollow"]],  # the hop's: not the final page's
    },
    "/redirected": {"meta": [["robots", "noindex"]], "links": ["/from-redirected"]},
    "/doc.pdf": {
        "body": "%PDF-1.4 not really",
        "content_type": "application/pdf",
        "header_lines": [["X-Robots-Tag", "noindex"]],
    },
    "/expired": {
        "header_lines": [["X-Robots-Tag", "unavailable_after: 25 Jun 2010 15:00:00 PST"]],
        "links": ["/from-expired"],
    },
    "/exempt": {"meta": [["robots", "none"]], "links": ["/from-exempt"]},
}
START_LINKS = [p for p in PAGES if p not in ("/redirected", "/exempt")]
EVERY_PATH = {
    "/",
    *PAGES,
    "/from-meta-nofollow",
    "/from-meta-noindex",
    "/from-other-bot",
    "/from-header-nofollow",
    "/from-header-none",
    "/from-body-meta",
    "/rel-only",
    "/rel-both",
    "/plain-linked",
    "/from-redirected",
    "/from-expired",
    "/from-exempt",
}
# what enforce does not follow: from nofollow pages, and the URL linked only with nofollow
NOT_FOLLOWED = {
    "/from-meta-nofollow",
    "/from-header-nofollow",
    "/from-header-none",
    "/rel-only",
}
# pages whose items enforce drops: noindex, none, an expired date, the PDF's header
NOINDEX = {"/meta-noindex", "/header-none", "/redirected", "/doc.pdf", "/expired"}


class CollectItems:
    """An item pipeline that keeps every item it gets on the spider."""

    def process_item(self, item: Any, spider: Spider | None = None) -> Any:
        self.items.append(item)
        return item

    def open_spider(self, spider: Spider | None = None) -> None:
        self.items: list[Any] = []
        COLLECTED.append(self.items)


COLLECTED: list[list[Any]] = []


class PageSpider(ListSpider):
    """Yields an item per response and follows every link (response.follow)."""

    def parse(self, response: Response, **kwargs: Any) -> Any:
        self.responses.append(response)
        yield {"url": response.url}
        if isinstance(response, HtmlResponse):
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, callback=self.parse, errback=self.on_error)


class AsyncPageSpider(PageSpider):
    """The same, as an async callback that yields plain Requests."""

    async def parse(self, response: Response, **kwargs: Any) -> Any:  # type: ignore[override]
        self.responses.append(response)
        yield {"url": response.url}
        if isinstance(response, HtmlResponse):
            for href in response.css("a::attr(href)").getall():
                yield Request(response.urljoin(href), callback=self.parse, errback=self.on_error)


def _site(mockserver: Any, prefix: str) -> str:
    host = mockserver.unique_host(prefix)
    mockserver.configure(
        host,
        {
            "robots": {"status": 404},
            "pages": {"/": {"links": START_LINKS}, **PAGES},
            "default": {},
        },
    )
    return host


def _start(mockserver: Any, host: str) -> list[Request]:
    return [
        Request(mockserver.url(host, "/")),
        Request(mockserver.url(host, "/exempt"), meta={"dont_obey_robotstxt": True}),
    ]


def _received(mockserver: Any, host: str) -> set[str]:
    return {p for p in mockserver.paths(host) if p != "/robots.txt"}


def _path(url: str) -> str:
    return "/" + url.split(".test:", 1)[1].split("/", 1)[1]


def _items(host: str) -> set[str]:
    (items,) = COLLECTED[-1:]
    return {_path(item["url"]) for item in items if host in item["url"]}


async def _crawl(
    run_crawl: Any, mockserver: Any, mode: str | None, spider_cls: type[Spider] = PageSpider
) -> tuple[Any, str]:
    host = _site(mockserver, f"page-{mode or 'default'}")
    settings = dict(REP) if mode is None else {**REP, "REP_PAGE_MODE": mode}
    crawler = await run_crawl(_start(mockserver, host), settings=settings, spider_cls=spider_cls)
    return crawler, host


def _pages(crawler: Any) -> dict[str, dict[str, Any]]:
    return {_path(r.url): r.meta.get("rep_page") for r in crawler.spider.responses}


@pytest_twisted.ensureDeferred
async def test_record_mode_drops_nothing_and_records_directives(mockserver, run_crawl):
    crawler, host = await _crawl(run_crawl, mockserver, None)

    assert _received(mockserver, host) == EVERY_PATH
    assert _items(host) == EVERY_PATH - {"/redirect"}  # (the redirect's final page)
    pages = _pages(crawler)
    assert pages["/meta-nofollow"]["directives"] == ["nofollow"]
    assert pages["/meta-nofollow"]["sources"]["nofollow"] == [
        {"from": "meta", "scope": "robots", "text": '<meta name="robots" content="nofollow">'}
    ]
    assert pages["/meta-noindex"]["noindex"] and pages["/meta-noindex"]["product_token"] == TOKEN
    other = pages["/other-bot"]
    assert other["directives"] == [] and other["ignored"] == [
        {"from": "header", "scope": "otherbot", "text": "otherbot: noindex, nofollow"}
    ]
    assert pages["/header-nofollow"]["directives"] == ["noarchive", "nofollow"]
    assert pages["/header-nofollow"]["sources"]["nofollow"] == [
        {"from": "header", "scope": "pagebot", "text": "pagebot: nofollow"}
    ]
    assert pages["/header-none"]["directives"] == ["nofollow", "noindex", "none"]
    assert pages["/body-meta"]["directives"] == []  # a meta tag in the body is not read
    assert pages["/redirected"]["directives"] == ["noindex"]  # the hop's nofollow is not
    assert pages["/doc.pdf"]["directives"] == ["noindex"]
    assert pages["/expired"]["noindex"] and pages["/expired"]["unavailable_after"].startswith(
        "2010-06-25T23:00:00"
    )
    assert "rep_page" not in (pages["/exempt"] or {})  # exempt: not even read
    assert pages["/from-meta-noindex"]["directives"] == []

    assert crawler.stat("rep/page/directive/nofollow") == 3  # meta, header, none
    assert crawler.stat("rep/page/directive/noindex") == 5
    assert crawler.stat("rep/page/directive/none") == 1
    assert crawler.stat("rep/page/directive/noarchive") == 1
    assert crawler.stat("rep/page/directive/unavailable_after") == 1
    (summary,) = [
        m for m in crawler.messages(logging.INFO) if "page-level directives (REP_PAGE_MODE" in m
    ]
    assert f"{mockserver.origin(host)}: pages noindex 5, nofollow 3" in summary
    assert "dropped" not in summary
    assert not [k for k in crawler.stats.get_stats() if "dropped" in k and "rep/page" in k]


@pytest_twisted.ensureDeferred
async def test_enforce_drops_requests_from_nofollow_and_items_from_noindex(mockserver, run_crawl):
    crawler, host = await _crawl(run_crawl, mockserver, "enforce")

    assert _received(mockserver, host) == EVERY_PATH - NOT_FOLLOWED
    callbacks = {_path(u) for u in crawler.spider.response_urls}
    assert callbacks == EVERY_PATH - NOT_FOLLOWED - {"/redirect"}  # callbacks still run
    assert _items(host) == callbacks - NOINDEX
    assert "/exempt" in _items(host) and "/from-exempt" in callbacks

    assert crawler.stat("rep/page/dropped/request_nofollow") == 3
    assert crawler.stat("rep/page/dropped/request_rel_nofollow") == 1
    assert crawler.stat("rep/page/dropped/item_noindex") == 5
    assert crawler.stat("rep/page/audit/would_drop/item_noindex") is None
    # one DEBUG line per page, with the reason
    drops = [m for m in crawler.messages(logging.DEBUG) if m.startswith("Dropped, page-level")]
    assert len(drops) == 8  # 3 nofollow pages (one also noindex), /rel, 4 other noindex
    (none_line,) = [m for m in drops if "/header-none" in m]
    assert "1 requests, the page is nofollow (X-Robots-Tag: none)" in none_line
    assert "1 items, the page is noindex (X-Robots-Tag: none)" in none_line
    (rel_line,) = [m for m in drops if "/rel>" in m]
    assert '1 requests for URLs linked only with rel="nofollow"' in rel_line
    (meta_line,) = [m for m in drops if "/meta-noindex" in m]
    assert '<meta name="PageBot" content="NoIndex">' in meta_line
    # the closing summary, per origin
    (summary,) = [
        m for m in crawler.messages(logging.INFO) if "page-level directives (REP_PAGE_MODE" in m
    ]
    assert "1 origin(s); dropped: 4 request(s), 5 item(s)" in summary
    assert f"{mockserver.origin(host)}: pages noindex 5, nofollow 3" in summary
    assert "dropped: requests 4, items 5" in summary


@pytest_twisted.ensureDeferred
async def test_audit_counts_what_enforce_would_drop(mockserver, run_crawl):
    crawler, host = await _crawl(run_crawl, mockserver, "audit")

    assert _received(mockserver, host) == EVERY_PATH
    assert _items(host) == EVERY_PATH - {"/redirect"}
    assert crawler.stat("rep/page/audit/would_drop/request_nofollow") == 3
    assert crawler.stat("rep/page/audit/would_drop/request_rel_nofollow") == 1
    assert crawler.stat("rep/page/audit/would_drop/item_noindex") == 5
    assert crawler.stat("rep/page/dropped/item_noindex") is None
    would = [m for m in crawler.messages(logging.DEBUG) if m.startswith("Would be dropped")]
    assert len(would) == 8
    (summary,) = [
        m for m in crawler.messages(logging.INFO) if "page-level directives (REP_PAGE_MODE" in m
    ]
    assert "would be dropped: requests 4, items 5" in summary


@pytest_twisted.ensureDeferred
async def test_off_reads_nothing(mockserver, run_crawl):
    crawler, host = await _crawl(run_crawl, mockserver, "off")

    assert _received(mockserver, host) == EVERY_PATH
    assert _items(host) == EVERY_PATH - {"/redirect"}
    assert all(page is None for page in _pages(crawler).values())
    assert not [k for k in crawler.stats.get_stats() if k.startswith("rep/page/")]


@pytest_twisted.ensureDeferred
async def test_enforce_with_async_callbacks_and_plain_requests(mockserver, run_crawl):
    crawler, host = await _crawl(run_crawl, mockserver, "enforce", AsyncPageSpider)

    assert _received(mockserver, host) == EVERY_PATH - NOT_FOLLOWED
    assert _items(host) == EVERY_PATH - NOT_FOLLOWED - {"/redirect"} - NOINDEX
    assert crawler.stat("rep/page/dropped/request_nofollow") == 3
    assert crawler.stat("rep/page/dropped/request_rel_nofollow") == 1


class RulesSpider(CrawlSpider):
    name = "rules"
    rules = (Rule(LinkExtractor(), callback="parse_item", follow=True),)

    def parse_item(self, response: Response) -> Any:
        yield {"url": response.url}


@pytest_twisted.ensureDeferred
async def test_enforce_with_crawlspider_rules(mockserver, run_crawl):
    host = _site(mockserver, "page-rules")
    crawler = await run_crawl(
        [mockserver.url(host, "/")],
        settings={**REP, "REP_PAGE_MODE": "enforce"},
        spider_cls=RulesSpider,
    )
    # CrawlSpider: the start page has no callback item; /exempt is linked from nowhere
    # (it is a start request of the other tests); LinkExtractor skips .pdf links.
    expected = EVERY_PATH - NOT_FOLLOWED - {"/exempt", "/from-exempt", "/doc.pdf"}
    assert _received(mockserver, host) == expected
    assert _items(host) == expected - {"/", "/redirect"} - NOINDEX
    assert crawler.stat("rep/page/dropped/request_rel_nofollow") == 1


@pytest_twisted.ensureDeferred
async def test_bad_page_mode_stops_the_crawl_naming_it(mockserver, run_crawl):
    with pytest.raises(SettingError, match="REP_PAGE_MODE"):
        Config.from_settings({"REP_PAGE_MODE": "strict"})
    host = _site(mockserver, "page-bad")
    with pytest.raises(SettingError, match="REP_PAGE_MODE must be one of"):
        await run_crawl([mockserver.url(host, "/")], settings={**REP, "REP_PAGE_MODE": "strict"})
    assert _received(mockserver, host) == set()


@pytest_twisted.ensureDeferred
async def test_the_product_token_is_the_requests_own(mockserver, run_crawl):
    # robotstxt_user_agent in a request's meta names the crawler for that request: the
    # other bot's tags and header lines then apply to it, and ours do not.
    host = _site(mockserver, "page-token")
    urls = [
        Request(mockserver.url(host, "/other-bot"), meta={"robotstxt_user_agent": "OtherBot"}),
        Request(mockserver.url(host, "/meta-noindex"), meta={"robotstxt_user_agent": "OtherBot"}),
    ]
    crawler = await run_crawl(
        urls, settings={**REP, "REP_PAGE_MODE": "enforce"}, spider_cls=PageSpider
    )
    pages = _pages(crawler)
    assert pages["/other-bot"]["product_token"] == "OtherBot"
    assert pages["/other-bot"]["directives"] == ["nofollow", "noindex"]
    assert pages["/meta-noindex"]["directives"] == []
    # the other bot's page is nofollow and noindex for it; ours is neither
    assert _received(mockserver, host) == {"/other-bot", "/meta-noindex", "/from-meta-noindex"}
    assert _items(host) == {"/meta-noindex", "/from-meta-noindex"}


class BuildSelector:
    """A spider middleware before ours that parses the page (as many projects' do)."""

    def process_spider_input(self, response: Response, spider: Spider | None = None) -> None:
        if isinstance(response, HtmlResponse):
            response.css("title")


@pytest_twisted.ensureDeferred
async def test_a_selector_already_built_is_reused_with_the_same_result(mockserver, run_crawl):
    settings = {
        **REP,
        "SPIDER_MIDDLEWARES": {"tests.crawl.test_page_directives.BuildSelector": 900},
    }
    host = _site(mockserver, "page-selector")
    crawler = await run_crawl(_start(mockserver, host), settings=settings, spider_cls=PageSpider)
    pages = _pages(crawler)
    assert pages["/meta-noindex"]["sources"]["noindex"] == [
        {"from": "meta", "scope": TOKEN, "text": f'<meta name="{TOKEN}" content="NoIndex">'}
    ]
    assert pages["/meta-nofollow"]["directives"] == ["nofollow"]
    assert pages["/other-bot"]["directives"] == []
    assert pages["/body-meta"]["directives"] == []  # the body's tag: not in //head
    assert crawler.stat("rep/page/directive/noindex") == 5
