"""Hostile files: the structures that keep parses and checks linear give the same
verdicts as the plain algorithms (no timed assertions: bench_adversarial.py times)."""

from __future__ import annotations

from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_rep import RobotsTxt
from scrapy_rep.robotstxt._matcher import (
    GRAM,
    MANY_WILDCARDS,
    pattern_matches,
    present_probes,
    probe_index,
)
from tests.support.engine import compiled_robots

_TEXT = st.text(alphabet="abX/", min_size=0, max_size=40)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="abX", min_size=0, max_size=20), min_size=1, max_size=30), _TEXT)
def test_present_probes_is_exact(probes: list[str], text: str) -> None:
    found = present_probes(probe_index(probes), text)
    assert {p for p in probes if p in text} | {""} == set(found)


def _reference(rules: list[tuple[bool, bytes]], path: bytes) -> bool:
    """RFC 9309 §2.2.2 by brute force: the longest matching pattern, allow on a tie."""
    best = (-1, True)
    for allow, pattern in rules:
        if pattern_matches(pattern, path):
            best = max(best, (len(pattern), allow))
    return best[1]


_PATTERN = st.builds(
    lambda pieces, anchored: "/" + "*".join(pieces) + ("$" if anchored else ""),
    st.lists(st.text(alphabet="abX", max_size=12), min_size=2, max_size=4),
    st.booleans(),
)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), _PATTERN), min_size=MANY_WILDCARDS, max_size=120),
    st.lists(st.text(alphabet="abX", max_size=60), min_size=1, max_size=5),
)
def test_many_wildcard_rules_decide_as_the_reference(
    rules: list[tuple[bool, str]], paths: list[str]
) -> None:
    body = "User-agent: *\n" + "".join(
        f"{'Allow' if allow else 'Disallow'}: {pattern}\n" for allow, pattern in rules
    )
    robots = compiled_robots(body)
    encoded = [(allow, pattern.encode()) for allow, pattern in rules]
    for path in paths:
        url = "/" + path
        expected = _reference(encoded, url.encode())
        assert robots.allowed(url, "bot") is expected, url
        # the same through the probe index, whether or not it pays for such a path
        with patch("scrapy_rep.robotstxt._matcher.index_pays", return_value=True):
            assert robots.allowed(url + "#", "bot") is expected, url


def test_long_probes_filtered_by_grams_are_still_found() -> None:
    probe = "a" * 40 + "X" + "a" * 40
    rules = "".join(f"Disallow: /*{'a' * 40}X{n}{'a' * 40}\n" for n in range(200))
    robots = compiled_robots("User-agent: *\n" + rules + f"Disallow: /*{probe}\n")
    assert robots._groups["*"].probe_index is not None  # type: ignore[union-attr]
    assert robots.allowed("/" + "a" * 2000, "bot")
    assert not robots.allowed("/" + "a" * 100 + "X" + "a" * 100, "bot")
    assert len(probe) > GRAM


def test_agents_times_extension_lines_keep_one_list_per_group() -> None:
    """Thousands of user-agent lines and thousands of extension lines in one group:
    each token refers to the group's one list of lines (memory and time linear)."""
    body = "".join(f"user-agent: bot{n}\n" for n in range(3000))
    body += "content-signal: search=yes, ai-train=no\n" * 2000 + "crawl-delay: 4\n"
    robots = RobotsTxt.parse(body)
    lists = {id(lines) for runs in robots._extension_lines.values() for lines in runs}  # type: ignore[union-attr]
    assert len(lists) == 1
    assert robots.content_signals("bot2999") == {"search": True, "ai-train": False}
    assert robots.crawl_delay("bot17") == 4.0
    assert len(robots.extension_lines("bot5", "content-signal")) == 2000
    assert robots.extension_lines("bot5", "crawl-delay")[0].line == 5001


def test_repeated_escape_heavy_rules_normalise() -> None:
    body = "User-agent: *\n" + "".join(f"Disallow: /{n}{'%7e' * 3000}\n" for n in range(5))
    body += "Disallow: /x" + "$" * 5000 + "\n"
    robots = compiled_robots(body)
    assert not robots.allowed("/1" + "~" * 3000, "bot")
    assert robots.allowed("/1" + "~" * 2999, "bot")
    assert not robots.allowed("/x" + "%24" * 4999, "bot")
    assert robots.allowed("/x" + "%24" * 4999 + "y", "bot")


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.text(alphabet="ab/*$%", min_size=0, max_size=8)),
        min_size=25,
        max_size=80,
    ),
    st.lists(st.text(alphabet="ab/%", max_size=12), min_size=1, max_size=6),
)
def test_first_checks_agree_with_the_remembered_group(
    rules: list[tuple[bool, str]], paths: list[str]
) -> None:
    """A fresh object's first check (which compiles) answers as later ones do."""
    body = "User-agent: *\n" + "".join(
        f"{'Allow' if allow else 'Disallow'}: /{pattern}\n" for allow, pattern in rules
    )
    compiled = compiled_robots(body)
    for path in paths:
        url = "/" + path
        # a fresh object: its first check compiles the group
        scanned = RobotsTxt.parse(body)
        assert scanned.allowed("/", "bot") is compiled.allowed("/", "bot")
        assert scanned.allowed(url, "bot") is compiled.allowed(url, "bot"), url
        explained = RobotsTxt.parse(body)
        assert explained.explain("/", "bot") == compiled.explain("/", "bot")
        assert explained.explain(url, "bot") == compiled.explain(url, "bot")


def test_prepare_does_the_first_checks_work_and_answers_stay_the_same() -> None:
    # what a first check does, which the crawl runs in steps for a large group (crawl/decide.py)
    body = "User-agent: *\nDisallow: /private\n" + "".join(
        f"Allow: /*x{n}$\n" for n in range(3_000)
    )
    fresh, prepared = RobotsTxt.parse(body), RobotsTxt.parse(body)
    assert prepared.first_use_rules("bot") == 3_001
    assert prepared.first_use_rules("nobody-named") == 3_001  # (it obeys "*")
    prepared.prepare("bot")
    assert prepared.first_use_rules("bot") == 0
    for path in ("/private", "/private/x7", "/ax12", "/x2999", "/x2999?", "/public"):
        assert prepared.allowed(path, "bot") == fresh.allowed(path, "bot"), path
        assert prepared.explain(path, "bot") == fresh.explain(path, "bot"), path
    small = RobotsTxt.parse("User-agent: bot\nDisallow: /a\n")
    assert small.first_use_rules("bot") == 1
    small.prepare("bot")
    assert small.first_use_rules("bot") == 0
    assert not small.allowed("/a", "bot")
    assert RobotsTxt.parse("User-agent: bot\nDisallow: /a\n").first_use_rules("other") == 0
