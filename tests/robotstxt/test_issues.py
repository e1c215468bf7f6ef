"""The parser's report of what it did not take as written (docs/rfc.md,
"diagnostics"), like Google's robots.txt report."""

from __future__ import annotations

from scrapy_rep import RobotsTxt
from scrapy_rep.robotstxt._issues import ISSUE_KINDS, MAX_ISSUES, MAX_TEXT, Issue


def kinds(body: str | bytes, **kwargs: int) -> list[tuple[int, str, str]]:
    robots = RobotsTxt.parse(body, **kwargs)
    return [(issue.line, issue.kind, issue.text) for issue in robots.issues]


def test_a_clean_file_has_no_issues() -> None:
    body = "# hello\n\nUser-agent: *\nDisallow: /x # why\nAllow: /x/y\nDisallow:\n"
    body += "Sitemap: https://e.com/s.xml\nCrawl-delay: 2\n"
    robots = RobotsTxt.parse(body)
    assert robots.issues == ()
    assert robots.issue_counts == {}


def test_each_kind_with_line_and_text() -> None:
    body = (
        "Disallow: /early\n"  # 1
        "User-agent: a\n"  # 2
        "Noindex: /x\n"  # 3
        "this is prose\n"  # 4
        "Dissallow: /typo\n"  # 5
        "user-agent b\n"  # 6
        "Crawl-delay: abc\n"  # 7
        "Request-rate: often\n"  # 8
        "Sitemap: sitemap.xml\n"  # 9
        "Allow:\n"  # 10
        "User-agent:\n"  # 11
        "Sitemap:\n"  # 12
        "Content-Signal: nonsense\n"  # 13
    )
    assert kinds(body) == [
        (1, "rule-outside-group", "Disallow: /early"),
        (3, "unknown-field", "Noindex: /x"),
        (4, "not-a-field", "this is prose"),
        (5, "typo", "Dissallow: /typo"),
        (6, "missing-colon", "user-agent b"),
        (7, "invalid-value", "Crawl-delay: abc"),
        (8, "invalid-value", "Request-rate: often"),
        (9, "invalid-value", "Sitemap: sitemap.xml"),
        (10, "empty-value", "Allow:"),
        (11, "empty-value", "User-agent:"),
        (12, "empty-value", "Sitemap:"),
        (13, "invalid-value", "Content-Signal: nonsense"),
    ]


def test_extension_lines_before_any_group() -> None:
    body = "Crawl-delay: 5\nContent-Signal: search=yes\nUser-agent: *\nDisallow: /\n"
    assert kinds(body) == [
        (1, "rule-outside-group", "Crawl-delay: 5"),
        (2, "signal-for-everyone", "Content-Signal: search=yes"),
    ]
    # a content signal before any group is a file-wide default, and listed as one
    assert RobotsTxt.parse(body).content_signals("bot") == {"search": True}


def test_a_content_signal_before_any_group_is_listed_and_still_applies() -> None:
    body = (
        "Content-Signal: ai-train=no\n"  # 1: applies to every crawler
        "Content-Signal: nonsense\n"  # 2: invalid, so it applies to none
        "User-agent: *\nDisallow: /x\n"
    )
    robots = RobotsTxt.parse(body)
    assert kinds(body) == [
        (1, "signal-for-everyone", "Content-Signal: ai-train=no"),
        (2, "invalid-value", "Content-Signal: nonsense"),
    ]
    assert robots.issue_counts == {"signal-for-everyone": 1, "invalid-value": 1}
    assert robots.content_signals("anybot") == {"ai-train": False}
    assert robots.usage("/page", "anybot").value("train-ai") == "n"


def test_counts_and_order() -> None:
    robots = RobotsTxt.parse("User-agent: a\nFoo: 1\ndisalow: /x\nBar: 2\n")
    assert robots.issue_counts == {"unknown-field": 2, "typo": 1}
    assert [issue.line for issue in robots.issues] == [2, 3, 4]
    assert list(robots.issue_counts) == [k for k in ISSUE_KINDS if k in robots.issue_counts]


def test_counts_made_on_demand_agree_before_and_after_reading_the_issues() -> None:
    # counts are made when first asked (most parsed files never are), from the issues
    # as parsed or once read; a file cut by the size limit counts that cut first
    body = b"User-agent: a\nFoo: 1\ndisalow: /x\nBar: 2\nDisallow: /cut-here\n"
    expected = {"size-limit": 1, "unknown-field": 2, "typo": 1}
    first = RobotsTxt.parse(body, max_size=len(body) - 4)
    assert first.issue_counts == expected
    assert len(first.issues) == 4
    second = RobotsTxt.parse(body, max_size=len(body) - 4)
    assert len(second.issues) == 4
    assert second.issue_counts == expected
    assert list(second.issue_counts) == list(expected)


def test_line_cut_at_the_line_limit() -> None:
    body = b"User-agent: *\nDisallow: /" + b"a" * 20_000 + b"\n"
    (issue,) = RobotsTxt.parse(body).issues
    assert (issue.line, issue.kind) == (2, "line-too-long")
    assert issue.text.startswith("Disallow: /aaa") and issue.text.endswith("…")
    assert len(issue.text) == MAX_TEXT + 1


def test_size_limit_gives_the_byte_offset() -> None:
    body = b"User-agent: *\nDisallow: /keep\nDisallow: /abcdef\n"
    cut = body.index(b"/abcdef") + 3
    robots = RobotsTxt.parse(body, max_size=cut)
    assert robots.issues == (Issue(3, "size-limit", "Disallow: /ab", cut),)
    assert robots.issues[0].as_dict() == {
        "line": 3,
        "kind": "size-limit",
        "text": "Disallow: /ab",
        "offset": cut,
    }
    assert robots.issue_counts == {"size-limit": 1}


def test_original_text_of_invalid_utf8_and_comments() -> None:
    body = b"User-agent: *\nFoo\xff: bar # c\n"
    assert kinds(body) == [(2, "unknown-field", "Foo\ufffd: bar # c")]


def test_a_web_page_is_one_issue_not_thousands() -> None:
    page = "<html>\n" + "<p>text</p>\n" * 5000 + "</html>\n"
    robots = RobotsTxt.parse(page)
    assert robots.issue_counts == {"markup": 1}


def test_issues_kept_are_bounded_but_all_are_counted() -> None:
    body = "User-agent: *\n" + "Foo: bar\n" * (MAX_ISSUES + 500)
    robots = RobotsTxt.parse(body)
    assert len(robots.issues) == MAX_ISSUES
    assert robots.issue_counts == {"unknown-field": MAX_ISSUES + 500}


def test_explain_gives_the_deciding_line_as_written() -> None:
    body = "User-agent: *\nDisallow: /caf\u00e9 x\nAllow: /%7Ejoe\nDisallow: /a*\n"
    robots = RobotsTxt.parse(body)
    assert robots.explain("/caf%C3%A9%20x", "bot").rule == "Disallow: /caf\u00e9 x"
    assert robots.explain("/~joe", "bot").rule == "Allow: /%7Ejoe"
    assert robots.explain("/abc", "bot").rule == "Disallow: /a*"
