"""Parsing and preparing in bounded steps (RobotsTxt.parse_steps, prepare_steps) give
exactly what parse() and a first check's compile give: the hostile shapes of
benchmarks/bench_adversarial.py scaled down, the conformance cases' files, and
hypothesis files; with steps of a few lines, so that every pause point is crossed."""

from __future__ import annotations

import json
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_rep import RobotsTxt
from scrapy_rep.robotstxt._compile import STEPS_FROM, WALK_STEP, compile_group, compile_steps
from scrapy_rep.robotstxt._matcher import GRAMS_STEP, Group
from scrapy_rep.robotstxt._parser import run_rules
from tests.robotstxt.test_properties import lines as robots_lines

T = TypeVar("T")
CASES = json.loads((Path(__file__).parents[1] / "data" / "rfc_cases.json").read_text())
AGENTS = ("bot", "bot7", "ExampleBot", "Googlebot", "foobot", "zzz")


def run(steps: Generator[None, None, T]) -> tuple[T, int]:
    """What *steps* returns, and how many steps it took."""
    n = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value, n
        n += 1


def groups_of(robots: RobotsTxt) -> dict[str, Any]:
    """Each token's group: compiled, or its runs as their rules."""
    return {
        token: [run_rules(r) for r in runs] if isinstance(runs, list) else runs
        for token, runs in robots._groups.items()
    }


def state(robots: RobotsTxt) -> dict[str, Any]:
    """Everything a parse leaves in a RobotsTxt (runs as their rules)."""
    return {
        "groups": groups_of(robots),
        "extensions": {k: vars_of(v) for k, v in (robots._extensions or {}).items()},
        "preamble": vars_of(robots._preamble_summary),
        "lines": robots._extension_lines,
        "preamble_lines": robots._preamble,
        "originals": robots._originals,
        "issues": robots.issues,
        "counts": robots.issue_counts,
        "sitemaps": robots.sitemaps,
        "truncated": robots.truncated,
        "rules": robots.rule_count,
    }


def vars_of(found: Any) -> Any:
    return None if found is None else (found.delay, found.rate, found.signals)


def assert_same_parse(body: bytes | str, step: int, max_size: int = 512_000) -> RobotsTxt:
    stepped, n = run(RobotsTxt.parse_steps(body, max_size, step=step))
    assert state(stepped) == state(RobotsTxt.parse(body, max_size))
    assert n >= 1
    return stepped


def assert_same_prepare(body: bytes | str, agent: str) -> int:
    """prepare_steps builds the group a first check would have, and the answers are
    the same; returns the number of steps."""
    stepped = RobotsTxt.parse(body)
    _, n = run(stepped.prepare_steps(agent))
    direct = RobotsTxt.parse(body)
    direct.prepare(agent)
    token = direct._token(agent)
    if token is not None:
        assert isinstance(direct._groups[token], Group)
        assert groups_of(stepped)[token] == groups_of(direct)[token]
        assert stepped._originals == direct._originals
    for path in ("/", "/a", "/1", "/a1", "/x1", "/private", "/" + "a" * 300, "/abc" * 50):
        assert stepped.explain(path, agent) == direct.explain(path, agent)
    return n


def _fill(head: str, rule: Callable[[int], str], size: int) -> str:
    lines, total = [head], len(head)
    while total < size:
        lines.append(rule(len(lines)))
        total += len(lines[-1])
    return "".join(lines)


def _short_probe(n: int) -> str:
    letters = "defghijklmnopqrstuvwxy"
    return letters[n % 22] + letters[n // 22 % 22] + letters[n // 484 % 22]


# bench_adversarial.py's shapes, 60 KiB instead of 500 KiB (the same pause points)
SIZE = 60 * 1024
G = "User-agent: *\n"
SHAPES: dict[str, str] = {
    "agents x signals": (
        "".join(f"useragent: bot{n}\n" for n in range(2_000))
        + "content-signal: search=yes, ai-train=no\n" * 1_500
    ),
    "costly absent probes": _fill(
        G, lambda n: f"Disallow: /{'a' * 40}*{'a' * 40}X{n}{'a' * 40}\n", SIZE
    ),
    "short absent probes": _fill(G, lambda n: f"Disallow: /*{_short_probe(n)}\n", SIZE),
    "rules of many $": _fill(G, lambda n: f"Disallow: /{n}{'$' * 2_000}\n", SIZE),
    "rules of many %7e": _fill(G, lambda n: f"Disallow: /{n}{'%7e' * 600}\n", SIZE),
    "one-rule groups": _fill("", lambda n: f"User-agent: bot{n}\nDisallow: /{n}\n", SIZE),
    "wildcards matched in full": _fill(G, lambda n: f"Disallow: /*a{n}\n", SIZE),
    "wildcards of three pieces": _fill(G, lambda n: f"Disallow: /*a*b*c{n}\n", SIZE),
    "anchored wildcard allows": _fill(G, lambda n: f"Allow: /*x{n}$\n", SIZE),
    "one slow rule repeated": _fill(G, lambda n: "Disallow: /*a*a*a*a*a*a*a*a*a*a*b\n", SIZE),
    "plain prefixes": _fill(G, lambda n: f"Disallow: /{n}\n", SIZE),
    "escaped prefixes": _fill(G, lambda n: f"Disallow: /%7e{n}\n", SIZE),
    "escapes and spaces": _fill(G, lambda n: f"Allow: /a b%c3%a9{n}*$\n", SIZE),
    "full-match wildcards": _fill(G, lambda n: f"Disallow: /{n}*$\n", SIZE),
    "literals written with stars": _fill(G, lambda n: f"Disallow: /{n}**\n", SIZE),
    "index.html allows": _fill(G, lambda n: f"Allow: /{n}/index.html\n", SIZE),
    "long long probes": _fill(G, lambda n: f"Disallow: /*{n:05d}{'q' * 12}{n:05d}\n", SIZE),
    "crawl-delays of many groups": _fill(
        "", lambda n: f"User-agent: bot{n}\nCrawl-delay: {n % 7}\nDisallow: /{n}\n", SIZE
    ),
    "a preamble of signals": "content-signal: ai-train=no\n" * 3_000
    + "crawl-delay: 3\nUser-agent: *\nDisallow: /x\n",
    "page markup": "<html>\n" + "<p>text</p>\nDisallow: /a\n" * 2_000 + "User-agent: *\n",
    "a file cut at the size limit": _fill(G, lambda n: f"Disallow: /{n}\n", SIZE),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_hostile_shapes_parse_the_same_in_steps(shape: str) -> None:
    body = SHAPES[shape]
    max_size = 40_000 if "size limit" in shape else 512_000
    for step in (1, 7, 512):
        assert_same_parse(body, step, max_size)
    # bytes, as a crawl parses them
    assert_same_parse(body.encode(), 512, max_size)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_hostile_shapes_prepare_the_same_in_steps(shape: str) -> None:
    for agent in ("bot", "bot7"):
        assert_same_prepare(SHAPES[shape], agent)


def test_a_large_group_compiles_in_several_steps() -> None:
    """A group of STEPS_FROM rules or more pauses between passes (and inside the
    prefix forest and the probe index), a smaller one compiles in one go."""
    big = _fill(G, lambda n: f"Disallow: /{n}\n", 40 * WALK_STEP)
    assert assert_same_prepare(big, "bot") > 8
    probes = "User-agent: *\n" + "".join(
        f"Disallow: /*{n:05d}{'q' * 12}\n" for n in range(2 * GRAMS_STEP + 5)
    )
    assert assert_same_prepare(probes, "bot") > 8
    small = RobotsTxt.parse("User-agent: *\n" + "Disallow: /a*b\n" * (STEPS_FROM - 1))
    rules = [run_rules(r) for r in small._groups["*"]]  # type: ignore[union-attr]
    assert len(list(compile_steps(rules, {}, {}))) == 1
    assert list(compile_steps(rules, {}, {}))[-1] == compile_group(rules, {}, {})


def test_a_group_of_few_long_rules_is_compiled_in_steps() -> None:
    """Eight rules of 12,000 "$" (96 KiB of patterns): the compile normalises them in
    slices, several steps."""
    body = G + "".join(f"Disallow: /{n}{'$' * 12_000}\n" for n in range(8))
    assert assert_same_prepare(body, "bot") > 4


def test_a_large_file_parses_in_steps_of_lines() -> None:
    body = SHAPES["one-rule groups"]
    _, n = run(RobotsTxt.parse_steps(body, step=100))
    assert n >= body.count("\n") // 100


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_conformance_files_parse_and_prepare_the_same_in_steps(case: dict[str, Any]) -> None:
    body = case["robots_txt"]
    assert_same_parse(body, 1)
    for agent in (case["user_agent"], *AGENTS):
        assert_same_prepare(body, agent)
    stepped, _ = run(RobotsTxt.parse_steps(body, step=2))
    run(stepped.prepare_steps(case["user_agent"]))
    if not case.get("google_only"):
        assert stepped.allowed(case["url"], case["user_agent"]) is case["allowed"]


def test_prepare_steps_with_no_group_or_a_compiled_one_take_no_step() -> None:
    robots = RobotsTxt.parse("User-agent: a\nDisallow: /x\n")
    assert run(robots.prepare_steps("b")) == (None, 0)  # no group applies
    robots._group("a")
    assert run(robots.prepare_steps("a")) == (None, 0)


def test_a_group_compiled_between_steps_is_kept() -> None:
    """A check between two steps compiles the group itself; the steps keep it."""
    body = SHAPES["plain prefixes"]
    robots = RobotsTxt.parse(body)
    steps = robots.prepare_steps("bot")
    next(steps)
    next(steps)
    assert robots.allowed("/1", "bot") is False  # compiles it now
    group = robots._groups["*"]
    assert isinstance(group, Group)
    run(steps)
    assert robots._groups["*"] is group
    assert robots.allowed("/x", "bot") is True


@settings(max_examples=200, deadline=None)
@given(st.lists(robots_lines, max_size=30), st.integers(1, 5))
def test_any_file_parses_and_prepares_the_same_in_steps(found: list[str], step: int) -> None:
    body = "\n".join(found)
    assert_same_parse(body, step)
    for agent in ("a", "b", "zzz"):
        assert_same_prepare(body, agent)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=600), st.integers(1, 4))
def test_any_bytes_parse_the_same_in_steps(body: bytes, step: int) -> None:
    assert_same_parse(body, step)
