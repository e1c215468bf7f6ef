"""``scrapy robots`` warns of REP_* names scrapy-rep does not read, as a crawl does: REP_*
settings change what the command reports, so a typo must not pass silently."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.commands import ROBOTS, robots, workdir
from tests.support.mockserver import MockServer

__all__ = ["workdir"]  # a fixture used below

TYPO_WARNING = "warning: unknown setting REP_IDLE_WIAT is ignored; did you mean REP_IDLE_WAIT?"


def test_a_typo_is_named_with_the_closest_setting_without_a_fetch(
    subprocess_env: dict[str, str], workdir: Path
) -> None:
    (workdir / "robots.txt").write_text(ROBOTS)
    result = robots(
        ["--file", "robots.txt", "/x", "-s", "REP_IDLE_WIAT=3", "-s", "REP_QQQQQQQQ=1"],
        subprocess_env,
        workdir,
        online=False,
    )
    assert result.returncode == 1, result.stderr  # the report is unchanged
    lines = result.stderr.splitlines()
    assert lines.count(TYPO_WARNING) == 1, result.stderr
    # no close name: no hint
    assert lines.count("warning: unknown setting REP_QQQQQQQQ is ignored") == 1, result.stderr
    assert "unknown setting" not in result.stdout


def test_a_typo_is_named_once_when_the_fetch_runs_the_middleware(
    mockserver: MockServer, host: str, subprocess_env: dict[str, str], workdir: Path
) -> None:
    """With the add-on enabled, the command's internal fetch crawl builds scrapy-rep's
    middleware too, which warns of unknown settings itself: said once all the same."""
    mockserver.configure(host, {"robots": {"body": ROBOTS}})
    addon = json.dumps({"scrapy_rep.Addon": 0})
    result = robots(
        [mockserver.url(host, "/x"), "-s", f"ADDONS={addon}", "-s", "REP_IDLE_WIAT=3"],
        subprocess_env,
        workdir,
    )
    assert result.returncode == 1, result.stderr  # Disallow: / for Scrapy's token
    assert result.stderr.count("unknown setting") == 1, result.stderr
    assert TYPO_WARNING in result.stderr.splitlines(), result.stderr
    assert mockserver.paths(host) == ["/robots.txt"]
