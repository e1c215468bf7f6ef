"""A group's first check compiles it (only the group asked about), and later checks
and explains, remembered per user agent, answer as a fresh object's first one does."""

from __future__ import annotations

import sys
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_rep import RobotsTxt
from scrapy_rep.robotstxt._matcher import Group
from tests.support.engine import compiled_robots

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


def test_only_the_group_asked_about_is_compiled_at_its_first_check() -> None:
    body = "User-agent: a\nDisallow: /a\n\nUser-agent: *\nDisallow: /\n"
    robots = RobotsTxt.parse(body)
    assert isinstance(robots._groups["a"], list) and isinstance(robots._groups["*"], list)
    assert robots.allowed("/robots.txt", "A")  # always allowed, yet its group compiled
    assert isinstance(robots._groups["a"], Group)
    assert isinstance(robots._groups["*"], list)
    assert not robots.allowed("/a", "a") and robots.allowed("/x", "a")
    assert not robots.allowed("/x", "b")  # "*": compiled at its own first check
    assert isinstance(robots._groups["*"], Group)


def test_a_first_explain_names_the_rule_as_written() -> None:
    body = "User-agent: *\nDisallow: /x%61\nAllow: /x%61/index.html\n"
    decision = RobotsTxt.parse(body).explain("/xa/", "bot")  # the derived "Allow: /xa/$"
    assert (decision.allowed, decision.line, decision.rule) == (True, 3, "Allow: /x%61/index.html")
    assert RobotsTxt.parse(body).explain("/xab", "bot").rule == "Disallow: /x%61"


@pytest.mark.slow
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
    for _ in range(30):
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
    """Checks build state as they go (compiled groups, the remembered agent);
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
