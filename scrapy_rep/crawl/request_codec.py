"""Held requests as bytes, serialised as Scrapy's disk queues serialise them.

Why bytes: a held ``Request`` is several objects the cyclic garbage collector tracks
(the request, its bound callbacks, Scrapy's per-request caches), and every full
collection walks all of them. 40,000 held requests made the collector alone cost more
than the rest of the crawl's extra work (``benchmarks/bench_held.py``). A ``bytes`` is
not tracked, and is also 4-5 times smaller.

The format is exactly ``pickle.dumps(request.to_dict(spider=spider), protocol=4)``,
what ``scrapy.squeues.PickleFifoDiskQueue`` writes under ``JOBDIR``, and decoding is
Scrapy's own ``request_from_dict``. Only finding a callback's name is done here:
``Request.to_dict`` looks it up with ``inspect.getmembers`` over the whole spider (about
85 % of its cost); a bound method of the spider is found by its own name, checked to be
the same function, and anything else (a private, mangled name, a lambda) goes through
``to_dict`` unchanged, which names it or raises as Scrapy does. (A method with two
names in the spider may be stored under the other one; both restore the same method.)
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

_NOT_FOUND = object()


def _method_name(spider: Any, func: Any) -> Any:
    """The name ``to_dict`` would store for ``func``, or ``_NOT_FOUND``."""
    if not callable(func):
        return func  # None, or already a name
    inner = getattr(func, "__func__", None)
    name = getattr(inner, "__name__", None)
    if inner is None or not isinstance(name, str):
        return _NOT_FOUND
    if getattr(getattr(spider, name, None), "__func__", None) is inner:
        return name
    return _NOT_FOUND


class RequestCodec:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        # The request being held right now and, once serialised, its bytes: the waiting
        # room and a ledger recording the same request in the same call share one
        # serialisation (``share``).
        self._shared: Request | None = None
        self._shared_blob: bytes | None = None

    def to_dict(self, request: Request) -> dict[str, Any]:
        """``request.to_dict(spider=...)``, the same dict, found faster."""
        spider = self.crawler.spider
        callback, errback = request.callback, request.errback
        cb_name = _method_name(spider, callback)
        eb_name = _method_name(spider, errback)
        if spider is None or cb_name is _NOT_FOUND or eb_name is _NOT_FOUND:
            return request.to_dict(spider=spider)
        # to_dict stores a callback that is not callable as it is: give it the names
        # for the duration of the call (no other code runs in between).
        request.callback, request.errback = cb_name, eb_name
        try:
            return request.to_dict(spider=spider)
        finally:
            request.callback, request.errback = callback, errback

    def encode(self, request: Request) -> bytes:
        """Raises what ``to_dict`` or pickle raise for a request that cannot be stored
        (a callback that is not a spider method, an object in meta pickle refuses)."""
        if request is not self._shared:
            return pickle.dumps(self.to_dict(request), protocol=4)
        if self._shared_blob is None:
            self._shared_blob = pickle.dumps(self.to_dict(request), protocol=4)
        return self._shared_blob

    def decode(self, blob: bytes) -> Request:
        from scrapy.utils.request import request_from_dict

        return request_from_dict(pickle.loads(blob), spider=self.crawler.spider)

    def share(self, request: Request) -> None:
        """Until ``unshare``, ``request`` is serialised once, whoever asks first (its
        meta must not change meanwhile: no other code runs in between)."""
        self._shared = request
        self._shared_blob = None

    def unshare(self) -> None:
        self._shared = None
        self._shared_blob = None
