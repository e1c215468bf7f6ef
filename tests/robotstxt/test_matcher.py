"""Unit tests of the matching primitives (scrapy_rep.robotstxt._matcher)."""

from __future__ import annotations

import pytest

from scrapy_rep.robotstxt._matcher import match_pieces, normalise_pattern, split_pattern
from scrapy_rep.robotstxt._robotstxt import normalise_path, plain_path, url_path
from tests.engine_helpers import compiled_robots


def matches(pattern: bytes, path: bytes) -> bool:
    pieces, anchored = split_pattern(normalise_pattern(pattern))
    return match_pieces(pieces, anchored, path)


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        (b"/", b"/", True),
        (b"/a", b"/abc", True),
        (b"/a$", b"/a", True),
        (b"/a$", b"/ab", False),
        (b"/*.gif$", b"/x/y.gif", True),
        (b"/*.gif$", b"/x/y.gifs", False),
        (b"/*.gif$", b"/.gif", True),
        (b"/a*b*c", b"/abc", True),
        (b"/a*b*c", b"/acb", False),
        (b"/a*b$", b"/ab-b", True),
        (b"/a*ab$", b"/ab", False),  # pieces may not overlap
        (b"/a*a$", b"/aa", True),
        (b"*", b"/anything", True),
        (b"/**x", b"/yx", True),
        (b"/x*", b"/x", True),
        (b"/*$", b"/", True),
        (b"$", b"/", False),
    ],
)
def test_match_pieces(pattern: bytes, path: bytes, expected: bool) -> None:
    assert matches(pattern, path) is expected


def test_pathological_pattern() -> None:
    pattern = b"/" + b"*a" * 10 + b"*b"
    assert not matches(pattern, b"/" + b"a" * 2000)
    assert matches(pattern, b"/" + b"a" * 2000 + b"b")


def test_repeated_wildcard_rules_are_kept_once() -> None:
    """A check that fails on a slow wildcard rule must not try each of its copies."""
    rule = "Disallow: /" + "*a" * 10 + "*b\n"
    body = "User-agent: *\nAllow: /*a\n" + rule * 5000 + "Allow: /" + "*a" * 10 + "*b\n"
    robots = compiled_robots(body)
    group = robots._groups["*"]
    assert isinstance(group, tuple)
    assert len(group[5]) == 3  # "/*a", the disallow once, the allow of the same length
    assert robots.allowed("/" + "a" * 2000, "bot")  # only "Allow: /*a" matches
    decision = robots.explain("/" + "a" * 20 + "b", "bot")
    assert (decision.allowed, decision.line) == (True, 5003)  # allow wins the tie
    assert robots.explain("/x", "bot").reason == "no-matching-rule"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"/plain", b"/plain"),
        (b"/%7ejoe", b"/~joe"),
        (b"/%7Ejoe", b"/~joe"),
        (b"/a%2fb", b"/a%2Fb"),
        (b"/%e3%83%84", b"/%E3%83%84"),
        ("/ツ".encode(), b"/%E3%83%84"),
        (b"/caf\xe9", b"/caf%E9"),
        (b"/%2A", b"/%2A"),
        (b"/a$b$", b"/a%24b$"),
        # a "%" without two hex digits is a literal "%" (SPEC "encoding", Google)
        (b"/100%", b"/100%25"),
        (b"/%zz", b"/%25zz"),
        (b"/%4", b"/%254"),
        (b"/%%41", b"/%25A"),
        # octets that may not appear in a URI are escaped (RFC 9309 §2.2.2)
        (b"/a b", b"/a%20b"),
        (b'/"<>\\^`{|}', b"/%22%3C%3E%5C%5E%60%7B%7C%7D"),
        (b"/\x01\x7f", b"/%01%7F"),
        (b"/a b$", b"/a%20b$"),
        (b"/$$$", b"/%24%24$"),
        (b"/%7e" * 3, b"/~" * 3),
    ],
)
def test_normalise_pattern(raw: bytes, expected: bytes) -> None:
    assert normalise_pattern(raw) == expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/plain?q=1", b"/plain?q=1"),
        ("/%62%61%7A", b"/baz"),
        ("/a%2Fb", b"/a%2Fb"),
        ("/a*b$", b"/a%2Ab%24"),
        ("/ü", b"/%C3%BC"),
        ("/%c3%bc", b"/%C3%BC"),
    ],
)
def test_normalise_path(path: str, expected: bytes) -> None:
    assert normalise_path(path) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://e.com/a/b?c=d#frag", "/a/b?c=d"),
        ("https://e.com", "/"),
        ("https://e.com?q", "/?q"),
        ("https://e.com#f", "/"),
        ("HTTP://user@e.com:8080/p;x", "/p;x"),
        ("//e.com/p", "/p"),
        ("/p#f", "/p"),
        ("p/q", "/p/q"),
        ("", "/"),
    ],
)
def test_url_path(url: str, expected: str) -> None:
    assert url_path(url) == expected
    assert plain_path(url) == expected.encode()


def test_plain_path_slow_path_agrees() -> None:
    for url in ("https://e.com/%7e?x=%2f", "https://e.com/é#x", "/a*b", "https://e.com/$"):
        assert plain_path(url) == normalise_path(url_path(url))
