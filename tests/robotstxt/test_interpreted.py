"""A group's first checks scan its rules; later ones use the compiled group.

Both must give the same verdicts: these tests compare them directly, on generated
files that use every feature that changes how a rule matches.  They also check when a
group stops scanning (see the cost model in scrapy_rep.robotstxt._interpreted).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_rep import RobotsTxt
from scrapy_rep.robotstxt._interpreted import (
    COMPILE_FIXED,
    COMPILE_PER_RULE,
    COMPILE_WILDCARDS,
    SCAN_FIXED,
    SCAN_MAX_RULES,
    SCAN_PER_WILDCARD_MATCH,
)
from tests.engine_helpers import compiled_robots

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
    max_size=16,
)


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
    reference = compiled_robots(body)
    scanned = RobotsTxt.parse(body)
    for path in paths:
        url = "https://example.com" + path
        assert scanned.allowed(url, "bot") is reference.allowed(url, "bot"), path
        assert scanned.allowed(path.encode(), "bot") is reference.allowed(path, "bot"), path


def scans_before_compiling(robots: RobotsTxt, token: str, check: Callable[[int], None]) -> int:
    """How many checks *check* (a callable taking the check's number) answers before
    the group *token* is compiled."""
    scans = 0
    while isinstance(robots._groups[token], list):
        check(scans)
        scans += 1
        assert scans < 1000
    return scans - 1  # the last check compiled the group


def expected_scans(rules: int, wildcard_matches_per_scan: int = 0) -> int:
    """Scans the cost model allows before compiling (see _interpreted)."""
    budget = COMPILE_FIXED + COMPILE_PER_RULE * rules
    per_scan = SCAN_FIXED + rules + SCAN_PER_WILDCARD_MATCH * wildcard_matches_per_scan
    return -(-budget // per_scan)  # scans until the budget is spent, rounded up


def test_a_group_is_scanned_until_scanning_cost_what_compiling_would() -> None:
    robots = RobotsTxt.parse("User-agent: *\nDisallow: /private\nAllow: /private/open\n")

    def check(n: int) -> None:
        assert not robots.allowed(f"/private/{n}", "bot")

    assert scans_before_compiling(robots, "*", check) == expected_scans(2)
    assert robots._scans is None  # the scan state is dropped once compiled
    assert robots.allowed("/private/open/x", "bot")
    assert not robots.allowed("/private/x", "bot")
    assert robots.allowed("/robots.txt", "bot")


def test_a_group_whose_scans_cost_as_much_as_compiling_is_compiled_at_once() -> None:
    """Thousands of wildcard rules that every path needs matched in full."""
    rules = "".join(f"Disallow: /*a*{i}b\n" for i in range(3000))
    robots = RobotsTxt.parse("User-agent: *\n" + rules)

    def check(n: int) -> None:
        assert robots.allowed("/" + "a" * 50, "bot")

    assert expected_scans(3000, 3000) == 1
    # from COMPILE_WILDCARDS wildcard rules there is no scan at all: the compiled group
    # looks for all the probes in one pass (see _probes)
    assert scans_before_compiling(robots, "*", check) == 0


def test_a_group_of_few_wildcard_rules_is_still_scanned_first() -> None:
    rules = "".join(
        f"Disallow: /*a*{i}b\n" for i in range(min(COMPILE_WILDCARDS - 1, SCAN_MAX_RULES))
    )
    robots = RobotsTxt.parse("User-agent: *\n" + rules)

    def check(n: int) -> None:
        assert robots.allowed("/" + "a" * 50, "bot")

    assert scans_before_compiling(robots, "*", check) >= 1


def test_a_group_of_many_rules_is_compiled_at_its_first_check() -> None:
    """A scan of more than SCAN_MAX_RULES rules would cost more than twice a compiled
    check (bench_parser.py measures both)."""
    rules = "".join(f"Disallow: /p{i}\n" for i in range(SCAN_MAX_RULES + 1))
    robots = RobotsTxt.parse("User-agent: *\n" + rules)

    def check(n: int) -> None:
        assert not robots.allowed("/p1", "bot")

    assert scans_before_compiling(robots, "*", check) == 0


def test_scans_are_counted_per_group() -> None:
    body = "User-agent: a\nDisallow: /a\n\nUser-agent: *\nDisallow: /\n"
    robots = RobotsTxt.parse(body)
    for _ in range(expected_scans(1) - 1):
        assert not robots.allowed("/a", "a")
        assert not robots.allowed("/a", "b")  # "*": its own count
    for _ in range(100):
        assert robots.allowed("/robots.txt", "A")  # always allowed: not a scan
    assert isinstance(robots._groups["a"], list)
    assert robots.allowed("/x", "A")  # the last scan
    assert isinstance(robots._groups["a"], list)
    assert not robots.allowed("/a", "a")  # compiles "a"
    assert not isinstance(robots._groups["a"], list)
    assert isinstance(robots._groups["*"], list)


def test_explain_scans_too_and_counts_towards_compiling() -> None:
    body = "User-agent: *\nDisallow: /x%61\nAllow: /x%61/index.html\n"
    robots = RobotsTxt.parse(body)
    # the index.html rule adds "Allow: /xa/$" to the two written: three rules; the
    # paths below do not start with "/xa/", so it is never matched in full
    scans = expected_scans(3)

    def check(n: int) -> None:
        assert robots.explain(f"/x%61b{n}", "bot").rule == "Disallow: /x%61"

    assert scans_before_compiling(robots, "*", check) == scans
    assert robots._scans is None
    scanned = RobotsTxt.parse(body)
    decision = scanned.explain("/xa/", "bot")  # the derived "Allow: /xa/$" of line 3
    assert (decision.allowed, decision.line, decision.rule) == (True, 3, "Allow: /x%61/index.html")
    assert isinstance(scanned._groups["*"], list)
    assert robots.explain("/xa/", "bot") == decision


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_AGENTS, _RULES), min_size=1, max_size=4), _PATHS)
def test_scanned_explain_names_the_rule_the_compiled_group_names(
    groups: list[tuple[str, list[tuple[str, str]]]], paths: list[str]
) -> None:
    """Equally long rules of one kind give the same verdict; the line named must not
    change when the group is compiled."""
    body = _file(groups)
    reference = compiled_robots(body)
    for path in paths:
        scanned = RobotsTxt.parse(body)  # fresh each time: every explain() scans
        assert scanned.explain(path, "bot") == reference.explain(path, "bot"), path


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_AGENTS, _RULES), min_size=1, max_size=4), _PATHS)
def test_remembered_explain_gives_what_a_first_explain_gives(
    groups: list[tuple[str, list[tuple[str, str]]]], paths: list[str]
) -> None:
    """Once a group is compiled, explain() remembers the agent and each deciding
    rule's Decision: it must answer as a fresh object's first explain() does, agree
    with allowed(), and give the same Decision again, whatever agent came between."""
    body = _file(groups)
    remembered = compiled_robots(body)
    compiled_robots(body, "zzz")  # (compiles "*" too, if "zzz" obeys it)
    for path in [*paths, "/robots.txt?x", *paths]:
        url = "https://example.com" + path
        expected = compiled_robots(body).explain(url, "bot")  # a first explain
        decision = remembered.explain(url, "bot")
        assert decision == expected, path
        assert remembered.explain(path, "bot") == expected, path
        assert remembered.allowed(url, "bot") is decision.allowed, path
        assert remembered.explain(url, "zzz") == compiled_robots(body, "zzz").explain(url, "zzz")
        assert remembered.explain(url, "bot") is decision  # built once


def test_user_agent_of_any_text_type_is_remembered_by_value() -> None:
    robots = RobotsTxt.parse("User-agent: bot\nDisallow: /\n\nUser-agent: *\nAllow: /\n")
    for _ in range(30):  # scanned, then compiled
        assert not robots.allowed("/p", bytearray(b"bot/1.0"))
        assert not robots.allowed("/p", memoryview(b"bot"))
        assert robots.allowed("/p", "other")
    agent = bytearray(b"bot")
    assert not robots.allowed("/p", agent)
    agent[:] = b"zzz"  # a mutable agent changed in place is not the remembered one
    assert robots.allowed("/p", agent)


_NAMES = ("alpha", "bravo", "charlie", "delta")


def _ask_as(robots: RobotsTxt, i: int, failures: list[str]) -> None:
    agent = f"{_NAMES[i]}/1.0"
    for n in range(300):
        mine, other = f"/only-{i}/{n}", f"/only-{(i + 1) % 4}/{n}"
        if robots.allowed(mine, agent) or not robots.allowed(other, agent):
            failures.append(f"{agent} {n}")
        if n % 50 == 0 and robots.explain(mine, agent).line != 4 * i + 2:
            failures.append(f"{agent} explain {n}")


def test_threads_sharing_one_object_get_their_own_groups_answers() -> None:
    """Checks build state as they go (scans, compiled groups, the remembered agent);
    threads asking with different agents must never get another agent's answer."""
    body = "".join(
        f"User-agent: {name}\nDisallow: /only-{i}/\nDisallow: /*.x{i}$\n\n"
        for i, name in enumerate(_NAMES)
    )
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        for _ in range(20):
            robots = RobotsTxt.parse(body)
            failures: list[str] = []
            threads = [
                threading.Thread(target=_ask_as, args=(robots, i, failures)) for i in range(4)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert not failures, failures[:5]
    finally:
        sys.setswitchinterval(interval)
