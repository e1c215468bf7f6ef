"""Held requests kept as bytes (``RequestCodec``): a pickled dict that Scrapy's own
``request_from_dict`` restores to the request Scrapy's own serialisation
(``pickle.dumps(request.to_dict(spider=...), protocol=4)``) restores, found faster: the
same bytes for a ``Request`` subclass, the fields still at their defaults left out for a
plain ``Request``."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scrapy import FormRequest, Request, Spider
from scrapy.http import JsonRequest
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.request import request_from_dict
from scrapy.utils.test import get_crawler

from scrapy_rep.crawl.request_codec import PLAIN_FIELDS, RequestCodec


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


def scrapy_roundtrip(request: Request, spider: Spider) -> Request:
    """What Scrapy's disk queues give back for ``request``."""
    blob = pickle.dumps(request.to_dict(spider=spider), protocol=4)
    return request_from_dict(pickle.loads(blob), spider=spider)


def test_the_bytes_restore_what_scrapys_own_restore(
    codec_and_spider: tuple[RequestCodec, CodecSpider],
) -> None:
    codec, spider = codec_and_spider
    for request in requests_of(spider):
        before = request.to_dict(spider=spider) if request.callback is not NO_CALLBACK else None
        try:
            expected = scrapy_roundtrip(request, spider)
        except ValueError:
            with pytest.raises(ValueError):
                codec.encode(request)
            continue
        blob = codec.encode(request)
        if type(request) is not Request:
            assert blob == pickle.dumps(request.to_dict(spider=spider), protocol=4)
        restored = request_from_dict(pickle.loads(blob), spider=spider)  # Scrapy's own
        assert type(restored) is type(expected)
        assert restored.to_dict(spider=spider) == expected.to_dict(spider=spider), request
        # the request itself is left as it was
        assert request.to_dict(spider=spider) == before


def test_a_plain_request_leaves_its_defaults_out(
    codec_and_spider: tuple[RequestCodec, CodecSpider],
) -> None:
    codec, spider = codec_and_spider
    request = Request("http://a.test/1", callback=spider.parse_item, errback=spider.on_error)
    data = pickle.loads(codec.encode(request))
    assert data == {"url": "http://a.test/1", "callback": "parse_item", "errback": "on_error"}
    assert len(codec.encode(request)) < len(pickle.dumps(request.to_dict(spider=spider), 4))


def test_the_short_form_covers_every_field_of_this_scrapys_request() -> None:
    """The short form writes a known set of fields; this Scrapy's Request has exactly
    those (a release that adds one makes the codec take to_dict for every request)."""
    assert frozenset(Request.attributes) == PLAIN_FIELDS


def test_bytes_in_scrapys_full_form_still_decode(
    codec_and_spider: tuple[RequestCodec, CodecSpider],
) -> None:
    """Held requests recorded in a shared store by an earlier version (the full dict)."""
    codec, spider = codec_and_spider
    request = Request("http://a.test/1", callback=spider.parse_item, meta={"m": 1}, priority=2)
    restored = codec.decode(pickle.dumps(request.to_dict(spider=spider), protocol=4))
    assert restored.to_dict(spider=spider) == request.to_dict(spider=spider)


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


_text = st.text(alphabet="abcXYZ09-_ é", max_size=8)
_values = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), _text, st.lists(_text, max_size=2)
)


@st.composite
def any_request(draw: st.DrawFn, spider: CodecSpider) -> Request:
    kind = draw(st.sampled_from([Request, FormRequest, JsonRequest]))
    encoding = draw(st.sampled_from(["utf-8", "latin-1", "cp1252"]))
    kwargs: dict[str, Any] = {
        "callback": draw(st.sampled_from([None, spider.parse_item, spider.on_error])),
        "errback": draw(st.sampled_from([None, spider.on_error])),
        "method": draw(st.sampled_from(["GET", "POST", "head"])),
        "headers": draw(st.dictionaries(st.sampled_from(["X-A", "Accept", "x-b"]), _text)),
        "cookies": draw(st.one_of(st.none(), st.dictionaries(_text, _text, max_size=2))),
        "meta": draw(
            st.dictionaries(st.sampled_from(["depth", "allow_offsite", "k", "rep_x"]), _values)
        ),
        "cb_kwargs": draw(st.dictionaries(st.sampled_from(["tag", "n"]), _values, max_size=2)),
        "flags": draw(st.lists(_text, max_size=2)),
        "priority": draw(st.integers(-3, 3)),
        "dont_filter": draw(st.booleans()),
        "encoding": encoding,
    }
    if kind is Request:
        kwargs["body"] = draw(st.one_of(st.none(), _text, st.binary(max_size=6)))
    elif kind is FormRequest:
        kwargs["formdata"] = draw(st.dictionaries(_text, _text, max_size=2))
    else:
        kwargs["data"] = draw(st.dictionaries(_text, st.integers(), max_size=2))
    url = "http://a.test/" + draw(st.text(alphabet="ab/%é?=&#", max_size=10))
    return kind(url, **kwargs)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_request_comes_back_as_scrapy_restores_it(data: st.DataObject) -> None:
    """Property: whatever the fields and the class, the codec's bytes, restored by
    Scrapy's request_from_dict, give the request Scrapy's own serialisation gives."""
    crawler = get_crawler(CodecSpider)
    crawler.spider = spider = crawler._create_spider()
    codec = RequestCodec(crawler)
    request = data.draw(any_request(spider))
    expected = scrapy_roundtrip(request, spider)
    restored = codec.decode(codec.encode(request))
    assert type(restored) is type(expected)
    assert restored.to_dict(spider=spider) == expected.to_dict(spider=spider)
    for attribute in ("url", "method", "body", "encoding", "priority", "dont_filter", "flags"):
        assert getattr(restored, attribute) == getattr(expected, attribute), attribute
    assert restored.headers == expected.headers
    assert (restored.meta, restored.cb_kwargs, restored.cookies) == (
        expected.meta,
        expected.cb_kwargs,
        expected.cookies,
    )
    assert (restored.callback, restored.errback) == (expected.callback, expected.errback)
