"""``scrapy robots --page URL``: a page's directives for the product token, text and JSON."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.commands import as_json, robots, workdir
from tests.support.mockserver import MockServer

__all__ = ["workdir"]  # a fixture used below


def _site(mockserver: MockServer, host: str) -> None:
    mockserver.configure(
        host,
        {
            "robots": {"body": "User-agent: *\nDisallow: /\n"},  # --page does not read it
            "pages": {
                "/page": {
                    "meta": [["robots", "noarchive"], ["MyBot", "noindex"], ["other", "none"]],
                    "header_lines": [
                        ["X-Robots-Tag", "mybot: nofollow, max-snippet: 20"],
                        ["X-Robots-Tag", "otherbot: noindex"],
                        ["X-Robots-Tag", "unavailable_after: someday"],
                    ],
                    "rel_links": [["/hidden", "nofollow"], ["/ad", "sponsored"]],
                    "links": ["/open"],
                },
                "/moved": {"redirect": "/plain", "header_lines": [["X-Robots-Tag", "none"]]},
                "/plain": {"links": ["/open"]},
                "/file.pdf": {
                    "body": "%PDF",
                    "content_type": "application/pdf",
                    "header_lines": [["X-Robots-Tag", "noindex"]],
                },
            },
        },
    )


def test_page_text(
    mockserver: MockServer, host: str, subprocess_env: dict[str, str], workdir: Path
) -> None:
    _site(mockserver, host)
    page, moved = mockserver.url(host, "/page"), mockserver.url(host, "/moved")
    result = robots(["--page", "--user-agent", "MyBot/2.0", page, moved], subprocess_env, workdir)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Page-level directives for product token 'MyBot'" in out
    assert f"{page}  (200, text/html; charset=utf-8)" in out
    noindex = '  noindex: enforce drops the items this page yields (meta tag <meta name="MyBot"'
    assert noindex in out
    nofollow = "  nofollow: enforce drops the requests this page yields (X-Robots-Tag: mybot:"
    assert nofollow in out
    assert "max-snippet: 20" in out
    assert 'meta tag <meta name="robots" content="noarchive">' in out
    assert "ignored (for otherbot): X-Robots-Tag: otherbot: noindex" in out
    assert "issue: unavailable_after: unparseable date 'someday', ignored" in out
    assert "rel values on links: nofollow 1, sponsored 1" in out
    assert f"    {mockserver.url(host, '/hidden')}" in out
    # the redirect's own header is not the final page's
    assert f"{moved}  (200, text/html; charset=utf-8, redirected to " in out
    assert "no directive for MyBot: index, follow" in out
    # robots.txt disallows everything, yet the pages were downloaded and robots.txt never
    assert set(mockserver.paths(host)) == {"/page", "/moved", "/plain"}


def test_page_json_and_non_html(
    mockserver: MockServer, host: str, subprocess_env: dict[str, str], workdir: Path
) -> None:
    _site(mockserver, host)
    urls = [mockserver.url(host, p) for p in ("/page", "/file.pdf")]
    doc = as_json(
        robots(["--page", "--json", "--user-agent", "mybot", *urls], subprocess_env, workdir)
    )
    assert doc["product_token"] == "mybot"
    page, pdf = doc["pages"]
    assert page["status"] == 200 and page["error"] is None
    assert page["directives"]["directives"] == [
        "max-snippet",
        "noarchive",
        "nofollow",
        "noindex",
    ]
    assert page["directives"]["sources"]["nofollow"] == [
        {"from": "header", "scope": "mybot", "text": "mybot: nofollow, max-snippet: 20"}
    ]
    assert page["directives"]["values"] == {"max-snippet": "20"}
    assert page["nofollow_only_links"] == [mockserver.url(host, "/hidden")]
    assert page["rel"] == {"nofollow": 1, "sponsored": 1}
    assert pdf["content_type"] == "application/pdf"
    assert pdf["directives"]["noindex"] is True
    assert pdf["nofollow_only_links"] == []


@pytest.mark.slow
def test_page_unreachable_and_usage_errors(
    mockserver: MockServer, refused_port: int, subprocess_env: dict[str, str], workdir: Path
) -> None:
    result = robots(["--page", f"http://127.0.0.1:{refused_port}/x"], subprocess_env, workdir)
    assert result.returncode == 3, result.stderr
    assert "not downloaded:" in result.stdout
    bad = robots(["--page", "--file", "robots.txt", "/x"], subprocess_env, workdir, online=False)
    assert bad.returncode == 2
    assert "--page reads pages" in bad.stderr
