"""Held requests as bytes that Scrapy's own ``request_from_dict`` restores.

Why bytes (the garbage collector does not walk them), and why this format (Scrapy's
``JOBDIR`` disk queues write it): docs/waiting.md, "Spill to disk". Two exact shortcuts:

- A callback's name: ``to_dict`` scans the spider with ``inspect.getmembers`` (85 % of its
  cost); a bound spider method is found by its own name and checked to be the same
  function; anything else goes through ``to_dict``, which names it or raises as Scrapy does.
- A plain ``scrapy.Request`` (not a subclass, whose defaults may differ) leaves out fields
  at their ``__init__`` defaults, which ``request_from_dict`` gives back the same, and reads
  the lazy containers without creating them: 102 bytes instead of 231 for a followed link,
  about 1 µs instead of 8.
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any

from scrapy import Request

from scrapy_rep.crawl import compat

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

_NOT_FOUND = object()
_PROTOCOL = 4


def _method_name(spider: Any, func: Any) -> Any:
    """The name ``to_dict`` would store for ``func``, or ``_NOT_FOUND``."""
    if not callable(func):
        return func  # None, or already a name
    inner = getattr(func, "__func__", None)
    name = getattr(inner, "__name__", None)
    if isinstance(name, str) and getattr(getattr(spider, name, None), "__func__", None) is inner:
        return name
    return _NOT_FOUND


# Each container field read without creating it (``compat.request_field_readers``).
_READERS = compat.request_field_readers()
_CONTAINERS = tuple((name, _READERS[name]) for name in ("cookies", "meta", "flags", "cb_kwargs"))
_READ_HEADERS = _READERS["headers"]
# The fields plain_request_dict writes: a Scrapy whose Request has others (a later
# release) takes to_dict for every request, so that no field is ever left behind.
PLAIN_FIELDS = frozenset(
    [
        "url",
        "callback",
        "errback",
        "headers",
        "body",
        "cookies",
        "meta",
        "flags",
        "cb_kwargs",
        "encoding",
        "method",
        "priority",
        "dont_filter",
    ]
)
_PLAIN_OK = frozenset(getattr(Request, "attributes", ())) == PLAIN_FIELDS


def plain_request_dict(request: Request, callback: Any, errback: Any) -> dict[str, Any]:
    """What ``request_from_dict`` needs to rebuild ``request`` (a plain ``Request``):
    its fields that differ from ``Request.__init__``'s defaults, the callbacks named."""
    data: dict[str, Any] = {"url": request.url}
    if callback is not None:
        data["callback"] = callback
    if errback is not None:
        data["errback"] = errback
    headers = _READ_HEADERS(request)
    if headers:
        data["headers"] = dict(headers)
    if request.body:
        data["body"] = request.body
    for name, read in _CONTAINERS:
        value = read(request)
        if value:
            data[name] = value
    if request.encoding != "utf-8":
        data["encoding"] = request.encoding
    if request.method != "GET":
        data["method"] = request.method
    if request.priority:
        data["priority"] = request.priority
    if request.dont_filter:
        data["dont_filter"] = request.dont_filter
    return data


class RequestCodec:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        # The request being held now and its bytes once serialised (``share``).
        self._shared: Request | None = None
        self._shared_blob: bytes | None = None

    def to_dict(self, request: Request) -> dict[str, Any]:
        """A dict ``request_from_dict`` turns back into ``request`` (the module docstring)."""
        spider = self.crawler.spider
        callback, errback = request.callback, request.errback
        cb_name = _method_name(spider, callback)
        eb_name = _method_name(spider, errback)
        if spider is None or cb_name is _NOT_FOUND or eb_name is _NOT_FOUND:
            return request.to_dict(spider=spider)
        if type(request) is Request and _PLAIN_OK:
            return plain_request_dict(request, cb_name, eb_name)
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
            return pickle.dumps(self.to_dict(request), protocol=_PROTOCOL)
        if self._shared_blob is None:
            self._shared_blob = pickle.dumps(self.to_dict(request), protocol=_PROTOCOL)
        return self._shared_blob

    def decode(self, blob: bytes) -> Request:
        from scrapy.utils.request import request_from_dict

        return request_from_dict(pickle.loads(blob), spider=self.crawler.spider)

    def share(self, request: Request) -> None:
        """Until ``unshare``, ``request`` is serialised once for the room and durable waiting
        (its meta must not change meanwhile: no other code runs in between)."""
        self._shared = request
        self._shared_blob = None

    def unshare(self) -> None:
        self._shared = None
        self._shared_blob = None
