"""How the shared stores (SQLite, Redis) put an ``OriginRecord`` into bytes.

The record's own encoding (``encode_record``: versioned JSON, body as base64) is
zlib-compressed on the way in. robots.txt files compress 3-5x; without it a ~2 KB body
becomes a ~2.9 KB row, and SQLite then fits one row per 4 KiB page.

Reading accepts both compressed and plain JSON values and trusts neither: anything
that does not decompress, would decompress to more than the store's limit, or does not
decode is a miss (``None``). The limit is enforced while zlib streams (``max_length``),
so a zip bomb in a shared store costs at most the limit in time and memory, never what
it would expand to.
"""

from __future__ import annotations

import logging
import zlib

from scrapy_rep.policy.config import RFC_MIN_PARSE_SIZE
from scrapy_rep.policy.records import OriginRecord, decode_record, encode_record

_ZLIB_LEVEL = 6  # as small as level 9 for robots.txt, and faster
# The JSON around the body: field names, timestamps, a last_outcome of a few words.
_RECORD_OVERHEAD = 16 * 1024
logger = logging.getLogger(__name__)
_warned_unreadable: set[str] = set()


def record_limit(max_size: int) -> int:
    """The largest encoded record a store holding bodies of at most ``max_size`` bytes
    (``REP_MAX_SIZE``) can have written: base64 grows the body by 4/3."""
    return (max_size + 2) // 3 * 4 + _RECORD_OVERHEAD


#: The limit for the default REP_MAX_SIZE (500 KiB body, ~700 KiB record).
MAX_DECODED = record_limit(RFC_MIN_PARSE_SIZE)


def pack_record(record: OriginRecord) -> bytes:
    return zlib.compress(encode_record(record), _ZLIB_LEVEL)


def inflate(data: bytes, limit: int = MAX_DECODED) -> bytes | None:
    """Decompress ``data`` unless it is corrupt, truncated or larger than ``limit``;
    zlib stops producing output at ``limit + 1`` bytes whatever the input says."""
    try:
        inflater = zlib.decompressobj()
        out = inflater.decompress(data, limit + 1)
    except zlib.error:
        return None
    if len(out) > limit or inflater.unconsumed_tail or not inflater.eof:
        return None  # too big, or truncated
    return out


def unpack_record(raw: object, limit: int = MAX_DECODED) -> OriginRecord | None:
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape")
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        return None
    data = bytes(raw)
    if data[:1] == b"{":  # JSON documents start with "{"; everything else must be zlib
        return decode_record(data) if len(data) <= limit else None
    inflated = inflate(data, limit)
    return None if inflated is None else decode_record(inflated)


def unpack_stored(raw: object, store: str, limit: int = MAX_DECODED) -> OriginRecord | None:
    """``unpack_record`` for a value read from ``store``: an entry that is there but
    unreadable (corrupt, or written by another version) is a miss, and the first one
    per store is logged so that an operator learns the store holds junk."""
    record = unpack_record(raw, limit)
    if record is None and isinstance(raw, (bytes, bytearray, memoryview, str)):
        warn_unreadable(store)
    return record


def warn_unreadable(store: str) -> None:
    """The first unreadable entry of ``store`` is logged; later ones are not."""
    if store not in _warned_unreadable:
        _warned_unreadable.add(store)
        logger.warning(
            "scrapy-rep: %s holds an unreadable robots.txt entry (corrupt, or written by "
            "another version); treating it as a miss and fetching robots.txt again. "
            "Further unreadable entries are not logged.",
            store,
        )
