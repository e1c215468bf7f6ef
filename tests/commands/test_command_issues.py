"""``scrapy robots`` prints what the parser did not take as written (text and --json),
from a real subprocess on a local file."""

from __future__ import annotations

from pathlib import Path

from tests.support.commands import as_json, robots, workdir

__all__ = ["workdir"]  # a fixture used below

FILE = (
    "Disallow: /early\n"  # line 1: before the first group
    "User-agent: mybot\n"
    "Disalow: /typo\n"  # line 3: accepted typo
    "Host: example.com\n"  # line 4: unknown field
    "Crawl-delay: abc\n"  # line 5: invalid value
    "Sitemap: /relative.xml\n"  # line 6: not absolute
    "disallow /nocolon\n"  # line 7: missing colon
)


def test_issues_in_text_and_json(subprocess_env: dict[str, str], workdir: Path) -> None:
    (workdir / "robots.txt").write_text(FILE)
    result = robots(
        ["--file", "robots.txt", "--user-agent", "mybot", "/typo"],
        subprocess_env,
        workdir,
        online=False,
    )
    assert result.returncode == 1, result.stderr
    out = result.stdout
    assert "  issues: 6 (rule-outside-group 1, unknown-field 1, invalid-value 2, typo 1, " in out
    assert "    line 1: rule-outside-group: Disallow: /early" in out
    assert "    line 3: typo: Disalow: /typo" in out
    assert "    line 5: invalid-value: Crawl-delay: abc" in out
    assert "    line 7: missing-colon: disallow /nocolon" in out

    result = robots(
        ["--file", "robots.txt", "--json", "--user-agent", "mybot", "/x"],
        subprocess_env,
        workdir,
        online=False,
    )
    issues = as_json(result)["origins"][0]["issues"]
    assert issues["counts"]["invalid-value"] == 2
    assert {"line": 6, "kind": "invalid-value", "text": "Sitemap: /relative.xml"} in issues["lines"]
    assert [issue["line"] for issue in issues["lines"]] == [1, 3, 4, 5, 6, 7]
