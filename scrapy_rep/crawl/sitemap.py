"""SitemapSpider's own robots.txt request, answered from scrapy-rep's copy (docs/compat.md).

Else the site would be asked for it twice (Scrapy issue #3967).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.http import TextResponse
from scrapy.spiders import SitemapSpider
from scrapy.utils.httpobj import urlparse_cached

from scrapy_rep.crawl import compat
from scrapy_rep.policy.records import ALLOW_ALL, RULES
from scrapy_rep.policy.robots_policy import FRESH

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from scrapy_rep.policy.records import OriginRecord
    from scrapy_rep.policy.robots_policy import Evaluation

#: The response flag of a robots.txt answered from scrapy-rep's copy (as 'cached' is for HTTPCACHE).
COPY_FLAG = "robots.txt copy"


def is_sitemap_spider(spider: object) -> bool:
    """Whether ``copy_response`` can answer any request of *spider*."""
    return isinstance(spider, SitemapSpider)


def copy_response(
    crawler: Crawler, request: Request, evaluation: Evaluation, record: OriginRecord | None
) -> TextResponse | None:
    """The copy as SitemapSpider's robots.txt response, or None to download it."""
    if not is_sitemap_spider(crawler.spider) or not compat.is_sitemap_spider_request(request):
        return None
    parts = urlparse_cached(request)
    if parts.path != "/robots.txt" or parts.query:
        return None
    # Only a fresh copy: the spider wants the file as it is now.
    if evaluation.source != FRESH or record is None:
        return None
    if evaluation.kind == RULES:
        status, body = 200, evaluation.body
    elif evaluation.kind == ALLOW_ALL and record.last_outcome.isdigit():
        status, body = int(record.last_outcome), b""  # a 4xx: no Sitemap lines
    else:
        return None
    assert crawler.stats is not None
    crawler.stats.inc_value("robotstxt/sitemap_copy")
    return TextResponse(
        request.url,
        status=status,
        headers={"Content-Type": "text/plain; charset=utf-8"},
        body=body,
        encoding="utf-8",
        request=request,
        flags=[COPY_FLAG],
    )
