"""Property tests (hypothesis): robustness and agreement with slow references."""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from scrapy_rep import RobotsTxt
from scrapy_rep.robotstxt._matcher import match_pieces, split_pattern
from scrapy_rep.robotstxt._normalise import SIMPLE_URL, normalise_path, plain_path

UNRESERVED = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"

lines = st.sampled_from(
    [
        "User-agent: *",
        "User-agent: a",
        "user-agent: B/1.0",
        "Disallow: /",
        "Disallow: /a",
        "Allow: /a/b",
        "Disallow: /*.x$",
        "Allow: /a*b",
        "Disallow:",
        "Crawl-delay: 3",
        "Sitemap: https://e.com/s.xml",
        "# comment",
        "",
        "disallow /b",
        "Allow: /d/index.html",
        "Disallow: /%7e",
        "junk line here",
    ]
)
paths = st.text(alphabet="/abx.~%7eE", max_size=12).map(lambda s: "/" + s.lstrip("/"))
agents = st.sampled_from(["a", "b", "B/2", "zzz", "", "A"])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000), st.text(max_size=30), st.text(max_size=20))
def test_arbitrary_bytes_never_raise(body: bytes, url: str, agent: str) -> None:
    robots = RobotsTxt.parse(body)
    assert robots.allowed(url, agent) is robots.explain(url, agent).allowed
    robots.crawl_delay(agent)
    robots.request_rate(agent)
    robots.content_signals(agent)
    assert isinstance(robots.sitemaps, list)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.binary(max_size=40), st.binary(max_size=20))
def test_arbitrary_text_and_byte_queries_never_raise(body: str, url: bytes, agent: bytes) -> None:
    robots = RobotsTxt.parse(body, max_size=150)
    assert robots.allowed(url, agent) is robots.explain(url, agent).allowed


@settings(max_examples=300, deadline=None)
@given(st.lists(lines, max_size=14), paths, agents)
def test_line_endings_do_not_matter(body: list[str], path: str, agent: str) -> None:
    verdicts = {
        RobotsTxt.parse(eol.join(body)).allowed(path, agent) for eol in ("\n", "\r\n", "\r")
    }
    assert len(verdicts) == 1


@settings(max_examples=300, deadline=None)
@given(st.lists(lines, max_size=14), paths, agents)
def test_allowed_equals_explain(body: list[str], path: str, agent: str) -> None:
    robots = RobotsTxt.parse("\n".join(body))
    decision = robots.explain(path, agent)
    assert robots.allowed(path, agent) is decision.allowed
    if decision.reason == "rule":
        assert decision.line is not None
        assert decision.rule is not None
        assert decision.rule.split(":")[0] in ("Allow", "Disallow")


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(UNRESERVED), st.text(alphabet="/ab", max_size=5), st.booleans())
def test_escaped_and_raw_unreserved_match_alike(char: str, tail: str, lower: bool) -> None:
    escaped = f"%{ord(char):02x}" if lower else f"%{ord(char):02X}"
    for rule_form, url_form in ((char, escaped), (escaped, char), (escaped, escaped)):
        robots = RobotsTxt.parse(f"User-agent: *\nDisallow: /p{rule_form}{tail}\n")
        assert not robots.allowed(f"/p{url_form}{tail}", "bot")
        assert robots.allowed(f"/q{url_form}{tail}", "bot")


def _reference(pattern: str, path: str) -> bool:
    """Slow reference: the pattern as a regular expression, matched in full."""
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    regex = ".*".join(re.escape(piece) for piece in body.split("*"))
    return re.fullmatch(regex + ("" if anchored else ".*"), path, re.S) is not None


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet="ab*", max_size=8), st.booleans(), st.text(alphabet="ab", max_size=12))
def test_linear_matcher_agrees_with_regex(pattern: str, anchored: bool, path: str) -> None:
    full = "/" + pattern + ("$" if anchored else "")
    pieces, is_anchored = split_pattern(full.encode())
    expected = _reference(full, "/" + path)
    assert match_pieces(pieces, is_anchored, ("/" + path).encode()) is expected


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.text(alphabet="/ab*$", max_size=6)), max_size=30),
    st.text(alphabet="/ab", max_size=10),
)
def test_decision_agrees_with_brute_force(rules: list[tuple[bool, str]], path: str) -> None:
    """The indexed, sorted engine picks what a plain scan of all rules picks."""
    body = "User-agent: *\n" + "".join(
        f"{'Allow' if allow else 'Disallow'}: /{pattern}\n" for allow, pattern in rules
    )
    path = "/" + path.lstrip("/")  # "//x" would be a network-path URL, not a path
    best: tuple[int, bool] | None = None
    for allow, pattern in rules:
        full = "/" + pattern
        # a "$" before the end is a literal "$", which "/ab" paths never contain
        if "$" in full[:-1]:
            continue
        if _reference(full, path):
            candidate = (len(full), allow)
            if best is None or candidate > best:
                best = candidate
    expected = True if best is None else best[1]
    assert RobotsTxt.parse(body).allowed(path, "bot") is expected


@given(st.text(max_size=20))
def test_normalise_path_is_ascii_and_idempotent(path: str) -> None:
    once = normalise_path(path)
    assert once.isascii()
    assert normalise_path(once.decode()) == once


def _brute_force(rules: list[tuple[bool, str]], path: str) -> tuple[bool, set[int | None]]:
    """Verdict and the lines that may decide it (rules on lines 2, 3, ...), by a
    plain scan: the longest pattern wins, allow on a tie; equal rules are equal."""
    best: tuple[int, bool] | None = None
    lines: set[int | None] = {None}
    for line, (allow, pattern) in enumerate(rules, 2):
        full = "/" + pattern
        if "$" in full[:-1] or not _reference(full, path):
            continue
        candidate = (len(full), allow)
        if best is None or candidate > best:
            best, lines = candidate, {line}
        elif candidate == best:
            lines.add(line)
    return (True if best is None else best[1]), lines


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.text(alphabet="/ab*$", max_size=7)), max_size=120),
    st.lists(st.text(alphabet="/ab", max_size=10), min_size=1, max_size=8),
)
def test_prefix_forest_agrees_with_brute_force(
    rules: list[tuple[bool, str]], paths: list[str]
) -> None:
    """Sorted literal guards (bisect + walk up the prefixes), wildcard buckets and
    the fast URL path pick the rule, and line, that a plain scan picks."""
    body = "User-agent: *\n" + "".join(
        f"{'Allow' if allow else 'Disallow'}: /{pattern}\n" for allow, pattern in rules
    )
    robots = RobotsTxt.parse(body)
    for raw in paths:
        path = "/" + raw.lstrip("/")
        allowed, line = _brute_force(rules, path)
        assert robots.allowed("https://example.com" + path, "bot") is allowed
        decision = robots.explain(path, "bot")
        assert decision.allowed is allowed
        assert decision.line in line


def test_thousands_of_literal_rules() -> None:
    rules = [f"Disallow: /d{i}/\nAllow: /d{i}/open{i % 7}\n" for i in range(2500)]
    robots = RobotsTxt.parse("User-agent: *\n" + "".join(rules))
    assert robots.rule_count == 5000
    for i in (0, 1, 17, 1234, 2499):
        assert not robots.allowed(f"https://h/d{i}/x", "bot")
        assert robots.allowed(f"https://h/d{i}/open{i % 7}/y", "bot")
        assert robots.explain(f"/d{i}/open{i % 7}", "bot").line == 2 * i + 3
    assert robots.allowed("https://h/d2500/", "bot")
    assert robots.allowed("https://h/e", "bot")


@given(st.text(alphabet="/ab%*$#?:.hpst\xe9", max_size=24))
def test_fast_url_path_agrees(url: str) -> None:
    m = SIMPLE_URL.match(url)
    if m is not None:
        assert m[1].encode() == plain_path(url)


_URL_PARTS = st.sampled_from(
    [
        "http",
        "https",
        "HTTP",
        "ftp",
        "h",
        "://",
        ":",
        "/",
        "?",
        "#",
        "@",
        ".",
        "[",
        "]",
        "a",
        "B",
        "xn--",
        "ü",
        "8080",
        ":80",
        ":443",
        "user:pw@",
        "%41",
        "\\",
        " ",
    ]
)


@given(st.lists(_URL_PARTS, max_size=12).map("".join))
@settings(max_examples=500)
@example("http:// ")  # once found by this test: the memo read " " as a host
def test_memoised_origin_agrees_with_origin_of(url: str) -> None:
    from scrapy_rep.policy.origin import origin_of, origin_of_memo

    assert origin_of_memo(url) == origin_of(url)
    assert origin_of_memo(url) == origin_of(url)  # from the memo this time
