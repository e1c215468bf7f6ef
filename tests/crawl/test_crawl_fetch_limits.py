"""Real crawls for a robots.txt larger than the size limit, announced or compressed.

RFC 9309 2.5: a file over the limit is not an error, its first ``REP_MAX_SIZE`` bytes
are parsed. Whatever ``Content-Length`` announces, directly or at the end of redirects,
the download stops at the limit; a compressed file (gzip, deflate, brotli, zstd, a
decompression bomb included) is decoded up to the limit and its first lines apply.
"""

from __future__ import annotations

import base64
import gzip
import logging
from typing import Any

import pytest
import pytest_twisted

from scrapy_rep.crawl.robots_body import DECODERS, accept_encoding
from tests.support.crawl import DISALLOW_PRIVATE, REP, pages_of
from tests.support.mockserver import filler

HEAD = "User-agent: *\nDisallow: /private/\n"
# 64 x the default REP_MAX_SIZE is where Scrapy's size limit for the robots.txt request
# used to cancel the download; far beyond it, nothing but the announced size changes.
HUGE = 1024 * 1024 * 1024
BOMB_SIZE = 200 * 1024 * 1024 + 1
# Serving and decoding a bomb or a long file can take a while on a busy machine; a
# fetch timeout would mean a second download, which is no part of these claims.
SLOW_OK = {**REP, "REP_FETCH_TIMEOUT": 30}


def assert_first_part_applied(mockserver: Any, crawler: Any, host: str) -> None:
    """/private/ of ``host`` was forbidden by the file's first lines, the rest fetched,
    robots.txt downloaded once, and the cut counted."""
    assert pages_of(mockserver, host) == ["/public"]
    assert mockserver.count(host, "/robots.txt") == 1
    assert crawler.stat("robotstxt/truncated") == 1
    assert crawler.stat("robotstxt/forbidden") == 1
    assert crawler.stat("robotstxt/response_status_count/200") == 1
    assert not crawler.stat("robotstxt/unreachable")
    assert not crawler.stat("robotstxt/fetch_refused")
    assert not crawler.messages(logging.ERROR)


@pytest.mark.parametrize("hops", [0, 2], ids=["direct", "after-redirects"])
@pytest_twisted.ensureDeferred
async def test_announced_size_over_the_limit_reads_the_first_part(
    mockserver: Any, run_crawl: Any, host: str, hops: int
) -> None:
    """A 1 GiB Content-Length (the body generated while sent): the download stops at
    REP_MAX_SIZE and the first lines apply, instead of a cancelled download, an
    unreachable origin and a robots.txt download at every backoff."""
    big = {"stream_size": HUGE, "body": HEAD}
    if hops:
        spec = {
            "robots": {"redirect": mockserver.url(host, "/hop-1")},
            "pages": {
                "/hop-1": {"redirect": mockserver.url(host, "/hop-2")},
                "/hop-2": big,
            },
        }
    else:
        spec = {"robots": big}
    mockserver.configure(host, spec)
    urls = [mockserver.url(host, p) for p in ("/private/x", "/public")]
    crawler = await run_crawl(urls, settings=SLOW_OK)
    if hops:
        assert pages_of(mockserver, host) == ["/hop-1", "/hop-2", "/public"]
        assert crawler.stat("robotstxt/redirect_count") == hops
        assert mockserver.count(host, "/robots.txt") == 1
        assert crawler.stat("robotstxt/truncated") == 1
        assert crawler.stat("robotstxt/forbidden") == 1
        assert not crawler.stat("robotstxt/unreachable")
    else:
        assert_first_part_applied(mockserver, crawler, host)
    assert crawler.logged("its first 512000 bytes apply", logging.INFO)


def _codings() -> list[Any]:
    return [
        pytest.param(
            coding,
            marks=pytest.mark.skipif(
                coding.encode() not in DECODERS, reason=f"no {coding} module installed"
            ),
        )
        for coding in ("gzip", "deflate", "br", "zstd")
    ]


@pytest.mark.parametrize("coding", _codings())
@pytest_twisted.ensureDeferred
async def test_compression_bomb_is_decoded_up_to_the_limit(
    mockserver: Any, run_crawl: Any, host: str, coding: str
) -> None:
    """200 MiB once decoded, Disallow: /private/ in its first lines: decoded up to
    REP_MAX_SIZE, in bounded memory, and its rules apply (Scrapy's compression
    middleware refused it, which read as "refused by the crawler": all allowed). The
    request advertises only the codings scrapy-rep can decode."""
    mockserver.configure(
        host, {"robots": {"body": HEAD, "bomb": {"coding": coding, "size": BOMB_SIZE}}}
    )
    urls = [mockserver.url(host, p) for p in ("/private/x", "/public")]
    crawler = await run_crawl(urls, settings=SLOW_OK)
    assert_first_part_applied(mockserver, crawler, host)
    assert crawler.logged(f"once decoded from {coding}: its first 512000 bytes apply")
    (robots,) = [e for e in mockserver.log(host) if e["path"] == "/robots.txt"]
    assert robots["headers"]["Accept-Encoding"] == accept_encoding().decode()
    assert coding in robots["headers"]["Accept-Encoding"]


@pytest_twisted.ensureDeferred
async def test_large_compressed_file_is_cut_at_the_limit_once_decoded(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """A 5 MiB gzip file: the limit counts decoded bytes; a rule within them applies,
    one beyond them does not."""
    mockserver.configure(
        host,
        {
            "robots": {
                "size": 5 * 1024 * 1024,
                "body": "User-agent: *\nDisallow: /early\n",
                "tail": "Disallow: /beyond\n",
                "gzip": True,
            }
        },
    )
    urls = [mockserver.url(host, p) for p in ("/early", "/beyond", "/ok")]
    crawler = await run_crawl(urls, settings=SLOW_OK)
    assert sorted(pages_of(mockserver, host)) == ["/beyond", "/ok"]
    assert mockserver.count(host, "/robots.txt") == 1
    assert crawler.stat("robotstxt/truncated") == 1
    assert crawler.stat("robotstxt/forbidden") == 1


@pytest_twisted.ensureDeferred
async def test_truncated_compressed_stream_yields_its_first_part(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """A gzip stream that ends half way (a complete HTTP response): the part it decodes
    to applies, and the file counts as cut."""
    whole = gzip.compress(filler(64 * 1024, DISALLOW_PRIVATE))
    half = base64.b64encode(whole[: len(whole) // 2]).decode("ascii")
    mockserver.configure(
        host, {"robots": {"body_b64": half, "headers": {"Content-Encoding": "gzip"}}}
    )
    urls = [mockserver.url(host, p) for p in ("/private/x", "/public")]
    crawler = await run_crawl(urls, settings=REP)
    assert_first_part_applied(mockserver, crawler, host)


@pytest_twisted.ensureDeferred
async def test_plain_file_labelled_compressed_is_parsed_as_it_came(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """``Content-Encoding: gzip`` on a plain file: its bytes apply, with a WARNING and
    a stats key (it used to fail the download: the origin was unreachable)."""
    mockserver.configure(host, {"robots": {"body": HEAD, "headers": {"Content-Encoding": "gzip"}}})
    urls = [mockserver.url(host, p) for p in ("/private/x", "/public")]
    crawler = await run_crawl(urls, settings=REP)
    assert pages_of(mockserver, host) == ["/public"]
    assert mockserver.count(host, "/robots.txt") == 1
    assert crawler.stat("robotstxt/decode_error") == 1
    assert crawler.stat("robotstxt/forbidden") == 1
    assert not crawler.stat("robotstxt/unreachable")
    assert crawler.logged("does not decode", logging.WARNING)
