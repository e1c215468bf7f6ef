"""The public RFC 9309 conformance cases (a copy kept in tests/data)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scrapy_rep import RobotsTxt
from tests.support.engine import compiled_robots

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "rfc_cases.json").read_text(encoding="utf-8")
)


def test_case_count() -> None:
    assert len(CASES) == 114


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case: dict[str, Any]) -> None:
    rt = RobotsTxt.parse(case["robots_txt"].encode("utf-8"))
    assert rt.allowed(case["url"], case["user_agent"]) is case["allowed"], case["note"]
    decision = rt.explain(case["url"], case["user_agent"])
    assert decision.allowed is case["allowed"]
    # the same checks on an object whose group was compiled before them:
    compiled = compiled_robots(case["robots_txt"].encode("utf-8"), case["user_agent"])
    assert compiled.allowed(case["url"], case["user_agent"]) is case["allowed"], case["note"]
    assert compiled.explain(case["url"], case["user_agent"]) == decision


@pytest.mark.parametrize("case", CASES[:20], ids=[c["id"] for c in CASES[:20]])
def test_case_as_str(case: dict[str, Any]) -> None:
    rt = RobotsTxt.parse(case["robots_txt"])
    assert rt.allowed(case["url"], case["user_agent"]) is case["allowed"]


# Cases where this engine follows RFC 9309 and Google's library (as packaged by
# fast-robotstxt) does not; docs/rfc.md lists these decisions: /robots.txt is always
# allowed, %XX of an unreserved character equals the character, and a reserved
# %2F stays encoded (the binding's URL parser decodes it).
RFC_OVER_GOOGLE = {
    "RFC9309-2.2.2-robots-txt-allowed#1",
    "RFC9309-2.2.2-robots-txt-allowed#2",
    "RFC9309-2.2.2-percent-decoding#1",
    "RFC9309-2.2.2-percent-decoding#2",
    "RFC9309-2.2.2-percent-decoding#3",
}


def test_differential_against_googles_library() -> None:
    robotstxt = pytest.importorskip("robotstxt", reason="fast-robotstxt is not installed")
    matcher = robotstxt.RobotsMatcher()
    disagreements = set()
    for case in CASES:
        ours = RobotsTxt.parse(case["robots_txt"]).allowed(case["url"], case["user_agent"])
        theirs = matcher.is_allowed(case["robots_txt"], case["user_agent"], case["url"])
        if ours != theirs:
            disagreements.add(case["id"])
    assert disagreements <= RFC_OVER_GOOGLE
