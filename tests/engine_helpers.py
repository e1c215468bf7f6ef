"""Helpers for the engine's tests."""

from __future__ import annotations

from scrapy_rep import RobotsTxt


def compiled_robots(body: str | bytes, agent: str = "bot") -> RobotsTxt:
    """*body* parsed, with the group *agent* obeys compiled now: checks then use the
    compiled group, never a scan (see scrapy_rep.robotstxt._interpreted)."""
    robots = RobotsTxt.parse(body)
    token = robots._token(agent)
    if token is not None:
        robots._group(token)
        assert not isinstance(robots._groups[token], list)
    return robots
