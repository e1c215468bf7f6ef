"""Decode a compressed robots.txt body, in bounded memory, up to the size limit.

RFC 9309 2.5: a file larger than the limit is not an error: its first part is parsed.
Scrapy's HttpCompressionMiddleware refuses a decompression bomb whole (so everything would
be allowed); every decoder here stops at the limit (docs/behaviour.md).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

# No single call of a decoder allocates more than this beyond the limit.
_STEP = 64 * 1024
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class Decoded:
    """A decoded prefix of a body: ``cut`` when the decoded file goes on beyond it."""

    body: bytes
    cut: bool
    error: str | None = None  # why decoding broke off, if it did


class _Output:
    """Collects decoded bytes up to ``limit``; ``full`` once more than that arrived."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[bytes] = []
        self.size = 0
        self.full = False

    def room(self) -> int:
        """How many bytes to ask a decoder for: one past the limit tells "there is more"."""
        return min(_STEP, self.limit + 1 - self.size)

    def add(self, data: bytes) -> None:
        self.parts.append(data)
        self.size += len(data)
        self.full = self.size > self.limit

    def result(self, *, ended: bool, error: str | None = None) -> Decoded:
        body = b"".join(self.parts)[: self.limit]
        return Decoded(body, self.full or not ended, error)


def _frames(
    data: bytes,
    limit: int,
    new_decoder: Callable[[], Any],
    next_frame: Callable[[bytes], bool],
    error: type[Exception],
    name: str,
) -> Decoded:
    """A zlib or zstd stream in bounded steps; the bytes after its end are one more
    frame while ``next_frame(them)`` says so."""
    out = _Output(limit)
    decoder, pending = new_decoder(), data
    try:
        while not out.full:
            chunk = decoder.decompress(pending, out.room())
            # zlib hands back the input it did not take; zstd keeps it inside
            pending = getattr(decoder, "unconsumed_tail", b"")
            out.add(chunk)
            if decoder.eof:
                rest = decoder.unused_data
                if not next_frame(rest):
                    return out.result(ended=True)  # trailing bytes are no part of it
                decoder, pending = new_decoder(), rest
            elif not chunk and not pending:
                break  # the input ended before the stream did
    except error as exc:
        return out.result(ended=False, error=f"{name}: {exc}")
    return out.result(ended=False)


def _zlib(data: bytes, limit: int, wbits: int, next_frame: Callable[[bytes], bool]) -> Decoded:
    return _frames(data, limit, lambda: zlib.decompressobj(wbits), next_frame, zlib.error, "zlib")


def _gzip(data: bytes, limit: int) -> Decoded:
    # a gzip file may hold several members (RFC 1952 2.2), decoded one after another
    return _zlib(data, limit, 16 + zlib.MAX_WBITS, lambda rest: rest.startswith(_GZIP_MAGIC))


def _deflate(data: bytes, limit: int) -> Decoded:
    # HTTP "deflate" is the zlib format (RFC 9110 8.4.1.2), but some servers send raw
    # deflate: as browsers do, a body without a zlib header is read as raw deflate.
    wrapped = len(data) >= 2 and (data[0] & 0x0F) == 8 and (data[0] << 8 | data[1]) % 31 == 0
    return _zlib(data, limit, zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS, lambda _: False)


def _import_first(*names: str) -> Any:
    for name in names:
        with contextlib.suppress(ImportError):
            return importlib.import_module(name)
    return None


def _bounded_brotli(module: Any) -> Any:
    """The brotli module, if its decompressor can bound its output (brotli 1.2+ and
    brotlicffi 1.2+ take ``output_buffer_limit``); an unbounded one could not stop a bomb."""
    if module is None:
        return None
    try:
        module.Decompressor().process(b"", output_buffer_limit=1)
    except TypeError:
        return None
    except Exception:  # an empty input may be an error: the argument worked
        pass
    return module


_BROTLI = _bounded_brotli(_import_first("brotli", "brotlicffi"))
# Python 3.14's compression.zstd, its backport (Scrapy's own choice), or zstandard.
_ZSTD_STDLIB = _import_first("compression.zstd", "backports.zstd")
_ZSTANDARD = None if _ZSTD_STDLIB is not None else _import_first("zstandard")


def _brotli(data: bytes, limit: int) -> Decoded:
    assert _BROTLI is not None
    out = _Output(limit)
    decoder = _BROTLI.Decompressor()
    try:
        out.add(decoder.process(data, output_buffer_limit=out.room()))
        while not out.full and not decoder.is_finished():
            chunk = decoder.process(b"", output_buffer_limit=out.room())
            if not chunk:
                break  # the input ended before the stream did
            out.add(chunk)
    except _BROTLI.error as exc:
        return out.result(ended=False, error=f"brotli: {exc}")
    return out.result(ended=decoder.is_finished())


def _zstd_stdlib(data: bytes, limit: int) -> Decoded:
    assert _ZSTD_STDLIB is not None
    # RFC 8878 3.1: a zstd stream may hold several frames, one after another
    zstd = _ZSTD_STDLIB
    return _frames(data, limit, zstd.ZstdDecompressor, bool, zstd.ZstdError, "zstd")


def _zstandard(data: bytes, limit: int) -> Decoded:
    # Its stream reader bounds each read; it ends quietly at the end of the input, so a
    # frame that ends early gives its decoded part without being flagged as cut.
    assert _ZSTANDARD is not None
    out = _Output(limit)
    reader = _ZSTANDARD.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
    try:
        while not out.full:
            chunk = reader.read(out.room())
            if not chunk:
                return out.result(ended=True)
            out.add(chunk)
    except _ZSTANDARD.ZstdError as exc:
        return out.result(ended=False, error=f"zstd: {exc}")
    return out.result(ended=False)


DECODERS: dict[bytes, Callable[[bytes, int], Decoded]] = {
    b"gzip": _gzip,
    b"x-gzip": _gzip,
    b"deflate": _deflate,
}
if _BROTLI is not None:
    DECODERS[b"br"] = _brotli
if _ZSTD_STDLIB is not None:
    DECODERS[b"zstd"] = _zstd_stdlib
elif _ZSTANDARD is not None:
    DECODERS[b"zstd"] = _zstandard


def accept_encoding() -> bytes:
    """The robots.txt request's ``Accept-Encoding``: the codecs decoded here."""
    return b", ".join(name for name in DECODERS if name != b"x-gzip")


def content_codings(values: Sequence[bytes]) -> list[bytes]:
    """The codings of ``Content-Encoding`` header values, in the order applied
    (RFC 9110 8.4), ``identity`` left out."""
    codings = (c.strip().lower() for value in values for c in value.split(b","))
    return [c for c in codings if c and c != b"identity"]


def decodable(codings: Sequence[bytes]) -> bool:
    return bool(codings) and all(c in DECODERS for c in codings)


def decode(body: bytes, codings: Sequence[bytes], limit: int, *, cut: bool = False) -> Decoded:
    """Undo ``codings``, last applied first, keeping at most ``limit`` bytes; ``cut``: the
    body itself is a prefix. A layer that breaks yields what it decoded, with ``error``."""
    data, truncated = body, cut
    for coding in reversed(codings):
        decoded = DECODERS[coding](data, limit)
        if decoded.error is not None:
            return Decoded(decoded.body, True, decoded.error)
        data = decoded.body
        truncated = truncated or decoded.cut
    return Decoded(data, truncated)
