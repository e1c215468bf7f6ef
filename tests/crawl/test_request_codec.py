"""Held requests kept as bytes (``RequestCodec``): exactly Scrapy's own serialisation,
``pickle.dumps(request.to_dict(spider=...), protocol=4)``, only found faster."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from scrapy import FormRequest, Request, Spider
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.test import get_crawler

from scrapy_rep.crawl.request_codec import RequestCodec


class CodecSpider(Spider):
    name = "codec"

    def parse_item(self, response: Any, tag: str = "") -> None:
        pass

    def on_error(self, failure: Any) -> None:
        pass

    def __private(self, response: Any) -> None:
        pass

    def private_callback(self) -> Any:
        return self.__private


@pytest.fixture
def codec_and_spider() -> tuple[RequestCodec, CodecSpider]:
    crawler = get_crawler(CodecSpider)
    crawler.spider = crawler._create_spider()
    return RequestCodec(crawler), crawler.spider


def requests_of(spider: CodecSpider) -> list[Request]:
    return [
        Request("http://a.test/1", callback=spider.parse_item, errback=spider.on_error),
        Request("http://a.test/2", cb_kwargs={"tag": "x"}, meta={"depth": 2}, priority=3),
        Request("http://a.test/3", callback=spider.on_error, dont_filter=True),
        Request("http://a.test/4", callback=spider.private_callback()),
        Request("http://a.test/5", callback=NO_CALLBACK),
        FormRequest("http://a.test/6", formdata={"q": "1"}, callback=spider.parse_item),
        Request("http://a.test/7", headers={"X-A": "b"}, cookies={"c": "d"}, flags=["f"]),
    ]


def test_the_bytes_are_scrapys_own(codec_and_spider: tuple[RequestCodec, CodecSpider]) -> None:
    codec, spider = codec_and_spider
    for request in requests_of(spider):
        try:
            expected = pickle.dumps(request.to_dict(spider=spider), protocol=4)
        except ValueError:
            with pytest.raises(ValueError):
                codec.encode(request)
            continue
        assert codec.encode(request) == expected, request
        # the request itself is left as it was
        assert request.to_dict(spider=spider) == pickle.loads(expected)


def test_a_request_comes_back_as_scrapy_would_restore_it(
    codec_and_spider: tuple[RequestCodec, CodecSpider],
) -> None:
    codec, spider = codec_and_spider
    for request in requests_of(spider):
        try:
            blob = codec.encode(request)
        except ValueError:
            continue
        restored = codec.decode(blob)
        assert type(restored) is type(request)
        assert restored.to_dict(spider=spider) == request.to_dict(spider=spider)


def test_a_callback_that_is_not_a_spider_method_cannot_be_encoded(
    codec_and_spider: tuple[RequestCodec, CodecSpider],
) -> None:
    codec, _ = codec_and_spider
    request = Request("http://a.test/x", callback=lambda response: None)
    with pytest.raises(ValueError, match="not an instance method"):
        codec.encode(request)
    assert callable(request.callback)  # restored after the failed attempt


def test_a_shared_request_is_not_serialised_twice(
    codec_and_spider: tuple[RequestCodec, CodecSpider],
) -> None:
    codec, spider = codec_and_spider
    request = Request("http://a.test/1", callback=spider.parse_item)
    codec.share(request)
    first = codec.encode(request)
    assert codec.encode(request) is first  # the same bytes, not a second serialisation
    assert codec.encode(Request("http://a.test/2")) != first
    codec.unshare()
    assert codec.encode(request) is not first
    assert codec.encode(request) == first


def test_a_method_with_two_names_comes_back_as_that_method() -> None:
    class AliasSpider(CodecSpider):
        alias = CodecSpider.parse_item

    crawler = get_crawler(AliasSpider)
    crawler.spider = spider = crawler._create_spider()
    codec = RequestCodec(crawler)
    for callback in (spider.parse_item, spider.alias):
        restored = codec.decode(codec.encode(Request("http://a.test/1", callback=callback)))
        assert restored.callback.__func__ is CodecSpider.parse_item  # type: ignore[union-attr]
