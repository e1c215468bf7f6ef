"""SitemapSpider with ``sitemap_urls`` naming robots.txt (docs/compat.md; Scrapy issue
#3967): the spider's robots.txt request is answered from scrapy-rep's copy, so each
origin's robots.txt is downloaded once; the sitemaps it lists pass the rules as usual."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import pytest_twisted
from scrapy.http import Response
from scrapy.spiders import SitemapSpider

from tests.support.crawl import REP, pages_of


class MapSpider(SitemapSpider):
    name = "map"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pages: list[str] = []

    def parse(self, response: Response, **kwargs: Any) -> None:
        self.pages.append(response.url)


def urlset(*locs: str) -> str:
    entries = "".join(f"<url><loc>{loc}</loc></url>" for loc in locs)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'
    )


def site(mockserver: Any, host: str) -> dict[str, Any]:
    """robots.txt lists an allowed and a disallowed sitemap; the allowed sitemap lists
    an allowed and a disallowed page."""

    def u(path: str) -> str:
        return mockserver.url(host, path)

    robots = (
        "User-agent: *\nDisallow: /private\n"
        f"Sitemap: {u('/sitemap.xml')}\nSitemap: {u('/private/sitemap.xml')}\n"
    )
    xml = {"Content-Type": "application/xml"}
    return {
        "robots": {"body": robots},
        "pages": {
            "/sitemap.xml": {"body": urlset(u("/page"), u("/private/page")), "headers": xml},
            "/private/sitemap.xml": {"body": urlset(u("/secret")), "headers": xml},
        },
    }


@pytest.mark.parametrize("middleware", ["scrapy-rep", "stock"])
@pytest_twisted.ensureDeferred
async def test_sitemap_spider_robots_txt_downloaded_once(
    mockserver: Any, run_crawl: Any, middleware: str
) -> None:
    hosts = [mockserver.unique_host("map-a"), mockserver.unique_host("map-b")]
    mockserver.configure_many({h: site(mockserver, h) for h in hosts})
    settings = REP if middleware == "scrapy-rep" else {"RETRY_ENABLED": False}
    crawler = await run_crawl(
        settings=settings,
        spider_cls=MapSpider,
        spider_kwargs={"sitemap_urls": [mockserver.url(h, "/robots.txt") for h in hosts]},
    )
    for host in hosts:
        # The sitemaps and pages robots.txt allows, and nothing it disallows.
        assert sorted(pages_of(mockserver, host)) == ["/page", "/sitemap.xml"]
        if middleware == "scrapy-rep":
            assert mockserver.count(host, "/robots.txt") == 1
        else:  # Scrapy's middleware and the spider each download it
            assert mockserver.count(host, "/robots.txt") == 2
    assert sorted(crawler.spider.pages) == sorted(mockserver.url(h, "/page") for h in hosts)
    assert crawler.stat("robotstxt/forbidden") == 4  # per host: a sitemap and a page
    if middleware == "scrapy-rep":
        assert crawler.stat("robotstxt/sitemap_copy") == 2
        assert crawler.stat("robotstxt/request_count") == 2
        crawled = [m for m in crawler.messages(logging.DEBUG) if "robots.txt copy" in m]
        assert len(crawled) == 2, crawled  # "Crawled (200) <GET .../robots.txt> [...]"


@pytest_twisted.ensureDeferred
async def test_sitemap_spider_missing_robots_txt_downloaded_once(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """A 404 robots.txt: the spider gets the 404 from the copy (HttpErrorMiddleware
    ignores it, as it would the server's), and the site is asked once."""
    mockserver.configure(host, {})
    crawler = await run_crawl(
        settings=REP,
        spider_cls=MapSpider,
        spider_kwargs={"sitemap_urls": [mockserver.url(host, "/robots.txt")]},
    )
    assert mockserver.paths(host) == ["/robots.txt"]
    assert crawler.stat("robotstxt/sitemap_copy") == 1
    assert crawler.stat("httperror/response_ignored_status_count/404") == 1
    assert not crawler.spider.pages


@pytest_twisted.ensureDeferred
async def test_other_spiders_download_robots_txt_themselves(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """Only SitemapSpider's robots.txt request is answered from the copy: a spider that
    asks for robots.txt as a page of its own gets the server's response."""
    mockserver.configure(host, site(mockserver, host))
    crawler = await run_crawl([mockserver.url(host, "/robots.txt")], settings=REP)
    assert mockserver.count(host, "/robots.txt") == 2
    assert crawler.spider.response_urls == [mockserver.url(host, "/robots.txt")]
    assert not crawler.stat("robotstxt/sitemap_copy")
