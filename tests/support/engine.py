"""A parsed robots.txt with the group an agent obeys compiled ahead of its first check."""

from __future__ import annotations

from scrapy_rep import RobotsTxt


def compiled_robots(body: str | bytes, agent: str = "bot") -> RobotsTxt:
    """*body* parsed, with the group *agent* obeys compiled now: checks then use the
    compiled group (as after its first check)."""
    robots = RobotsTxt.parse(body)
    token = robots._token(agent)
    if token is not None:
        robots._group(token)
        assert not isinstance(robots._groups[token], list)
    return robots
