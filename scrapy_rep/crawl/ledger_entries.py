"""A held request as an entry of the durable ledger (``store_ledger.py``), and back.

An entry is (key, origin, blob). The blob is Scrapy's own serialisation (a pickled dict
of the kind ``Request.to_dict`` gives, as Scrapy's disk queues store requests, restored
by ``request_from_dict``), made by the waiting room's ``RequestCodec`` so that a request
is serialised once for both. The key makes duplicates collapse: the request fingerprint,
or for a ``dont_filter`` request (which the dupefilter does not see) the fingerprint
and a digest of the request's own bytes, less the meta keys scrapy-rep itself sets
while a request waits. That identity is stable across runs and processes: the start
request a restarted spider yields again is the entry an earlier run parked, not one
more copy of it (one parked copy per request, whatever restarts happen). A key is made
once and kept in the request's meta (``LEDGER_KEY_META``), so a request held again
after an adoption keeps its entry. A
request that cannot be serialised (a callback that is not a spider method) has no blob:
it waits in this process only, logged once at WARNING and counted.
"""

from __future__ import annotations

import hashlib
import logging
import pickle
import weakref
from typing import TYPE_CHECKING, Any

from scrapy_rep.crawl.request_codec import RequestCodec

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

logger = logging.getLogger("scrapy_rep")

#: Ceiling for one blob: far above a real request; a bigger one is not parked.
MAX_BLOB = 4 * 1024 * 1024
STAT = "robotstxt/ledger/"
#: Private meta key: the request's key in the ledger, from ``record`` to ``forget``.
LEDGER_KEY_META = "_rep_ledger_key"
#: Meta keys scrapy-rep sets on a request while it waits or when it is released or
#: decided: not part of what the request is (see ``LedgerEntries._own_bytes_digest``).
_WHILE_WAITING_META = frozenset(
    {
        LEDGER_KEY_META,
        "rep_waited",  # crawl/runtime.py WAITED_META_KEY
        "rep_scheduled",  # crawl/scheduling.py SCHEDULED_META_KEY
        "rep_turn",  # crawl/cluster_delay.py TURN_META_KEY
        "rep_turn_wait",  # crawl/cluster_delay.py WAIT_META_KEY
        "robotstxt_decision",  # crawl/decide.py DECISION_META_KEY
        "rep_usage",  # crawl/usage.py META_KEY
    }
)


class LedgerEntries:
    """Keys and blobs of one ledger's entries (see the module docstring)."""

    def __init__(self, crawler: Crawler, owner: str, codec: RequestCodec | None = None) -> None:
        self.crawler = crawler
        self.owner = owner
        self.codec = codec or RequestCodec(crawler)
        assert crawler.stats is not None
        self.stats = crawler.stats
        # Adopted requests just handed out, until each is recorded again or gone.
        self._adopted_keys: weakref.WeakKeyDictionary[Request, str] = weakref.WeakKeyDictionary()
        self._warned_unserializable = False

    def key(self, request: Request) -> str:
        """The request's key, made once and kept in its meta: a request re-recorded
        (held again after an adoption) keeps its entry."""
        meta = request.meta
        key = meta.get(LEDGER_KEY_META)
        if isinstance(key, str):
            return key
        key = self._adopted_keys.pop(request, None)
        if key is not None:
            meta[LEDGER_KEY_META] = key
            return key
        key = self.identity(request)
        meta[LEDGER_KEY_META] = key
        return key

    def identity(self, request: Request) -> str:
        """The key ``request`` would get, computed afresh (its meta is not touched)."""
        fingerprinter: Any = self.crawler.request_fingerprinter
        # (the dupefilter computed it a moment ago for this object: Scrapy caches it)
        key: str = fingerprinter.fingerprint(request).hex()
        if request.dont_filter:
            key = f"{key}.{self._own_bytes_digest(request)}"
        return key

    def _own_bytes_digest(self, request: Request) -> str:
        """A digest of what the request is (its fields, callbacks by name, its meta less
        what scrapy-rep adds while it waits): two dont_filter requests with the same
        digest are the same request, yielded twice (e.g. by two runs of the spider).
        A request that cannot be serialised gets a digest of its fingerprint only; it
        is never parked anyway."""
        try:
            data = dict(self.codec.to_dict(request))
            meta = data.get("meta")
            if meta:
                data["meta"] = {k: v for k, v in meta.items() if k not in _WHILE_WAITING_META}
            own = pickle.dumps(data, protocol=4)
        except Exception:  # ValueError (callback), PicklingError, TypeError (meta)
            own = b""
        return hashlib.sha256(own).hexdigest()[:24]

    def handed_out(self, request: Request, key: str) -> None:
        """An adopted request leaves the ledger's hands with ``key`` (out of its meta):
        recorded again, it gets the same key."""
        self._adopted_keys[request] = key

    def blob(self, request: Request) -> bytes | None:
        """The request's bytes, or None (logged and counted) when it cannot be parked."""
        try:
            # Scrapy's disk queues store Request.to_dict() pickled, and so do we (a
            # plain Request without its default fields, see RequestCodec): the
            # callback is kept by name, so it must be a method of the spider. The codec
            # gives the waiting room's bytes when it has just serialised the request.
            blob = self.codec.encode(request)
        except Exception as exc:  # ValueError (callback), PicklingError, TypeError (meta)
            self._unparkable(request, f"{type(exc).__name__}: {exc}")
            return None
        if len(blob) > MAX_BLOB:
            self._unparkable(request, f"{len(blob)} bytes serialised")
            return None
        return blob

    def request(self, blob: bytes) -> Request:
        """A parked entry's request again (raises when it does not decode)."""
        # our own entries, read as Scrapy's disk queues read theirs
        return self.codec.decode(blob)

    def _unparkable(self, request: Request, why: str) -> None:
        self.stats.inc_value(f"{STAT}unserializable")
        if not self._warned_unserializable:
            self._warned_unserializable = True
            logger.warning(
                "scrapy-rep: %s cannot be kept in the shared store (%s): it waits in this "
                "process only, and a kill -9 would lose it (stats: %sunserializable; "
                "further ones at DEBUG)",
                request,
                why,
                STAT,
            )
        else:
            logger.debug("scrapy-rep: not parked in the shared store (%s): %s", why, request)
