"""A group's first checks scan its rules; later ones use the compiled group.

Both must give the same verdicts: these tests compare them directly, on generated
files that use every feature that changes how a rule matches.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_rep import RobotsTxt
from scrapy_rep._interpreted import COMPILE_AFTER

# Pieces that make rules different for the matcher: wildcards, end anchors (and a
# "$" that is not at the end), escapes that normalise (%61 is "a"), escapes that do
# not (%2F), non-ASCII octets, "/index.html" (which adds an allow rule) and "#".
_PIECES = st.sampled_from(["a", "b", "/", "*", "$", "%61", "%2F", "%2f", "é", "index.html", "#"])
_RULES = st.lists(
    st.tuples(
        st.sampled_from(["Allow", "Disallow", "allow", "disalow"]),
        st.lists(_PIECES, max_size=5).map("".join),
    ),
    max_size=25,
)
_AGENTS = st.sampled_from(["*", "bot", "other"])
_PATHS = st.lists(
    st.lists(st.sampled_from(["a", "b", "/", "%61", "%2F", "é", "$", "*", "index.html", "?"]))
    .map("".join)
    .map(lambda p: "/" + p.lstrip("/")),
    min_size=1,
    max_size=2 * COMPILE_AFTER,
)


def compiled(body: str, agent: str = "bot") -> RobotsTxt:
    """*body* parsed, with the group *agent* obeys already compiled."""
    robots = RobotsTxt.parse(body)
    for _ in range(COMPILE_AFTER + 1):
        robots.allowed("/", agent)
    token = robots._token(agent)
    assert token is None or isinstance(robots._groups[token], tuple)
    return robots


def _file(groups: list[tuple[str, list[tuple[str, str]]]]) -> str:
    return "".join(
        f"User-agent: {agent}\n" + "".join(f"{field}: /{pattern}\n" for field, pattern in rules)
        for agent, rules in groups
    )


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_AGENTS, _RULES), min_size=1, max_size=4), _PATHS)
def test_scanned_checks_agree_with_the_compiled_group(
    groups: list[tuple[str, list[tuple[str, str]]]], paths: list[str]
) -> None:
    body = _file(groups)  # same-name groups merge: several runs per group
    reference = compiled(body)
    scanned = RobotsTxt.parse(body)
    for path in paths:
        url = "https://example.com" + path
        assert scanned.allowed(url, "bot") is reference.allowed(url, "bot"), path
        assert scanned.allowed(path.encode(), "bot") is reference.allowed(path, "bot"), path


def test_a_group_is_compiled_after_its_scanned_checks() -> None:
    robots = RobotsTxt.parse("User-agent: *\nDisallow: /private\nAllow: /private/open\n")
    for i in range(COMPILE_AFTER):
        assert not robots.allowed(f"/private/{i}", "bot")
        assert isinstance(robots._groups["*"], list)  # still the parsed runs
    assert robots.allowed("/private/open/x", "bot")  # this check compiles the group
    assert isinstance(robots._groups["*"], tuple)
    assert robots._scans is None  # the scan state is dropped with the last scan
    assert not robots.allowed("/private/x", "bot")
    assert robots.allowed("/robots.txt", "bot")


def test_scans_are_counted_per_group() -> None:
    robots = RobotsTxt.parse("User-agent: a\nDisallow: /a\n\nUser-agent: *\nDisallow: /\n")
    for _ in range(COMPILE_AFTER):
        assert not robots.allowed("/a", "a")
        assert not robots.allowed("/a", "b")  # "*": its own count
    assert isinstance(robots._groups["a"], list)
    assert isinstance(robots._groups["*"], list)
    assert robots.allowed("/robots.txt", "A")
    assert isinstance(robots._groups["a"], tuple)
    assert isinstance(robots._groups["*"], list)


def test_explain_scans_too_and_counts_towards_compiling() -> None:
    robots = RobotsTxt.parse("User-agent: *\nDisallow: /x%61\nAllow: /x%61/index.html\n")
    assert not robots.allowed("/xa", "bot")
    for _ in range(COMPILE_AFTER - 1):
        assert robots.explain("/x%61b", "bot").rule == "Disallow: /x%61"
    assert isinstance(robots._groups["*"], list)
    decision = robots.explain("/xa/", "bot")  # the derived "Allow: /xa/$" of line 3
    assert (decision.allowed, decision.line, decision.rule) == (True, 3, "Allow: /x%61/index.html")
    assert isinstance(robots._groups["*"], tuple)
    assert robots._scans is None
    assert robots.explain("/x%61b", "bot").rule == "Disallow: /x%61"


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_AGENTS, _RULES), min_size=1, max_size=4), _PATHS)
def test_scanned_explain_names_the_rule_the_compiled_group_names(
    groups: list[tuple[str, list[tuple[str, str]]]], paths: list[str]
) -> None:
    """Equally long rules of one kind give the same verdict; the line named must not
    change when the group is compiled."""
    body = _file(groups)
    reference = compiled(body)
    for path in paths:
        scanned = RobotsTxt.parse(body)  # fresh each time: every explain() scans
        assert scanned.explain(path, "bot") == reference.explain(path, "bot"), path


def test_user_agent_of_any_text_type_is_remembered_by_value() -> None:
    robots = RobotsTxt.parse("User-agent: bot\nDisallow: /\n\nUser-agent: *\nAllow: /\n")
    for _ in range(COMPILE_AFTER + 2):
        assert not robots.allowed("/p", bytearray(b"bot/1.0"))
        assert not robots.allowed("/p", memoryview(b"bot"))
        assert robots.allowed("/p", "other")
    agent = bytearray(b"bot")
    assert not robots.allowed("/p", agent)
    agent[:] = b"zzz"  # a mutable agent changed in place is not the remembered one
    assert robots.allowed("/p", agent)
