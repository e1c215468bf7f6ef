"""How the shared stores (SQLite, Redis) put an ``OriginRecord`` into bytes.

The record's own encoding (``encode_record``: versioned JSON, body as base64) is
zlib-compressed on the way in. robots.txt files compress 3-5x; without it a ~2 KB body
becomes a ~2.9 KB row, and SQLite then fits one row per 4 KiB page.

Reading accepts both compressed and plain JSON values and trusts neither: anything
that does not decompress, decompresses to more than ``MAX_DECODED`` bytes (a zip bomb
in a shared store must not exhaust memory), or does not decode is a miss (``None``).
"""

from __future__ import annotations

import zlib

from scrapy_rep._records import OriginRecord, decode_record, encode_record

# Far above any real record: REP_MAX_SIZE is 500 KiB by default, ~680 KiB as base64.
MAX_DECODED = 64 * 1024 * 1024
_ZLIB_LEVEL = 6  # as small as level 9 for robots.txt, and faster


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
