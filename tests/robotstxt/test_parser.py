"""Parsing and deciding: one test (or a few) per rule of docs/rfc.md."""

from __future__ import annotations

import dataclasses

import pytest

from scrapy_rep import Decision, RobotsTxt, product_token


def rt(text: str | bytes, **kwargs: int) -> RobotsTxt:
    return RobotsTxt.parse(text, **kwargs)


# -- input -------------------------------------------------------------------


def test_invalid_utf8_does_not_abort() -> None:
    body = b"User-agent: *\nDisallow: /caf\xe9\n\xff\xfe\x00garbage\nDisallow: /next\n"
    robots = rt(body)
    assert not robots.allowed("/next", "bot")
    # a lone Latin-1 octet is compared as its %XX escape, as Google's library does
    assert not robots.allowed("/caf%E9", "bot")
    assert robots.allowed("/cafe", "bot")


def test_bom_is_ignored() -> None:
    robots = rt(b"\xef\xbb\xbfUser-agent: *\nDisallow: /x\n")
    assert not robots.allowed("/x", "bot")
    assert not rt("\ufeffUser-agent: *\nDisallow: /x\n").allowed("/x", "bot")


def test_str_and_bytes_content_agree() -> None:
    text = "User-agent: *\nDisallow: /ツ\n"
    assert rt(text).allowed("/%E3%83%84", "b") is rt(text.encode()).allowed("/%E3%83%84", "b")
    assert not rt(text).allowed("/ツ", "b")


# -- size --------------------------------------------------------------------


def test_size_limit_default_and_truncated_flag() -> None:
    body = b"User-agent: *\n" + b"#" * 600_000 + b"\nDisallow: /late\n"
    robots = rt(body)
    assert robots.truncated
    assert robots.allowed("/late", "bot")
    assert not rt(b"User-agent: *\nDisallow: /x\n").truncated


def test_rule_cut_in_half_at_the_limit_is_dropped() -> None:
    body = b"User-agent: *\nDisallow: /keep\nDisallow: /abcdef\n"
    cut = body.index(b"/abcdef") + 3  # inside the second rule
    robots = rt(body, max_size=cut)
    assert robots.truncated
    assert not robots.allowed("/keep", "bot")
    assert robots.allowed("/abc", "bot")  # not "Disallow: /ab"
    assert robots.rule_count == 1


def test_limit_exactly_at_a_line_end_keeps_the_line() -> None:
    body = b"User-agent: *\nDisallow: /keep\nDisallow: /more\n"
    robots = rt(body, max_size=body.index(b"\nDisallow: /more"))
    assert robots.truncated
    assert not robots.allowed("/keep", "bot")


def test_zero_and_negative_max_size() -> None:
    assert rt(b"User-agent: *\nDisallow: /\n", max_size=0).allowed("/x", "bot")
    assert rt(b"User-agent: *\nDisallow: /\n", max_size=-5).truncated


def test_ten_megabyte_single_line() -> None:
    body = b"Disallow: /" + b"a" * 10_000_000
    robots = rt(body)
    assert robots.truncated
    assert robots.rule_count == 0
    big = rt(b"User-agent: *\nDisallow: /" + b"a" * 10_000_000, max_size=20_000_000)
    assert big.rule_count == 1
    # the line is cut at 16,663 bytes, so the pattern is /aaa... of 16,663 - 10 octets
    assert not big.allowed("/" + "a" * 16_700, "bot")
    assert big.allowed("/" + "a" * 16_000, "bot")


# -- lines ---------------------------------------------------------------------


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_line_endings(eol: str) -> None:
    body = eol.join(["User-agent: a", "Disallow: /a", "", "User-agent: b", "Disallow: /b", ""])
    robots = rt(body)
    assert not robots.allowed("/a", "a")
    assert robots.allowed("/b", "a")
    assert not robots.allowed("/b", "b")
    assert robots.explain("/b", "b").line == 5


def test_comments_and_whitespace() -> None:
    body = "  # comment\nUser-agent: a # trailing\n\t Disallow\t :  /x#y  \n"
    robots = rt(body)
    assert not robots.allowed("/x", "a")
    assert robots.allowed("/", "a")
    assert robots.explain("/x?q", "a").rule == "Disallow: /x"


def test_field_names_are_case_insensitive() -> None:
    assert not rt("USER-AGENT: *\nDISALLOW: /x\n").allowed("/x", "bot")


def test_missing_colon_is_accepted_for_two_words() -> None:
    robots = rt("user-agent a\ndisallow /x\ndisallow /y z\n")
    assert not robots.allowed("/x", "a")
    assert robots.allowed("/y", "a")  # three words: not a field


def test_long_line_is_cut_at_16663_bytes() -> None:
    # Google's buffer of 8 x 2,083 bytes holds 16,663 octets and the terminator
    pattern = "/" + "p" * 20_000
    robots = rt(f"User-agent: *\nDisallow: {pattern}\nDisallow: /after\n")
    kept = 16_663 - len("Disallow: ")
    assert not robots.allowed(pattern[:kept], "bot")
    assert robots.allowed(pattern[: kept - 1], "bot")
    assert not robots.allowed("/after", "bot")


# -- fields --------------------------------------------------------------------


@pytest.mark.parametrize("field", ["useragent", "user agent", "User-Agent", "user-agent-x"])
def test_user_agent_spellings(field: str) -> None:
    assert not rt(f"{field}: a\nDisallow: /x\n").allowed("/x", "a")


@pytest.mark.parametrize(
    "field", ["disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw"]
)
def test_disallow_typos(field: str) -> None:
    assert not rt(f"User-agent: a\n{field}: /x\n").allowed("/x", "a")


def test_unknown_fields_are_ignored_and_do_not_end_a_group() -> None:
    body = "User-agent: a\nHost: example.com\nUser-agent: b\nNoindex: /x\nDisallow: /y\n"
    robots = rt(body)
    assert not robots.allowed("/y", "a")
    assert not robots.allowed("/y", "b")
    assert robots.allowed("/x", "a")


def test_sitemaps_in_file_order_regardless_of_groups() -> None:
    body = (
        "Sitemap: https://e.com/1.xml\nUser-agent: a\nDisallow: /x\n"
        "Sitemap: https://e.com/2.xml # c\nsite-map: https://e.com/3.xml\nSitemap:\n"
    )
    robots = rt(body)
    assert robots.sitemaps == ["https://e.com/1.xml", "https://e.com/2.xml", "https://e.com/3.xml"]
    assert not robots.allowed("/x", "a")


def test_crawl_delay() -> None:
    body = "User-agent: a\nCrawl-delay: 2.5\nUser-agent: b\nCrawl-delay: 3\nDisallow: /\n"
    body += "User-agent: c\nCrawl-delay: soon\nAllow: /\n"
    body += "User-agent: *\nCrawl-delay: -1\nCrawl-delay: 7\nCrawl-delay: 8\n"
    robots = rt(body)
    # a and b share one group, whichever user-agent line the delay follows
    assert robots.crawl_delay("a") == 2.5
    assert robots.crawl_delay("b") == 2.5
    assert robots.crawl_delay("c") is None  # invalid value ignored; no fallback to *
    assert robots.crawl_delay("zzz") == 7.0  # first valid value
    assert rt("Crawl-delay: 4\n").crawl_delay("a") is None


def test_request_rate() -> None:
    robots = rt(
        "User-agent: a\nRequest-rate: 1/5\nUser-agent: b\nDisallow: /\n"
        "User-agent: c\nRequest-rate: 3/2m\nAllow: /\nUser-agent: d\nRequest-rate: 1/1h # x\n"
        "Allow: /\nUser-agent: e\nRequest-rate: 0/5\nAllow: /\nUser-agent: f\nRequest-rate: ten\n"
    )
    assert robots.request_rate("a") == (1, 5.0)
    assert robots.request_rate("c") == (3, 120.0)
    assert robots.request_rate("d") == (1, 3600.0)
    assert robots.request_rate("e") is None
    assert robots.request_rate("f") is None
    assert robots.request_rate("zzz") is None


def test_content_signals() -> None:
    body = (
        "Content-Signal: search=yes\n"
        "User-agent: *\nContent-Signal: search=no, ai-input=no, ai-train=NO, other=yes\n"
        "Allow: /\nUser-agent: a\nContent-signal: ai-train=yes, ai-input=maybe\nDisallow: /x\n"
    )
    robots = rt(body)
    assert robots.content_signals("zzz") == {"search": False, "ai-input": False, "ai-train": False}
    assert robots.content_signals("a") == {"search": True, "ai-train": True}
    assert rt("User-agent: *\nDisallow: /\n").content_signals("a") == {}


# -- groups --------------------------------------------------------------------


def test_same_name_groups_merge_and_star_is_fallback_only() -> None:
    body = (
        "User-agent: a\nDisallow: /1\n\nUser-agent: *\nDisallow: /2\n\n"
        "User-agent: A\nDisallow: /3\n"
    )
    robots = rt(body)
    assert not robots.allowed("/1", "a")
    assert not robots.allowed("/3", "a")
    assert robots.allowed("/2", "a")  # specific and * are never merged
    assert not robots.allowed("/2", "b")
    assert robots.allowed("/1", "b")


def test_rules_before_first_user_agent_are_ignored() -> None:
    robots = rt("Disallow: /x\nUser-agent: *\nDisallow: /y\n")
    assert robots.allowed("/x", "bot")
    assert robots.rule_count == 1


def test_empty_last_group_means_allow() -> None:
    robots = rt("User-agent: *\nDisallow: /\nUser-agent: a\n")
    assert robots.allowed("/x", "a")
    assert robots.explain("/x", "a") == Decision(True, None, None, ("a",), "no-matching-rule")


def test_no_matching_group_and_no_star() -> None:
    robots = rt("User-agent: a\nDisallow: /\n")
    assert robots.explain("/x", "b") == Decision(True, None, None, (), "no-matching-group")


def test_user_agent_value_is_cut_to_its_product_token() -> None:
    robots = rt("User-agent: googlebot/1.2\nDisallow: /a\nUser-agent: otherbot*\nDisallow: /b\n")
    assert not robots.allowed("/a", "Googlebot")
    assert not robots.allowed("/b", "OtherBot")


def test_star_followed_by_text_is_still_global() -> None:
    assert not rt("User-agent: * # all\nDisallow: /x\n").allowed("/x", "bot")
    assert not rt("User-agent: * everyone\nDisallow: /x\n").allowed("/x", "bot")


def test_full_user_agent_string_uses_its_product_token() -> None:
    robots = rt("User-agent: MyBot\nDisallow: /x\n")
    assert not robots.allowed("/x", "MyBot/1.2 (+http://x)")
    assert not robots.allowed(b"/x", b"mybot")
    assert robots.allowed("/x", "Mozilla/5.0 (compatible; MyBot/1.0)")


def test_empty_user_agent_obeys_star() -> None:
    robots = rt("User-agent: 123\nAllow: /\nUser-agent: *\nDisallow: /\n")
    assert not robots.allowed("/x", "")
    assert not robots.allowed("/x", "42bot")


# -- rules ---------------------------------------------------------------------


def test_empty_rules_are_ignored_but_end_the_user_agent_run() -> None:
    robots = rt("User-agent: a\nDisallow:\nUser-agent: b\nDisallow: /x\n")
    assert robots.allowed("/x", "a")
    assert not robots.allowed("/x", "b")
    assert robots.rule_count == 1


def test_wildcards_and_anchor() -> None:
    robots = rt("User-agent: *\nDisallow: /*.pdf$\nDisallow: /a*b*c\nAllow: /x*\n")
    assert not robots.allowed("/docs/file.pdf", "bot")
    assert robots.allowed("/docs/file.pdf?x=1", "bot")
    assert not robots.allowed("/a-b-c-d", "bot")
    assert robots.allowed("/a-c-b", "bot")
    assert robots.explain("/xy", "bot").rule == "Allow: /x*"


def test_trailing_star_changes_nothing_but_counts_for_length() -> None:
    robots = rt("User-agent: *\nDisallow: /a*\nAllow: /a\n")
    assert not robots.allowed("/a", "bot")  # "/a*" is one octet longer
    assert rt("User-agent: *\nDisallow: /a\nAllow: /a*\n").allowed("/ab", "bot")


def test_index_html_allows_the_directory() -> None:
    robots = rt("User-agent: *\nDisallow: /dir/\nAllow: /dir/index.html\n")
    assert robots.allowed("/dir/", "bot")
    assert robots.allowed("/dir/index.html", "bot")
    assert not robots.allowed("/dir/other", "bot")
    assert not robots.allowed("/dir/?q", "bot")
    decision = robots.explain("/dir/", "bot")
    assert decision.rule == "Allow: /dir/index.html"
    assert decision.line == 3


def test_percent_encoding_normalisation() -> None:
    robots = rt("User-agent: *\nDisallow: /%7ejoe\nDisallow: /a%2fb\nDisallow: /ü\n")
    assert not robots.allowed("/~joe/x", "bot")
    assert not robots.allowed("/%7Ejoe", "bot")
    assert not robots.allowed("/a%2Fb", "bot")
    assert robots.allowed("/a/b", "bot")  # %2F is reserved: it stays encoded
    assert not robots.allowed("/%C3%BC", "bot")
    assert not robots.allowed("/%c3%bc", "bot")
    assert not robots.allowed("/ü", "bot")
    assert robots.explain("/ü", "bot").rule == "Disallow: /ü"


def test_longest_match_and_allow_wins_ties() -> None:
    robots = rt("User-agent: *\nDisallow: /folder\nAllow: /folder\nDisallow: /folder/p\n")
    assert robots.allowed("/folder/x", "bot")
    assert not robots.allowed("/folder/page", "bot")


def test_robots_txt_is_always_allowed() -> None:
    robots = rt("User-agent: *\nDisallow: /\n")
    assert robots.allowed("https://e.com/robots.txt", "bot")
    assert robots.allowed("/robots.txt?x=1", "bot")
    assert not robots.allowed("/robots.txt.bak", "bot")
    assert robots.explain("/robots.txt", "bot").reason == "robots.txt-always-allowed"


def test_url_forms() -> None:
    robots = rt("User-agent: *\nDisallow: /$\nDisallow: /p?q\n")
    assert not robots.allowed("https://e.com", "bot")  # empty path is "/"
    assert not robots.allowed("https://e.com#frag", "bot")
    assert not robots.allowed("//e.com/p?q=1#f", "bot")
    assert not robots.allowed(b"https://e.com/p?q", "bot")
    assert robots.allowed("https://e.com/p", "bot")


def test_pathological_wildcard_is_correct() -> None:
    robots = rt("User-agent: *\nDisallow: /*a*a*a*a*a*a*a*a*a*a*b\n")
    assert robots.allowed("/" + "a" * 2000, "bot")
    assert not robots.allowed("/" + "a" * 2000 + "b", "bot")


def test_many_rules_use_the_index_correctly() -> None:
    lines = [f"Disallow: /d{i}/" for i in range(60)] + [
        "Allow: /d7/open",
        "Disallow: /*.secret",
        "Allow: /",
        "Disallow: /d1*/deep",
    ]
    robots = rt("User-agent: *\n" + "\n".join(lines) + "\n")
    assert not robots.allowed("/d5/x", "bot")
    assert robots.allowed("/d7/open/x", "bot")
    assert not robots.allowed("/d7/open/x.secret", "bot")
    assert robots.allowed("/e", "bot")
    assert not robots.allowed("/d12x/deep", "bot")
    assert robots.rule_count == 64


# -- explain / API -------------------------------------------------------------


def test_explain_fields_and_allowed_agree() -> None:
    robots = rt("User-agent: MyBot\n\nDisallow: /private # no\n")
    decision = robots.explain("https://e.com/private/x", "MyBot/2.0")
    assert decision == Decision(False, 3, "Disallow: /private", ("mybot",), "rule")
    assert dataclasses.is_dataclass(decision)
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.allowed = True  # type: ignore[misc]
    assert not hasattr(decision, "__dict__")


def test_product_token() -> None:
    assert product_token("MyBot/1.2 (+http://x)") == "MyBot"
    assert product_token(b"my_bot-x 1") == "my_bot-x"
    assert product_token("") == ""
    # a digit never ends a token, nor does it stop one from starting (docs/rfc.md)
    assert product_token("1bot") == "1bot"
    assert product_token("/1.2") == ""


def test_long_user_agent_run_shares_its_rules() -> None:
    names = [
        f"bot{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}{chr(97 + i // 676)}" for i in range(3000)
    ]
    body = "".join(f"User-agent: {name}\n" for name in names) + "Disallow: /x\nCrawl-delay: 1\n"
    robots = rt(body)
    assert not robots.allowed("/x", names[0])
    assert not robots.allowed("/x", names[-1])
    assert robots.crawl_delay(names[1234]) == 1.0
    assert robots.allowed("/x", "other")
