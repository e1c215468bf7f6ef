"""Unit tests of the matching primitives (scrapy_rep.robotstxt._matcher)."""

from __future__ import annotations

import re
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_rep.robotstxt._compile import DEDUP_FROM, prefix_parents
from scrapy_rep.robotstxt._matcher import (
    MANY_WILDCARDS,
    Group,
    match_pieces,
    split_pattern,
)
from scrapy_rep.robotstxt._normalise import (
    normalise_path,
    normalise_pattern,
    normalised_rules,
    plain_path,
    url_path,
)
from tests.support.engine import compiled_robots


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
    assert isinstance(group, Group)
    assert len(group.wild_patterns) == 3  # "/*a", the disallow once, the allow of the same length
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
        # a "%" without two hex digits is a literal "%" (docs/rfc.md, Google)
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


# pieces that normalisation changes, or must leave alone, and their neighbours
_RAW_PIECES = st.sampled_from(
    [b"a", b"/", b"*", b"$", b"%", b"%7e", b"%7E", b"%2f", b"%2F", b"%4", b"%zz", b"%%", b"%25",
     b"\xc3\xa9", b"\xe3\x81", b"\xff", b"\x00", b" ", b"<", b"\r", b"%24"]
)  # fmt: skip


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.lists(_RAW_PIECES, max_size=6).map(b"".join), min_size=1, max_size=12),
    st.dictionaries(st.integers(0, 14), st.text(max_size=3), max_size=3),
)
def test_normalised_rules_normalise_each_pattern_as_written(
    raw: list[bytes], known: dict[int, str]
) -> None:
    """All the rules at once (C-level passes over them joined) give what
    normalise_pattern gives for each, and record each changed rule as written, a
    line known already keeping its text."""
    marks = array("q", [(n // 2) << 1 for n in range(len(raw))])  # two rules a line
    originals = dict(known)
    fixed, joined = normalised_rules(raw, marks, originals)
    assert fixed == [normalise_pattern(p) for p in raw]
    assert joined == b"\n".join(fixed)
    expected = dict(known)
    for pattern, new, mark in zip(raw, fixed, marks, strict=True):
        if new != pattern:
            expected.setdefault(mark >> 1, pattern.decode("utf-8", "replace"))
    assert originals == expected


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


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=5).map(lambda b: b.replace(b"\n", b"")), max_size=40))
def test_parents_are_the_longest_proper_prefixes(raw: list[bytes]) -> None:
    """prefix_parents walks only runs of nested guards; brute force agrees (octets up
    to 0xff included, where "the first string after a prefix" needs care)."""
    guards = sorted(set(raw))
    found = prefix_parents(guards)
    for i, guard in enumerate(guards):
        prefixes = [j for j, other in enumerate(guards[:i]) if guard.startswith(other)]
        longest = max(prefixes, key=lambda j: len(guards[j]), default=-1)
        assert found[i] == longest


def test_large_group_keeps_the_first_copy_of_each_repeated_rule() -> None:
    """From DEDUP_FROM rules a group drops repeated rules before compiling: the
    verdicts and the lines explain() names are those of the first copies."""
    rules = ["Disallow: /a*b", "Allow: /a*b", "Disallow: /lit", "Allow: /x", "Disallow: /lit"]
    filler = [f"Disallow: /f{n}" for n in range(DEDUP_FROM)]
    body = "User-agent: *\n" + "\n".join(rules * 3 + filler + rules) + "\n"
    robots = compiled_robots(body)
    group = robots._groups["*"]
    assert isinstance(group, Group)
    assert len(group.wild_patterns) == 2  # the two "/a*b" rules, one of each kind
    # lines: 1 is "User-agent"; the first copies are on lines 2-6, the filler from 17
    expect = {"/axb": (True, 3), "/lit/1": (False, 4), "/x": (True, 5), "/f7": (False, 24)}
    for path, (allowed, line) in expect.items():
        decision = robots.explain(path, "bot")
        assert (decision.allowed, decision.line) == (allowed, line), path
        assert robots.allowed(path, "bot") is allowed


def _full_match(pattern: str, path: str) -> bool:
    anchored = pattern.endswith("$")
    regex = ".*".join(re.escape(p) for p in (pattern[:-1] if anchored else pattern).split("*"))
    return re.fullmatch(regex + ("" if anchored else ".*"), path, re.S) is not None


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.text(alphabet="ab*", min_size=1, max_size=9)),
        min_size=MANY_WILDCARDS,
        max_size=MANY_WILDCARDS + 20,
    ),
    st.lists(st.text(alphabet="ab", max_size=14), min_size=1, max_size=5),
)
def test_many_wildcards_of_several_pieces_agree_with_brute_force(
    rules: list[tuple[bool, str]], paths: list[str]
) -> None:
    """Groups of many wildcard rules look for one probe per rule in one pass (the
    longer of the pieces after the first and the last "*"): any probe choice must
    leave the verdict of a plain scan of all the rules."""
    body = "User-agent: *\n" + "".join(
        f"{'Allow' if allow else 'Disallow'}: /*{pattern}\n" for allow, pattern in rules
    )
    robots = compiled_robots(body)
    for tail in paths:
        path = "/" + tail
        best: tuple[int, bool] | None = None
        for allow, pattern in rules:
            full = "/*" + pattern
            if _full_match(full, path):
                best = max(best or (0, False), (len(full), allow))
        assert robots.allowed(path, "bot") is (True if best is None else best[1])
