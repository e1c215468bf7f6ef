"""``scrapy robots``: run as a real subprocess against the mock server.

Each case runs the command the way a user does (``python -m scrapy robots ...``) in a
temporary directory outside any project; ``*.test`` names reach the mock server through
``tests.support.resolver.LocalResolver``. Subprocesses cost about a second each, so several
checks share one run. How the command shows and leaves the persistent store:
test_command_store.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.commands import ROBOTS, as_json, robots, workdir
from tests.support.mockserver import MockServer

__all__ = ["workdir"]  # a fixture used below


def test_rules_text_report(
    mockserver: MockServer, host: str, subprocess_env: dict[str, str], workdir: Path
) -> None:
    mockserver.configure(host, {"robots": {"body": ROBOTS}})
    result = robots(
        [
            mockserver.url(host, "/public"),
            mockserver.url(host, "/private/x"),
            # ROBOTSTXT_OBEY must not make the internal crawl fetch robots.txt again.
            "-s",
            "ROBOTSTXT_OBEY=True",
            "-s",
            "ROBOTSTXT_USER_AGENT=MyBot/2.0 (+http://example.test)",
        ],
        subprocess_env,
        workdir,
    )
    assert result.returncode == 1, result.stderr
    out = result.stdout
    assert f"origin {mockserver.origin(host)}  (product token: MyBot)" in out
    assert "robots.txt: rules: 200" in out
    assert "group: mybot" in out
    assert "crawl-delay: 2 s" in out
    assert "request-rate: 1 per 5 s" in out
    assert "content signals: search=yes, ai-train=no" in out
    assert "sitemap: http://example.test/sitemap.xml" in out
    assert f"ALLOWED     {mockserver.url(host, '/public')}  no rule matches" in out
    assert f"DISALLOWED  {mockserver.url(host, '/private/x')}  line 3: Disallow: /private" in out
    assert "stored" not in out  # outside a project, without REP_STORAGE: no store
    assert mockserver.paths(host) == ["/robots.txt"]


def test_json_all_allowed_and_404(
    mockserver: MockServer, subprocess_env: dict[str, str], workdir: Path
) -> None:
    rules_host = mockserver.unique_host("json-rules")
    missing_host = mockserver.unique_host("json-404")
    mockserver.configure(rules_host, {"robots": {"body": ROBOTS}})
    urls = [mockserver.url(rules_host, "/a"), mockserver.url(missing_host, "/b")]
    result = robots([*urls, "--json", "--user-agent", "mybot"], subprocess_env, workdir)
    assert result.returncode == 0, result.stderr
    doc = as_json(result)
    assert doc["version"] == 1
    assert doc["product_token"] == "mybot"
    assert doc["source"] == "fetch"
    assert doc["exit_status"] == 0
    first, second = doc["origins"]
    assert first["origin"] == mockserver.origin(rules_host)
    assert first["fetch"]["outcome"] == "rules"
    assert first["fetch"]["status"] == 200
    assert first["fetch"]["truncated"] is False
    assert first["crawl"] == {
        "action": "decide",
        "copy": "fetched",
        "kind": "rules",
        "source": "fresh",
        "uses_stored": False,
        "copy_fetched_at": None,
        "copy_expires_at": None,
        "wait_until": None,
        "after_wait": None,
    }
    assert first["group"] == "mybot"
    assert first["crawl_delay"] == 2.0
    assert first["request_rate"] == {"requests": 1, "seconds": 5.0}
    assert first["content_signals"] == {"search": True, "ai-train": False}
    assert first["sitemaps"] == ["http://example.test/sitemap.xml"]
    assert second["fetch"]["outcome"] == "allow-all"
    assert second["fetch"]["detail"] == "404"
    assert second["stored"] is None
    assert [u["url"] for u in doc["urls"]] == urls
    assert [u["verdict"] for u in doc["urls"]] == ["allowed", "allowed"]
    assert doc["urls"][0]["reason"] == "no-matching-rule"
    assert doc["urls"][0]["source"] == "fresh"
    assert doc["urls"][0]["group"] == "mybot"
    assert doc["urls"][0]["fresh"] is None
    assert doc["urls"][1]["reason"] == "allow-all"


def test_unreachable_waits_exit_3_text(
    mockserver: MockServer, host: str, subprocess_env: dict[str, str], workdir: Path
) -> None:
    mockserver.configure(host, {"robots": {"status": 503, "headers": {"Retry-After": "30"}}})
    result = robots([mockserver.url(host, "/x")], subprocess_env, workdir)
    assert result.returncode == 3, result.stderr
    out = result.stdout
    assert "robots.txt: unreachable: 503; next try in 30 s" in out
    assert "a crawl would hold this origin's requests" in out
    assert "(REP_UNREACHABLE_WAIT 12 h) the fallback (allow all) applies" in out
    assert f"WAIT        {mockserver.url(host, '/x')}  robots.txt unreachable" in out


def test_disallowed_beats_unreachable_json(
    mockserver: MockServer, subprocess_env: dict[str, str], workdir: Path
) -> None:
    down = mockserver.unique_host("down")
    rules_host = mockserver.unique_host("rules")
    mockserver.configure(down, {"robots": {"status": 503}})
    mockserver.configure(rules_host, {"robots": {"body": "User-agent: *\nDisallow: /no\n"}})
    result = robots(
        [
            mockserver.url(down, "/x"),
            mockserver.url(rules_host, "/no"),
            "--json",
            "-s",
            "REP_UNREACHABLE_FALLBACK=disallow",
            "-s",
            "REP_RETRY_BACKOFF=7",
        ],
        subprocess_env,
        workdir,
    )
    assert result.returncode == 1, result.stderr
    doc = as_json(result)
    fetch = doc["origins"][0]["fetch"]
    assert (fetch["outcome"], fetch["detail"], fetch["retry_in"]) == ("unreachable", "503", 7.0)
    crawl = doc["origins"][0]["crawl"]
    assert crawl["action"] == "wait"
    assert crawl["after_wait"] == {"copy": "fallback", "kind": "disallow-all"}
    assert crawl["wait_until"] is not None
    waiting, disallowed = doc["urls"]
    assert waiting["verdict"] == "wait"
    assert (waiting["reason"], waiting["source"]) == ("unreachable", "unreachable")
    assert waiting["after_wait"]["verdict"] == "disallowed"
    assert waiting["after_wait"]["reason"] == "fallback-disallow"
    assert waiting["after_wait"]["source"] == "fallback"
    assert (disallowed["verdict"], disallowed["line"], disallowed["rule"]) == (
        "disallowed",
        2,
        "Disallow: /no",
    )


def test_redirects(mockserver: MockServer, subprocess_env: dict[str, str], workdir: Path) -> None:
    moved = mockserver.unique_host("moved")
    target = mockserver.unique_host("target")
    looping = mockserver.unique_host("hops")
    mockserver.configure_many(
        {
            moved: {"robots": {"status": 301, "redirect": mockserver.url(target, "/robots.txt")}},
            target: {"robots": {"body": "User-agent: *\nDisallow: /\n"}},
            looping: {
                "robots": {"status": 302, "redirect": "/r1"},
                "pages": {f"/r{n}": {"status": 302, "redirect": f"/r{n + 1}"} for n in range(9)},
            },
        }
    )
    result = robots(
        [mockserver.url(moved, "/a"), mockserver.url(looping, "/b")], subprocess_env, workdir
    )
    assert result.returncode == 1, result.stderr
    out = result.stdout
    # The final 2xx body applies to the original origin.
    assert f"redirected to: {mockserver.url(target, '/robots.txt')}" in out
    assert f"DISALLOWED  {mockserver.url(moved, '/a')}  line 2: Disallow: /" in out
    assert "robots.txt: allow-all: too many redirects" in out
    assert f"ALLOWED     {mockserver.url(looping, '/b')}  robots.txt allows all" in out
    assert mockserver.count(looping, "/r5") == 1
    assert mockserver.count(looping, "/r6") == 0


def test_truncated_at_size_limit(
    mockserver: MockServer, host: str, subprocess_env: dict[str, str], workdir: Path
) -> None:
    mockserver.configure(
        host,
        {
            "robots": {
                "size": 600_000,
                "body": "User-agent: *\nDisallow: /head\n",
                "tail": "Disallow: /tail\n",
            }
        },
    )
    result = robots(
        [mockserver.url(host, "/head"), mockserver.url(host, "/tail"), "--json"],
        subprocess_env,
        workdir,
    )
    assert result.returncode == 1, result.stderr
    doc = as_json(result)
    origin = doc["origins"][0]
    assert origin["fetch"]["truncated"] is True
    assert origin["fetch"]["bytes"] == 512_000
    assert origin["truncated"] is True
    assert [u["verdict"] for u in doc["urls"]] == ["disallowed", "allowed"]


# Each case is a test of its own: a scrapy subprocess apiece, spread over xdist workers.
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give at least one URL"),
        (["ftp://example.test/x"], "robots.txt applies to http and https URLs, not ftp"),
        (["http://127.0.0.1:99999/x"], "the port '99999' is not a number from 0 to 65535"),
        (["127.0.0.1:8701/x"], "has no scheme: did you mean 'http://127.0.0.1:8701/x'?"),
        (["/x"], "'/x' is a path, not a URL: give the whole URL (http://HOST/x)"),
        (["http:///x"], "has no host name"),
        (["--file", "missing.txt", "/x"], "cannot read missing.txt"),
        (["--file", "robots.txt", "a.test/x"], "has no scheme: did you mean 'http://a.test/x'?"),
        (["--file", "robots.txt", "--refresh", "/x"], "--file uses no store"),
        (["--refresh", "--forget", "http://a.test/"], "not both"),
        # Settings are validated by the crawl's own Config.from_settings.
        (["http://a.test/", "-s", "REP_MAX_SIZE=10"], "REP_MAX_SIZE must be >= 512000"),
        (["http://a.test/", "-s", "REP_STORAGE=carrier-pigeon://x"], "REP_STORAGE must be"),
        (["http://a.test/", "-s", "REP_STORAGE=/no/such/dir/x.sqlite"], "does not exist"),
        (["http://a.test/", "-s", "REP_STORAGE=/proc/x.sqlite"], "cannot create a file"),
        (["http://a.test/", "--refresh"], "--refresh needs a store"),
        (["http://a.test/", "--forget", "-s", "REP_STORAGE=memory"], "a memory store keeps"),
    ],
)
def test_usage_errors_exit_2(
    args: list[str], message: str, subprocess_env: dict[str, str], workdir: Path
) -> None:
    result = robots(args, subprocess_env, workdir, online=False)
    assert result.returncode == 2, (args, result.stderr)
    assert message in result.stderr
    assert result.stdout == ""


def test_local_file(subprocess_env: dict[str, str], workdir: Path) -> None:
    (workdir / "robots.txt").write_text(ROBOTS)
    result = robots(
        ["--file", "robots.txt", "--user-agent", "MyBot", "/private/1", "http://any.test/ok"],
        subprocess_env,
        workdir,
        online=False,
    )
    assert result.returncode == 1, result.stderr
    assert "robots.txt file robots.txt  (product token: MyBot)" in result.stdout
    assert "DISALLOWED  /private/1  line 3: Disallow: /private" in result.stdout
    assert "ALLOWED     http://any.test/ok  no rule matches" in result.stdout
    assert "robots.txt: " not in result.stdout  # nothing was fetched

    result = robots(
        ["--file", "robots.txt", "--json", "/anything"], subprocess_env, workdir, online=False
    )
    assert result.returncode == 1, result.stderr  # default token Scrapy obeys "*"
    doc = as_json(result)
    assert doc["source"] == "file"
    assert doc["origins"][0]["fetch"] is None
    assert doc["origins"][0]["group"] == "*"
    assert doc["urls"][0]["rule"] == "Disallow: /"

    result = robots(
        ["--file", "robots.txt", "--user-agent", "mybot", "/ok"],
        subprocess_env,
        workdir,
        online=False,
    )
    assert result.returncode == 0, result.stderr
