"""Page-level directives: X-Robots-Tag lines, robots meta tags, rel links, and limits."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from scrapy_rep.robotstxt import NofollowLinks, PageDirectives, page_directives
from scrapy_rep.robotstxt._page import (
    MAX_ITEMS,
    MAX_META_TAGS,
    parse_unavailable_after,
)

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def headers(*lines: str | bytes, token: str = "MyBot") -> PageDirectives:
    return page_directives(lines, None, token, now=NOW)


def meta(body: bytes, token: str = "MyBot") -> PageDirectives:
    return page_directives((), body, token, now=NOW)


# -- X-Robots-Tag ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        # a line without a token applies to every crawler
        ((b"noindex",), ("noindex",)),
        ((b"noindex, nofollow",), ("nofollow", "noindex")),
        # names are case-insensitive, whitespace around items ignored
        ((b"  NoIndex ,NOFOLLOW  ",), ("nofollow", "noindex")),
        # a line for our token (case-insensitive) applies
        ((b"mybot: nofollow",), ("nofollow",)),
        ((b"MYBOT:noindex",), ("noindex",)),
        # a line for another crawler does not
        ((b"otherbot: noindex, nofollow",), ()),
        # a folded line switches token part-way
        ((b"otherbot: noindex, mybot: nofollow",), ("nofollow",)),
        ((b"mybot: nofollow, otherbot: noindex",), ("nofollow",)),
        # several lines: the union
        ((b"noarchive", b"mybot: nosnippet"), ("noarchive", "nosnippet")),
        # none = noindex + nofollow
        ((b"none",), ("nofollow", "noindex", "none")),
        # all, index, follow add nothing, and never undo a restriction
        ((b"all",), ("all",)),
        ((b"index, follow", b"noindex"), ("follow", "index", "noindex")),
        # valued directives are directives, not tokens
        ((b"max-snippet: 20, max-image-preview: large",), ("max-image-preview", "max-snippet")),
        ((b"mybot: max-snippet: -1",), ("max-snippet",)),
        # unknown directives are recorded
        ((b"noai, noimageai, somethingnew",), ("noai", "noimageai", "somethingnew")),
        # str lines work as bytes do; empty items are skipped
        (("noindex,,  ,",), ("noindex",)),
        ((b"",), ()),
    ],
)
def test_header_lines(lines: tuple[bytes, ...], expected: tuple[str, ...]) -> None:
    assert headers(*lines).effective() == expected


def test_header_sources_and_ignored_lines() -> None:
    page = headers(b"noindex", b"MyBot: nofollow", b"otherbot: noarchive")
    assert [s.to_json() for s in page.directives["noindex"]] == [
        {"from": "header", "scope": "*", "text": "noindex"}
    ]
    assert [s.to_json() for s in page.directives["nofollow"]] == [
        {"from": "header", "scope": "MyBot", "text": "MyBot: nofollow"}
    ]
    assert [s.to_json() for s in page.ignored] == [
        {"from": "header", "scope": "otherbot", "text": "otherbot: noarchive"}
    ]
    assert "noarchive" not in page.directives
    assert page.why("nofollow") == "X-Robots-Tag: MyBot: nofollow"


def test_values_are_kept() -> None:
    page = headers(b"max-snippet: 20, max-video-preview:-1")
    assert page.values == {"max-snippet": "20", "max-video-preview": "-1"}


# -- unavailable_after -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # RFC 822 / 1123, with and without the weekday, with a named zone
        ("Wed, 25 Jun 2010 15:00:00 GMT", dt.datetime(2010, 6, 25, 15)),
        ("25 Jun 2010 15:00:00 PST", dt.datetime(2010, 6, 25, 23)),
        ("25 Jun 2010 15:00:00 +0200", dt.datetime(2010, 6, 25, 13)),
        # RFC 850
        ("Wednesday, 25-Jun-10 15:00:00 GMT", dt.datetime(2010, 6, 25, 15)),
        # ISO 8601: a date, a UTC time, an offset, no zone (read as UTC)
        ("2010-06-25", dt.datetime(2010, 6, 25)),
        ("2010-06-25T15:00:00Z", dt.datetime(2010, 6, 25, 15)),
        ("2010-06-25T15:00:00+02:00", dt.datetime(2010, 6, 25, 13)),
        ("2010-06-25T15:00:00", dt.datetime(2010, 6, 25, 15)),
    ],
)
def test_unavailable_after_formats(text: str, expected: dt.datetime) -> None:
    assert parse_unavailable_after(text) == expected.replace(tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("text", ["", "soon", "2010-13-45", "32 Foo 2010", "Wed, "])
def test_unavailable_after_bad_dates(text: str) -> None:
    assert parse_unavailable_after(text) is None


def test_past_unavailable_after_means_noindex_future_does_not() -> None:
    past = headers(b"unavailable_after: Wednesday, 25-Jun-10 15:00:00 GMT, nofollow")
    assert past.noindex and past.expired
    assert past.effective() == ("nofollow", "noindex", "unavailable_after")
    assert past.values["unavailable_after"] == "Wednesday, 25-Jun-10 15:00:00 GMT"
    assert "unavailable_after" in past.why("noindex")
    future = headers(b"mybot: unavailable_after: 2030-01-01")
    assert not future.noindex
    assert future.unavailable_after == dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)


def test_bad_date_is_reported_not_fatal() -> None:
    page = headers(b"unavailable_after: next tuesday, nofollow")
    assert page.nofollow and not page.noindex
    assert "unavailable_after" not in page.directives
    assert page.issues == ("unavailable_after: unparseable date 'next tuesday', ignored",)


def test_earliest_date_wins() -> None:
    page = headers(b"unavailable_after: 2031-01-01", b"unavailable_after: 2030-01-01")
    assert page.unavailable_after == dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)


# -- meta tags ---------------------------------------------------------------------------


def page(head: bytes, body: bytes = b"<p>text</p>") -> bytes:
    return b"<!doctype html><html><head><title>t</title>" + head + b"</head><body>" + body


@pytest.mark.parametrize(
    ("html", "expected"),
    [
        (page(b'<meta name="robots" content="noindex, nofollow">'), ("nofollow", "noindex")),
        # names and content are case-insensitive; quotes optional
        (page(b"<META NAME=ROBOTS CONTENT=NOINDEX>"), ("noindex",)),
        (page(b"<meta content='nofollow' name='Robots'/>"), ("nofollow",)),
        # our token's own tag applies; another crawler's does not
        (page(b'<meta name="mybot" content="none">'), ("nofollow", "noindex", "none")),
        (page(b'<meta name="otherbot" content="noindex">'), ()),
        # other meta tags are not read, even when their content says noindex
        (page(b'<meta name="description" content="noindex robots">'), ()),
        # a meta tag in the body is not read
        (page(b"", b'<meta name="robots" content="noindex">'), ()),
        # a commented-out or scripted tag is not a tag
        (page(b'<!-- <meta name="robots" content="noindex"> -->'), ()),
        (page(b'<script>x="<meta name=robots content=noindex>"</script>'), ()),
        # several tags: the union; entities decoded
        (
            page(b'<meta name="robots" content="noarchive"><meta name="MyBot" content="nofollow">'),
            ("noarchive", "nofollow"),
        ),
        (page(b'<meta name="robots" content="noindex&#44; nofollow">'), ("nofollow", "noindex")),
        # a page without </head> ends its head at <body>; none at all: the whole page
        (b'<html><meta name="robots" content="noindex"><body><p>x', ("noindex",)),
        (b'<meta name="robots" content="noindex">', ("noindex",)),
        # the head's end in any case
        (
            b"<HTML><HEAD><META NAME=ROBOTS CONTENT=NOINDEX></Head><Body><meta name=robots "
            b"content=nofollow>",
            ("noindex",),
        ),
        (
            b"<html><head><meta name=robots content=noindex></HEAD><BODY><meta name=robots "
            b"content=nofollow>",
            ("noindex",),
        ),
    ],
)
def test_meta_tags(html: bytes, expected: tuple[str, ...]) -> None:
    assert meta(html).effective() == expected


def test_meta_source() -> None:
    found = meta(page(b'<meta name="MyBot" content="NoIndex">'))
    (source,) = found.directives["noindex"]
    assert source.to_json() == {
        "from": "meta",
        "scope": "MyBot",
        "text": '<meta name="MyBot" content="NoIndex">',
    }
    assert found.why("noindex") == 'meta tag <meta name="MyBot" content="NoIndex">'


def test_header_and_meta_combine() -> None:
    found = page_directives(
        [b"otherbot: nofollow", b"noarchive"],
        page(b'<meta name="robots" content="noindex">'),
        "mybot",
        now=NOW,
    )
    assert found.effective() == ("noarchive", "noindex")
    assert [s.where for s in found.directives["noarchive"]] == ["header"]
    assert [s.where for s in found.directives["noindex"]] == ["meta"]
    assert found.to_json()["noindex"] is True
    assert found.to_json()["nofollow"] is False


# -- rel links ---------------------------------------------------------------------------


def links(body: bytes) -> NofollowLinks:
    return NofollowLinks(body, "http://site.test/dir/page").scan()


def test_links_only_nofollow() -> None:
    scanned = links(
        b'<a href="/a" rel="nofollow">a</a>'
        b'<a href="/b" rel="nofollow ugc">b</a><a href="/b">b again</a>'
        b"<A HREF='c' REL='NoFollow'>c</A>"
        b'<area href="/d" rel="sponsored nofollow">'
        b'<a href="/e" rel="ugc">e</a><a href="/f">f</a>'
        b'<a href="http://site.test/g" rel="nofollow">g</a><a href="/g#frag">g</a>'
    )
    assert scanned.nofollow_only("http://site.test/a")
    assert not scanned.nofollow_only("http://site.test/b")  # also linked without it
    assert scanned.nofollow_only("http://site.test/dir/c")  # relative, upper case
    assert scanned.nofollow_only("http://site.test/d#x")  # area; fragment ignored
    assert not scanned.nofollow_only("http://site.test/e")  # ugc alone: followed
    assert not scanned.nofollow_only("http://site.test/f")
    assert not scanned.nofollow_only("http://site.test/g")  # written differently
    assert not scanned.nofollow_only("http://site.test/unlinked")
    assert scanned.rel_counts == {"nofollow": 5, "ugc": 2, "sponsored": 1}


def test_page_without_nofollow_is_not_scanned() -> None:
    scanned = NofollowLinks(b'<a href="/x" rel="ugc">x</a>' * 10, "http://site.test/")
    assert scanned.scan_step()  # one look, and nothing to read: no "nofollow" anywhere
    assert scanned.rel_counts == {}
    assert not scanned.nofollow_only("http://site.test/x")


def test_scan_in_steps_reads_every_link() -> None:
    body = b"".join(
        b'<a href="/p%d" rel="nofollow">p</a><p>%s</p>' % (i, b"x" * 50) for i in range(500)
    )
    scanner = NofollowLinks(body, "http://site.test/")
    steps = 0
    while not scanner.scan_step(max_bytes=1000):
        steps += 1
    assert steps > 10
    assert all(scanner.nofollow_only(f"http://site.test/p{i}") for i in range(500))


# -- hostile input -----------------------------------------------------------------------
# Bounded, linear work: each case is also timed in benchmarks/bench_page.py; here the
# bounds are on what is kept, and on a generous wall-clock limit that a quadratic
# algorithm would exceed by far (never a tight timing).


def test_ten_megabyte_page_with_100000_links() -> None:
    parts = [b'<a href="/p%d">l</a>' % i for i in range(100_000)]
    parts.append(b'<a href="/hidden" rel="nofollow">h</a>')
    body = page(b"", b"".join(parts))
    body += b"<p>" + b"x" * (10_000_000 - len(body)) + b"</p>"
    started = time.perf_counter()
    assert meta(body).effective() == ()
    scanned = links(body)
    assert time.perf_counter() - started < 30
    assert scanned.nofollow_only("http://site.test/hidden")
    assert not scanned.nofollow_only("http://site.test/p5")


def test_10000_meta_tags_are_bounded() -> None:
    tags = b"".join(b'<meta name="robots" content="x%d, noindex">' % i for i in range(10_000))
    found = meta(page(tags))
    assert found.noindex
    assert len(found.directives) <= 64
    assert f"more than {MAX_META_TAGS} robots meta tags: the rest are ignored" in found.issues


def test_16k_header_lines_are_bounded() -> None:
    line = (b"noindex, " * 2000)[:16384]
    found = headers(line, line, b"a: b, " * 3000)
    assert found.noindex
    assert len(found.directives["noindex"]) == 1  # one source per line, deduplicated
    assert f"more than {MAX_ITEMS} directives in one line: the rest ignored" in found.issues


def test_unclosed_comment_and_tags_end_the_head() -> None:
    assert (
        meta(page(b"<!-- " * 10_000 + b'<meta name="robots" content="noindex">')).effective() == ()
    )
    assert meta(b"<head><meta name=robots content=noindex").effective() == ()


def test_garbage_directive_names_are_reported() -> None:
    found = headers("noindex, <script>, " + "x" * 100)
    assert found.effective() == ("noindex",)
    assert len(found.issues) == 2


def test_text_and_tags_longer_than_a_step() -> None:
    # a megabyte without ">" (no tag ends there) and a link tag of a megabyte: each step
    # still reads about max_bytes, and both links are found
    body = (
        b"<p>" + b"x" * 1_000_000 + b'<a href="/after-text" rel="nofollow">t</a>'
        b'<a rel="nofollow" href="/huge" title="' + b"y" * 1_000_000 + b'">h</a>'
    )
    scanner = NofollowLinks(body, "http://site.test/")
    positions = []
    while not scanner.scan_step(max_bytes=4096):
        positions.append(scanner.pos)
    assert scanner.nofollow_only("http://site.test/after-text")
    assert scanner.nofollow_only("http://site.test/huge")
    assert len(positions) > 200  # the text was skipped in steps, not read in one
