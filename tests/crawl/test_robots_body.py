"""The bounded decoders of crawl/robots_body.py, byte for byte (the crawls that use them
are in test_crawl_fetch_limits.py): what a limit, a cut or a broken stream gives."""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Callable

import pytest

from scrapy_rep.crawl import robots_body
from scrapy_rep.crawl.robots_body import DECODERS, content_codings, decode

LIMIT = 512_000
HEAD = b"User-agent: *\nDisallow: /private/\n"
BOMB = HEAD + b"\n" * (20 * 1024 * 1024)


def _compressors() -> dict[str, Callable[[bytes], bytes]]:
    found: dict[str, Callable[[bytes], bytes]] = {"gzip": gzip.compress, "deflate": zlib.compress}
    if b"br" in DECODERS:
        import brotli

        found["br"] = brotli.compress
    if b"zstd" in DECODERS:
        try:
            from compression import zstd  # type: ignore[import-not-found]
        except ImportError:
            from backports import zstd  # type: ignore[no-redef]
        found["zstd"] = zstd.compress
    return found


COMPRESSORS = _compressors()


@pytest.mark.parametrize("coding", sorted(COMPRESSORS))
def test_a_bomb_decodes_to_the_limit(coding: str) -> None:
    decoded = decode(COMPRESSORS[coding](BOMB), [coding.encode()], LIMIT)
    assert decoded == robots_body.Decoded(BOMB[:LIMIT], cut=True)


@pytest.mark.parametrize("coding", sorted(COMPRESSORS))
def test_a_file_that_does_not_compress_fits_in_twice_the_limit(coding: str) -> None:
    """What the download keeps of a compressed body (2 x REP_MAX_SIZE) holds the
    limit's worth of even random bytes."""
    data = os.urandom(LIMIT + 100_000)
    wire = COMPRESSORS[coding](data)[: 2 * LIMIT]
    assert decode(wire, [coding.encode()], LIMIT, cut=True).body == data[:LIMIT]


@pytest.mark.parametrize("coding", sorted(COMPRESSORS))
def test_a_whole_small_file_is_not_cut(coding: str) -> None:
    assert decode(COMPRESSORS[coding](HEAD), [coding.encode()], LIMIT) == robots_body.Decoded(
        HEAD, cut=False
    )


@pytest.mark.parametrize("coding", ["gzip", "deflate", "zstd"])
def test_a_stream_cut_part_way_gives_its_decoded_part(coding: str) -> None:
    if coding not in COMPRESSORS:
        pytest.skip(f"no {coding} module")
    # random paths: zstd decodes whole blocks (up to 128 KiB decoded), so half of a
    # stream that compresses well may not complete its first block
    data = HEAD + b"".join(b"Disallow: /%s\n" % os.urandom(8).hex().encode() for _ in range(20_000))
    wire = COMPRESSORS[coding](data)
    decoded = decode(wire[: len(wire) // 2], [coding.encode()], LIMIT)
    assert decoded.cut
    assert decoded.body.startswith(HEAD)
    assert data.startswith(decoded.body)


def test_gzip_members_and_raw_deflate() -> None:
    two = gzip.compress(HEAD) + gzip.compress(b"Allow: /x\n")
    assert decode(two, [b"gzip"], LIMIT).body == HEAD + b"Allow: /x\n"
    raw = zlib.compressobj(wbits=-15)
    assert decode(raw.compress(HEAD) + raw.flush(), [b"deflate"], LIMIT).body == HEAD


def test_layers_are_undone_last_first() -> None:
    wire = zlib.compress(gzip.compress(HEAD))
    assert content_codings([b"gzip, Deflate", b"identity"]) == [b"gzip", b"deflate"]
    assert decode(wire, content_codings([b"gzip, deflate"]), LIMIT).body == HEAD


def test_what_does_not_decode_is_an_error_with_nothing_decoded() -> None:
    decoded = decode(HEAD, [b"gzip"], LIMIT)
    assert decoded.body == b""
    assert decoded.error is not None and decoded.error.startswith("zlib:")


def test_zstandard_when_the_standard_module_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    zstandard = pytest.importorskip(
        "zstandard",
        reason="the optional zstandard package is not installed (this test covers the "
        "fallback to it where neither compression.zstd nor backports.zstd is present)",
    )
    monkeypatch.setattr(robots_body, "_ZSTANDARD", zstandard)
    wire = zstandard.ZstdCompressor().compress(BOMB)
    assert robots_body._zstandard(wire, LIMIT) == robots_body.Decoded(BOMB[:LIMIT], cut=True)
    two = zstandard.ZstdCompressor().compress(HEAD) + zstandard.ZstdCompressor().compress(b"x")
    assert robots_body._zstandard(two, LIMIT).body == HEAD + b"x"
    assert robots_body._zstandard(HEAD, LIMIT).error is not None
