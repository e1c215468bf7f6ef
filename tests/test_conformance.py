"""The public RFC 9309 conformance cases (a copy kept in tests/data)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scrapy_rep import RobotsTxt

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "rfc_cases.json").read_text(encoding="utf-8")
)


def test_case_count() -> None:
    assert len(CASES) == 114


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case: dict[str, Any]) -> None:
    rt = RobotsTxt.parse(case["robots_txt"].encode("utf-8"))
    assert rt.allowed(case["url"], case["user_agent"]) is case["allowed"], case["note"]
    decision = rt.explain(case["url"], case["user_agent"])
    assert decision.allowed is case["allowed"]


@pytest.mark.parametrize("case", CASES[:20], ids=[c["id"] for c in CASES[:20]])
def test_case_as_str(case: dict[str, Any]) -> None:
    rt = RobotsTxt.parse(case["robots_txt"])
    assert rt.allowed(case["url"], case["user_agent"]) is case["allowed"]
