"""How the shared stores (SQLite, Redis) put an ``OriginRecord`` into bytes.

The record's own encoding (``encode_record``: versioned JSON, body as base64) is
zlib-compressed on the way in. robots.txt files compress 3-5x; without it a ~2 KB body
becomes a ~2.9 KB row, and SQLite then fits one row per 4 KiB page.

Reading accepts both compressed and plain JSON values and trusts neither: anything
that does not decompress, decompresses to more than ``MAX_DECODED`` bytes (a zip bomb
in a shared store must not exhaust memory), or does not decode is a miss (``None``).
"""

from __future__ import annotations

import logging
import zlib

from scrapy_rep.policy.records import OriginRecord, decode_record, encode_record

# Far above any real record: REP_MAX_SIZE is 500 KiB by default, ~680 KiB as base64.
MAX_DECODED = 64 * 1024 * 1024
_ZLIB_LEVEL = 6  # as small as level 9 for robots.txt, and faster
logger = logging.getLogger(__name__)
_warned_unreadable: set[str] = set()


def pack_record(record: OriginRecord) -> bytes:
    return zlib.compress(encode_record(record), _ZLIB_LEVEL)


def unpack_record(raw: object) -> OriginRecord | None:
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape")
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        return None
    data = bytes(raw)
    if data[:1] != b"{":  # JSON documents start with "{"; everything else must be zlib
        try:
            inflater = zlib.decompressobj()
            data = inflater.decompress(data, MAX_DECODED)
            if inflater.unconsumed_tail or not inflater.eof:
                return None  # too big, or truncated
        except zlib.error:
            return None
    return decode_record(data)


def unpack_stored(raw: object, store: str) -> OriginRecord | None:
    """``unpack_record`` for a value read from ``store``: an entry that is there but
    unreadable (corrupt, or written by another version) is a miss, and the first one
    per store is logged so that an operator learns the store holds junk."""
    record = unpack_record(raw)
    present = isinstance(raw, (bytes, bytearray, memoryview, str))
    if record is None and present and store not in _warned_unreadable:
        _warned_unreadable.add(store)
        logger.warning(
            "scrapy-rep: %s holds an unreadable robots.txt entry (corrupt, or written by "
            "another version); treating it as a miss and fetching robots.txt again. "
            "Further unreadable entries are not logged.",
            store,
        )
    return record
