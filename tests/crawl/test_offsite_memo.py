"""The gate asks Scrapy's OffsiteMiddleware once per host (``scheduling._HostMemo``):
its answers are exactly the middleware's own, request by request, whatever the URL and
however ``allowed_domains`` changes; a replaced policy is asked for every request."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scrapy import Request, Spider
from scrapy.downloadermiddlewares.offsite import OffsiteMiddleware
from scrapy.utils.test import get_crawler

from scrapy_rep.crawl.compat import is_plain_offsite_middleware
from scrapy_rep.crawl.scheduling import _HostMemo


class OffsiteSpider(Spider):
    name = "offsite-memo"
    allowed_domains = ("a.test", "b.test")


def _middleware(cls: type[OffsiteMiddleware] = OffsiteMiddleware) -> tuple[Any, Spider]:
    crawler = get_crawler(OffsiteSpider)
    crawler.spider = spider = crawler._create_spider()
    mw = cls.from_crawler(crawler)
    mw.spider_opened(spider)
    return mw, spider


_hosts = st.sampled_from(
    ["a.test", "A.TEST", "x.a.test", "xa.test", "b.test", "c.test", "a.test.", "[::1]", "1.2.3.4"]
)
_urls = st.builds(
    lambda scheme, user, host, port, rest: f"{scheme}://{user}{host}{port}{rest}",
    st.sampled_from(["http", "https", "ftp"]),
    st.sampled_from(["", "u@", "u:p@", "a.test@"]),
    _hosts,
    st.sampled_from(["", ":80", ":8080"]),
    st.sampled_from(["", "/", "/p/q", "?q=/x", "#f/g", "/c.test/", "?x#y"]),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    urls=st.lists(_urls, min_size=1, max_size=12),
    domain_changes=st.lists(
        st.lists(st.sampled_from(["a.test", "b.test", "c.test", "test"]), max_size=3),
        max_size=3,
    ),
)
def test_the_memo_answers_as_the_middleware_does(
    urls: list[str], domain_changes: list[list[str]]
) -> None:
    mw, spider = _middleware()
    memo = _HostMemo()
    for allowed in [list(spider.allowed_domains), *domain_changes]:
        spider.allowed_domains = allowed  # read again by Scrapy 2.19, not by 2.14
        for url in urls + urls:
            request = Request(url)
            assert memo.should_follow(mw, request, spider) == mw.should_follow(request, spider)


def test_a_replaced_policy_is_asked_for_each_request() -> None:
    class RootOnly(OffsiteMiddleware):
        def should_follow(self, request: Request, spider: Spider) -> bool:
            return request.url.endswith("/ok")

    mw, _ = _middleware(RootOnly)
    assert not is_plain_offsite_middleware(mw, OffsiteMiddleware)
    plain, _ = _middleware()
    assert is_plain_offsite_middleware(plain, OffsiteMiddleware)
    plain.should_follow = lambda request, spider: True
    assert not is_plain_offsite_middleware(plain, OffsiteMiddleware)


def test_the_memo_is_bounded() -> None:
    mw, spider = _middleware()
    memo = _HostMemo()
    for i in range(_HostMemo.MAX_HOSTS + 10):
        memo.should_follow(mw, Request(f"http://h{i}.a.test/"), spider)
    assert len(memo.answers) <= _HostMemo.MAX_HOSTS
