"""Product tokens with digits and non-ASCII letters, RFC 9309 §2.2.2 escapes, and the
line-level details of Google's library (docs/rfc.md: tokens, UA value, encoding,
lines, input)."""

from __future__ import annotations

import pytest

from scrapy_rep import RobotsTxt, product_token
from tests.support.engine import compiled_robots

# -- product tokens ------------------------------------------------------------

AGENTS = "User-agent: Agent1\nDisallow: /1\n\nUser-agent: Agent2 Agent3\nDisallow: /2\n\n"
AGENTS += "User-agent: Agent4\nDisallow: /4\n\nUser-agent: *\nDisallow: /star\n"


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize(
    ("agent", "blocked"),
    [
        ("agent1", "/1"),
        ("agent2", "/2"),
        ("agent3", "/star"),  # "Agent2 Agent3": the value's token is agent2 only
        ("agent4", "/4"),
        ("agent5", "/star"),
        ("Agent1/2.0 (+http://x)", "/1"),
    ],
)
def test_groups_named_with_digits_stay_apart(
    eol: str, compiled: bool, agent: str, blocked: str
) -> None:
    body = AGENTS.replace("\n", eol)
    robots = compiled_robots(body, agent) if compiled else RobotsTxt.parse(body)
    for path in ("/1", "/2", "/4", "/star"):
        assert robots.allowed(path, agent) is (path != blocked), (agent, path)


@pytest.mark.parametrize(
    ("file_agent", "crawler", "obeys"),
    [
        ("MJ12bot", "MJ12bot/v1.4.8 (http://mj12bot.com/)", True),
        ("MJ12bot", "mj", False),
        ("MJ12bot", "MJ13bot", False),
        ("360Spider", "360Spider", True),
        ("360Spider", "Spider", False),
        ("Rule1TestBot", "Rule1TestBot", True),
        ("Rule1TestBot", "Rule2TestBot", False),
        ("Jävla-Foobot", "jävla-foobot", True),
        ("Jävla-Foobot", "Jävla-Fanbot", False),
        ("googlebot/2.1", "Googlebot", True),
        ("googlebot*", "Googlebot", True),
    ],
)
def test_token_rule_applies_to_file_and_crawler(file_agent: str, crawler: str, obeys: bool) -> None:
    robots = RobotsTxt.parse(f"User-agent: {file_agent}\nDisallow: /x\n")
    assert robots.allowed("/x", crawler) is not obeys


def test_rule1_and_rule2_bots_have_their_own_groups() -> None:
    body = "User-agent: Rule1TestBot\nDisallow: /one\n\nUser-agent: Rule2TestBot\nDisallow: /two\n"
    robots = RobotsTxt.parse(body)
    assert not robots.allowed("/one", "Rule1TestBot")
    assert robots.allowed("/two", "Rule1TestBot")
    assert not robots.allowed("/two", "Rule2TestBot")
    assert robots.allowed("/one", "Rule2TestBot")


def test_non_ascii_tokens_in_bytes_files_and_crawler_names() -> None:
    body = "User-agent: Jävla-Foobot\nDisallow: /foo\n\nUser-agent: jävla-fanbot\nDisallow: /fan\n"
    for robots in (RobotsTxt.parse(body), RobotsTxt.parse(body.encode())):
        assert not robots.allowed("/foo", "JÄVLA-FOOBOT/1.0")
        assert robots.allowed("/fan", "Jävla-Foobot")
        assert not robots.allowed("/fan", "jävla-fanbot")


def test_product_token_rule() -> None:
    assert product_token("MJ12bot/v1.4") == "MJ12bot"
    assert product_token("360Spider") == "360Spider"
    assert product_token("Jävla-Foobot/1") == "Jävla-Foobot"
    assert product_token("bot٣x") == "bot"  # a non-ASCII digit is not a letter
    assert product_token("bot²") == "bot"
    assert product_token("a b") == "a"
    assert product_token(b"J\xc3\xa4vla") == "Jävla"


# -- encoding (RFC 9309 §2.2.2) -------------------------------------------------


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize(
    ("rule", "url"),
    [
        ("/a b", "/a%20b"),
        ("/a b", "https://e.com/a%20b?q"),
        ('/q"x', "/q%22x"),
        ("/<x>", "/%3Cx%3E"),
        ("/a\\b", "/a%5Cb"),
        ("/a^b", "/a%5Eb"),
        ("/a`b", "/a%60b"),
        ("/{x}", "/%7Bx%7D"),
        ("/a|b", "/a%7Cb"),
        ("/a\x01b", "/a%01b"),
        ("/a b", "/a b"),  # a URL given unescaped compares escaped too
        ("/100%", "/100%25"),
        ("/100%", "/100%"),
        ("/%zz", "/%25zz"),
        ("/*x y$", "/ax%20y"),
    ],
)
def test_characters_outside_uris_are_escaped(compiled: bool, rule: str, url: str) -> None:
    body = f"User-agent: *\nDisallow: {rule}\n"
    robots = compiled_robots(body) if compiled else RobotsTxt.parse(body)
    assert not robots.allowed(url, "bot")
    decision = robots.explain(url, "bot")
    assert decision.rule == f"Disallow: {rule}"  # as written, not normalised
    assert decision.line == 2


def test_escaped_rules_do_not_overreach() -> None:
    robots = RobotsTxt.parse("User-agent: *\nDisallow: /a b\nDisallow: /%zz\n")
    assert robots.allowed("/a", "bot")
    assert robots.allowed("/a+b", "bot")
    assert robots.allowed("/zz", "bot")
    assert robots.allowed("/%7Azz", "bot")  # %7A is "z": "/zzz", not "/%zz"


# -- lines and input -------------------------------------------------------------


@pytest.mark.parametrize("bom", [b"\xef\xbb\xbf", b"\xef\xbb", b"\xef", b""])
def test_leading_bom_or_part_of_one_is_ignored(bom: bytes) -> None:
    robots = RobotsTxt.parse(bom + b"User-agent: *\nDisallow: /x\n")
    assert not robots.allowed("/x", "bot")
    assert robots.issues == ()


def test_a_rule_cut_at_the_line_limit_matches_as_googles() -> None:
    line = b"Disallow: /" + b"a" * 17_000
    robots = RobotsTxt.parse(b"User-agent: *\n" + line + b"\n")
    kept = 16_663 - len(b"Disallow: /")
    assert not robots.allowed("/" + "a" * kept, "bot")
    assert robots.allowed("/" + "a" * (kept - 1), "bot")


@pytest.mark.parametrize(
    ("line", "blocked"),
    [
        ("disallow /x", True),
        ("disallow\t/x", True),
        ("disallow \t /x", True),
        ("disallow\x0b/x", False),  # only a space or a tab separates them
        ("disallow\x0c/x", False),
        ("disallow /x /y", False),  # more than two words: prose, not a field
    ],
)
def test_colonless_field_separated_by_space_or_tab_only(line: str, blocked: bool) -> None:
    robots = RobotsTxt.parse(f"User-agent: *\n{line}\n")
    assert robots.allowed("/x", "bot") is not blocked
