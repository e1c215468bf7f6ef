"""``scrapy robots`` shows each URL's usage preferences (docs/usage.md), text and JSON."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.commands import as_json, robots, workdir
from tests.support.mockserver import MockServer

__all__ = ["workdir"]  # a fixture used below

USAGE_ROBOTS = (
    "User-agent: *\n"
    "Disallow: /private\n"
    "Content-Usage: / train-ai=n\n"
    "Content-Usage: /open/ train-ai=y\n"
    "Content-Signal: search=yes, use=reference\n"
)


@pytest.mark.slow
def test_preferences_per_url_text_and_json(
    mockserver: MockServer, host: str, subprocess_env: dict[str, str], workdir: Path
) -> None:
    mockserver.configure(host, {"robots": {"body": USAGE_ROBOTS}})
    urls = [mockserver.url(host, p) for p in ("/open/a", "/closed", "/private/x")]
    text = robots(urls, subprocess_env, workdir)
    assert text.returncode == 1, text.stderr  # /private/x is disallowed
    lines = text.stdout.splitlines()
    at = lines.index(next(line for line in lines if line.endswith("/open/a  no rule matches")))
    # only what the site declared: ai-input, which it does not mention, is left out
    assert lines[at + 1].strip() == (
        "usage: train-ai=y (line 4), search=y (line 5), use=reference (line 5)"
    )
    assert "usage: train-ai=n (line 3), search=y (line 5), use=reference (line 5)" in text.stdout
    # a URL that may not be fetched has no preferences (draft-ietf-aipref-attach §3.1):
    # no usage line under it, and "unknown" is printed nowhere
    private = lines.index(next(line for line in lines if "/private/x" in line))
    assert not lines[private + 1].strip().startswith("usage:")
    assert "unknown" not in text.stdout

    doc = as_json(robots([*urls, "--json"], subprocess_env, workdir))
    by_url = {result["url"]: result["usage"] for result in doc["urls"]}
    closed = by_url[urls[1]]
    assert closed["preferences"] == {"train-ai": "n", "search": "y", "ai-input": "unknown"}
    assert closed["use"] == "reference"
    assert closed["sources"]["train-ai"] == [
        {"from": "robots.txt", "line": 3, "text": "Content-Usage: / train-ai=n"}
    ]


def test_no_rules_no_preferences(
    mockserver: MockServer, host: str, subprocess_env: dict[str, str], workdir: Path
) -> None:
    mockserver.configure(host, {"robots": {"status": 404}})
    doc = as_json(robots([mockserver.url(host, "/a"), "--json"], subprocess_env, workdir))
    assert doc["urls"][0]["usage"] is None


def test_file_mode_shows_preferences_and_the_rule_outside_group(
    subprocess_env: dict[str, str], workdir: Path
) -> None:
    # a Content-Usage line before any user-agent line is ignored and reported
    (workdir / "robots.txt").write_text("Content-Usage: search=n\n" + USAGE_ROBOTS)
    text = robots(
        ["--file", "robots.txt", "/open/a", "/closed"], subprocess_env, workdir, online=False
    )
    assert text.returncode == 0, text.stderr
    assert "usage: train-ai=y (line 5), search=y (line 6)" in text.stdout
    assert "usage: train-ai=n (line 4), search=y (line 6)" in text.stdout
    assert "line 1: rule-outside-group: Content-Usage: search=n" in text.stdout

    doc = as_json(
        robots(["--file", "robots.txt", "--json", "/closed"], subprocess_env, workdir, online=False)
    )
    usage = doc["urls"][0]["usage"]
    assert usage["preferences"] == {"train-ai": "n", "search": "y", "ai-input": "unknown"}
    assert usage["sources"]["train-ai"][0]["line"] == 4


def test_no_usage_line_for_a_site_without_preferences(
    mockserver: MockServer, host: str, subprocess_env: dict[str, str], workdir: Path
) -> None:
    mockserver.configure(host, {"robots": {"body": "User-agent: *\nDisallow: /private\n"}})
    text = robots([mockserver.url(host, "/a")], subprocess_env, workdir)
    assert text.returncode == 0, text.stderr
    assert "ALLOWED" in text.stdout
    assert "usage:" not in text.stdout
