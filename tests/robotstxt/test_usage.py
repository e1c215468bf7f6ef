"""Usage preferences: Content-Usage (IETF AIPREF), Content-Signal, and how they combine."""

from __future__ import annotations

import pytest

from scrapy_rep.robotstxt import RobotsTxt
from scrapy_rep.robotstxt._usage import (
    MAX_USAGE_MEMO,
    UNKNOWN,
    N,
    Usage,
    Y,
    content_signal_statement,
    content_usage_statement,
    header_statement,
    usage_dictionary,
)

# -- the Dictionary rules of draft-ietf-aipref-vocab §6 ---------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"train-ai=y, search=n", {"train-ai": Y, "search": N}),
        (b"train-ai=n", {"train-ai": N}),
        (b"", {}),
        # unknown values: another token, a string, a boolean, a number, an inner list
        (b"train-ai=yes, search=no", {}),
        (b'train-ai="n"', {}),
        (b"train-ai, search=?1", {}),
        (b"train-ai=1", {}),
        (b"train-ai=(n)", {}),
        # unknown labels are ignored; the known ones still count
        (b"bots=n, train-genai=n, ai-input=n, search=y", {"search": Y}),
        # duplicates: the last value wins (RFC 9651 §4.2.2), even when it is unknown
        (b'train-ai=y, train-ai, search=n, search="n"', {}),
        (b"train-ai=y, train-ai=n", {"train-ai": N}),
        (b"train-ai=n, train-ai=y", {"train-ai": Y}),
        # parameters are ignored, and only the selected member's count
        (b"train-ai=n;reason=1", {"train-ai": N}),
        (b"train-ai;allow=n, train-ai=y", {"train-ai": Y}),
        # a Dictionary that fails to parse says nothing: upper-case keys are invalid
        (b"Train-AI=n", {}),
        (b"train-ai=n, SEARCH=n", {}),
        (b"train-ai=n,", {}),
        (b"train-ai=n search=n", {}),
        (b'train-ai;has;parameters="?";', {}),
        (b"train-ai=n, \xff=y", {}),
        # whitespace around members is allowed
        (b"  train-ai=n ,\tsearch=y  ", {"train-ai": N, "search": Y}),
    ],
)
def test_usage_dictionary(value: bytes, expected: dict[str, str]) -> None:
    assert usage_dictionary(value) == expected


def test_content_signal_values() -> None:
    s = content_signal_statement(b"Search=YES, ai-train=no, ai-input = yes, use=reference")
    assert dict(s.prefs) == {"search": Y, "train-ai": N, "ai-input": Y}
    assert s.use == "reference"
    # unknown keys and values are ignored; a key given twice keeps its "no"
    s = content_signal_statement(b"ai-train=maybe, bots=no, search=no, search=yes, use=all")
    assert dict(s.prefs) == {"search": N}
    assert s.use is None
    # of two use= levels the one that allows least use wins
    assert content_signal_statement(b"use=full, use=immediate").use == "immediate"


def test_header_statement_joins_field_lines() -> None:
    s = header_statement([b"train-ai=n", b"search=y"])
    assert s is not None and dict(s.prefs) == {"train-ai": N, "search": Y}
    assert s.source.line is None and s.source.describe().startswith("response header")
    assert header_statement([]) is None
    # one bad field line spoils the whole field, as for any Structured Field
    s = header_statement([b"train-ai=n", b"Search=y"])
    assert s is not None and dict(s.prefs) == {}
    # a hostile header is not parsed at all, and its source text stays short
    s = header_statement([b"train-ai=n, " + b"x=y, " * 5000])
    assert s is not None and dict(s.prefs) == {}
    assert "too long: ignored" in s.source.value
    long_rule = content_usage_statement(b"train-ai=n" + b" " * 3000, line=2)
    assert long_rule.prefs == {"train-ai": N} and len(long_rule.source.value) < 600


# -- combining (draft-ietf-aipref-vocab §5.1): any n wins, then any y -------------------


def test_combination_any_n_wins_then_any_y() -> None:
    a = content_usage_statement(b"train-ai=y, search=y", line=3)
    b = content_usage_statement(b"train-ai=n", line=4)
    c = content_usage_statement(b"search=y", line=5)
    usage = Usage.of([a, b, c])
    assert usage.value("train-ai") == N
    assert [s.line for s in usage.preferences["train-ai"].sources] == [4]
    assert usage.value("search") == Y
    assert [s.line for s in usage.preferences["search"].sources] == [3, 5]
    assert usage.value("ai-input") == UNKNOWN
    assert usage.refused(["search", "train-ai", "ai-input"]) == ["train-ai"]


def test_json_round_trip() -> None:
    usage = Usage.of(
        [
            content_usage_statement(b"train-ai=n", line=7),
            content_signal_statement(b"search=yes, use=reference", line=9),
        ]
    ).merged(Usage.of([header_statement([b"search=n"])]))  # type: ignore[list-item]
    doc = usage.to_json()
    assert doc["preferences"] == {"train-ai": N, "search": N, "ai-input": UNKNOWN}
    assert doc["use"] == "reference"
    assert doc["sources"]["search"] == [
        {"from": "header", "line": None, "text": "Content-Usage: search=n"}
    ]
    assert Usage.from_json(doc) == usage


# -- robots.txt: groups, paths, precedence ----------------------------------------------

# The example of draft-ietf-aipref-attach §3.4, with more around it.
ROBOTS = b"""\
Content-Usage: / search=n
User-Agent: *
Allow: /
Disallow: /never/
Content-Usage: / train-ai=n
Content-Usage: /ai-ok/ train-ai=y

User-Agent: ExampleBot
Allow: /
Content-Usage: train-ai=y
"""


@pytest.mark.parametrize(
    ("path", "train_ai", "line"),
    [
        ("/test", N, 5),
        ("/never/test", UNKNOWN, None),  # not crawlable: no preferences apply
        ("/ai-ok/test", Y, 6),
        ("/ai-ok", N, 5),
    ],
)
def test_attach_example(path: str, train_ai: str, line: int | None) -> None:
    robots = RobotsTxt.parse(ROBOTS)
    usage = robots.usage(f"https://example.com{path}", "SomeBot/1.0")
    assert usage.value("train-ai") == train_ai
    sources = usage.preferences["train-ai"].sources
    assert [s.line for s in sources] == ([] if line is None else [line])
    # Content-Usage before any group is ignored (a rule outside a group)
    assert usage.value("search") == UNKNOWN


def test_group_choice_and_path_less_rule() -> None:
    robots = RobotsTxt.parse(ROBOTS)
    usage = robots.usage("/anything", "ExampleBot")
    assert usage.value("train-ai") == Y  # its own group only, never merged with "*"
    assert usage.preferences["train-ai"].sources[0].describe() == (
        "robots.txt line 10: Content-Usage: train-ai=y"
    )
    assert (
        RobotsTxt.parse(b"User-agent: other\nContent-Usage: train-ai=n\n").usage("/", "mybot")
        == Usage()
    )


def test_identical_paths_combine_most_restrictively() -> None:
    robots = RobotsTxt.parse(
        b"User-agent: *\n"
        b"Content-Usage: /a train-ai=y, search=y\n"
        b"Content-Usage: /a train-ai=n\n"
        b"Content-Usage: /a search=bogus\n"
        b"Content-Usage: / search=n\n"
    )
    usage = robots.usage("/a/b", "bot")
    assert usage.value("train-ai") == N  # unlike Allow/Disallow, the restrictive one
    assert usage.value("search") == Y  # the shorter "/" rule does not apply at all
    assert robots.usage("/b", "bot").value("search") == N


def test_longest_match_with_wildcards_and_escapes() -> None:
    robots = RobotsTxt.parse(
        b"User-agent: *\n"
        b"Content-Usage: / train-ai=n\n"
        b"Content-Usage: /*.pdf$ train-ai=y\n"
        b"Content-Usage: /caf%C3%A9/ train-ai=y\n"
        b"Content-Usage:\t/x%2dy\ttrain-ai=y\n"
    )
    assert robots.usage("/docs/a.pdf", "bot").value("train-ai") == Y
    assert robots.usage("/docs/a.pdf?x=1", "bot").value("train-ai") == N
    assert robots.usage("/café/menu", "bot").value("train-ai") == Y
    assert robots.usage("/x-y", "bot").value("train-ai") == Y


def test_merged_groups_and_comments() -> None:
    robots = RobotsTxt.parse(
        b"User-agent: bot\nContent-Usage: /a train-ai=y # not for /a/private\n"
        b"User-agent: other\nDisallow: /z\n"
        b"User-agent: bot\nContent-Usage: /a/private train-ai=n\n"
    )
    assert robots.usage("/a/x", "bot").value("train-ai") == Y
    assert robots.usage("/a/private/1", "bot").value("train-ai") == N


def test_content_signal_group_and_file_wide() -> None:
    robots = RobotsTxt.parse(
        b"Content-Signal: search=yes\n"
        b"User-agent: *\n"
        b"Content-Signal: ai-train=no, ai-input=yes, use=reference\n"
        b"Content-Usage: / train-ai=y\n"
        b"User-agent: strict\n"
        b"Content-Signal: search=no\n"
    )
    usage = robots.usage("/", "bot")
    assert usage.value("train-ai") == N  # ai-train=no beats train-ai=y
    assert usage.value("ai-input") == Y and usage.value("search") == Y
    assert usage.use.value == "reference"
    assert [s.field for s in usage.preferences["train-ai"].sources] == ["Content-Signal"]
    # a file-wide signal is one more statement: "no" in the group still wins
    assert robots.usage("/", "strict").value("search") == N
    # Content-Usage is a rule: the user-agent line after it starts a new group
    assert robots.usage("/", "strict").value("train-ai") == UNKNOWN


def test_usage_of_a_file_without_preferences() -> None:
    robots = RobotsTxt.parse(b"User-agent: *\nDisallow: /x\n")
    assert robots.usage("/", "bot") == Usage()
    assert RobotsTxt.parse(b"").usage("/", "bot") == Usage()


def test_many_agents_over_many_usage_lines_stay_cheap() -> None:
    # One run named by 3,000 agents over 3,000 Content-Usage lines: the parser shares
    # the run's lines between its tokens instead of copying them per token.
    body = b"".join(b"User-agent: bot%d\n" % i for i in range(3000)) + b"".join(
        b"Content-Usage: /p%d train-ai=n\n" % i for i in range(3000)
    )
    robots = RobotsTxt.parse(body)
    assert robots.usage("/p2999/x", "bot7").value("train-ai") == N
    assert robots.usage("/q", "bot7").value("train-ai") == UNKNOWN


def test_index_takes_decoded_values_too() -> None:
    # the engine may keep extension values as text: they are processed as UTF-8 bytes
    from scrapy_rep.robotstxt._usage import UsageIndex

    index = UsageIndex({"bot": [[("content-usage", "/a train-ai=n", 3)]], "": []})
    assert index.usage("bot", b"/a/b").value("train-ai") == N
    index = UsageIndex({"bot": [[("content-usage", "/a train-ai=n\udcff", 3)]]})
    assert index.usage("bot", b"/a/b").value("train-ai") == UNKNOWN
    index = UsageIndex({"bot": [[("content-usage", "/a train-ai=n\ud800", 3)]]})
    assert index.usage("bot", b"/a/b").value("train-ai") == UNKNOWN


def test_content_usage_lines_are_generic_extension_lines() -> None:
    # content-usage is one entry of the engine's extension fields: its lines are kept
    # per group like Crawl-delay's, and one before any group is a rule outside a group
    robots = RobotsTxt.parse(
        b"Content-Usage: train-ai=n\nUser-agent: bot\nContent-Usage: /a search=n\n"
    )
    lines = robots.extension_lines("bot", "content-usage")
    assert [(e.value, e.line) for e in lines] == [("/a search=n", 3)]
    assert robots.issue_counts == {"rule-outside-group": 1}
    assert robots.usage("/", "bot").value("train-ai") == UNKNOWN
    assert robots.usage("/a", "bot").value("search") == N


def test_a_rule_without_a_path_is_shorter_than_slash() -> None:
    # draft-ietf-aipref-attach-05 §3.1: a rule without a path has a path of 0 octets;
    # the longest match wins and only identical paths combine
    for body in (
        b"User-agent: *\nContent-Usage: train-ai=n\nContent-Usage: / train-ai=y\n",
        b"User-agent: *\nContent-Usage: / train-ai=y\nContent-Usage: train-ai=n\n",
    ):
        robots = RobotsTxt.parse(body)
        usage = robots.usage("https://example.com/x", "bot")
        assert usage.value("train-ai") == Y
        assert [s.value for s in usage.preferences["train-ai"].sources] == ["/ train-ai=y"]
    # without a "/" rule, the path-less rule applies to every path
    robots = RobotsTxt.parse(b"User-agent: *\nContent-Usage: train-ai=n\n")
    assert robots.usage("/", "bot").value("train-ai") == N
    assert robots.usage("/deep/page?q=1", "bot").value("train-ai") == N
    # two path-less rules have identical paths: they combine, most restrictively
    robots = RobotsTxt.parse(
        b"User-agent: *\nContent-Usage: train-ai=y, search=y\nContent-Usage: train-ai=n\n"
    )
    usage = robots.usage("/x", "bot")
    assert usage.value("train-ai") == N and usage.value("search") == Y


def test_a_content_signal_without_a_path_is_shorter_than_slash() -> None:
    robots = RobotsTxt.parse(
        b"User-agent: *\nContent-Signal: ai-train=no\nContent-Signal: / ai-train=yes\n"
    )
    assert robots.usage("/x", "bot").value("train-ai") == Y
    # the file-wide (path-less) line and the group's path-less line combine
    robots = RobotsTxt.parse(
        b"Content-Signal: search=no\nUser-agent: *\nContent-Signal: search=yes\n"
    )
    assert robots.usage("/x", "bot").value("search") == N


def test_usage_is_made_once_per_combination_of_statements_and_the_memo_is_bounded() -> None:
    """Requests that pick the same statements share one Usage (a crawl asks for each
    allowed request); a file whose many equally long wildcard patterns give ever new
    combinations keeps at most MAX_USAGE_MEMO of them, and each answer stays right."""
    robots = RobotsTxt.parse(
        b"User-agent: *\nContent-Usage: / train-ai=n\nContent-Usage: /docs/ train-ai=y\n"
    )
    first = robots.usage("/docs/a.html", "bot")
    assert robots.usage("/docs/b.html", "bot") is first
    assert robots.usage("/other", "bot") is not first
    assert robots.usage("/other", "bot").value("train-ai") == N

    # 12 patterns of one length: a path names any subset of them (2**12 combinations).
    letters = "abcdefghijkl"
    lines = "".join(f"Content-Usage: /*{c} train-ai=y\n" for c in letters)
    many = RobotsTxt.parse(f"User-agent: *\n{lines}Content-Usage: / train-ai=n\n".encode())
    for number in range(1, 2**12, 3):
        path = "/" + "".join(c for bit, c in enumerate(letters) if number >> bit & 1)
        usage = many.usage(path, "bot")
        assert usage.value("train-ai") == Y
        assert len(usage.preferences["train-ai"].sources) == bin(number).count("1")
    index = many._usage  # (the memo's size is the claim)
    assert index is not None and len(index._made) == MAX_USAGE_MEMO
