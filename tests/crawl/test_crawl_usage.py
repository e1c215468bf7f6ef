"""Usage preferences in real crawls (docs/usage.md): recorded, audited, enforced.

One local site mixes robots.txt rules (Allow/Disallow, Content-Usage with paths,
Content-Signal) and Content-Usage response headers; a second origin has no robots.txt
and only headers. Each test asserts on what the server received, on the stats and on
the response meta the spider saw.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import pytest_twisted
from scrapy import Request
from scrapy.exceptions import IgnoreRequest

from scrapy_rep.policy.config import Config, SettingError

REP: dict[str, Any] = {
    "ADDONS": {"scrapy_rep.Addon": 0},
    "REP_STORAGE": "memory",
    "RETRY_ENABLED": False,
    "REP_PURPOSES": ["train-ai"],
}

ROBOTS = """\
User-agent: *
Disallow: /private
Content-Usage: / train-ai=n
Content-Usage: /open/ train-ai=y
Content-Signal: search=yes, use=reference
"""


def _site(mockserver: Any) -> tuple[str, str, dict[str, str]]:
    """Two origins; returns (rules host, header-only host, name -> URL)."""
    rules, plain = mockserver.unique_host("usage-rules"), mockserver.unique_host("usage-plain")
    no_train = {"headers": {"Content-Usage": "train-ai=n"}}
    mockserver.configure(
        rules,
        {
            "robots": {"body": ROBOTS},
            "pages": {
                "/open/b": no_train,
                "/closed/c": no_train,  # refused twice: counted once
                "/open/d": {"headers": {"Content-Usage": "train-ai=y, search=n"}},
                "/open/bad": {"headers": {"Content-Usage": "Train-AI=n"}},
            },
            "default": {"body": "ok"},
        },
    )
    mockserver.configure(
        plain, {"robots": {"status": 404}, "pages": {"/h1": no_train}, "default": {"body": "ok"}}
    )
    urls = {
        "open-a": mockserver.url(rules, "/open/a"),  # robots.txt: train-ai=y
        "open-b": mockserver.url(rules, "/open/b"),  # robots y, header n
        "closed": mockserver.url(rules, "/closed/c"),  # robots.txt: train-ai=n
        "private": mockserver.url(rules, "/private/x"),  # Disallow: never fetched
        "open-d": mockserver.url(rules, "/open/d"),  # header y (and search=n)
        "open-bad": mockserver.url(rules, "/open/bad"),  # invalid header: says nothing
        "h1": mockserver.url(plain, "/h1"),  # no robots.txt, header n
        "h2": mockserver.url(plain, "/h2"),  # nothing anywhere
    }
    return rules, plain, urls


def _usage_drops(crawler: Any) -> list[str]:
    """Messages of the IgnoreRequest failures that usage preferences caused."""
    return [
        str(f.value)
        for f in crawler.spider.failures
        if f.check(IgnoreRequest) and str(f.value).startswith("Usage refused")
    ]


def _received(mockserver: Any, *hosts: str) -> set[str]:
    return {p for h in hosts for p in mockserver.paths(h) if p != "/robots.txt"}


def _usage_by_path(crawler: Any) -> dict[str, dict[str, Any]]:
    return {r.url.split(".test", 1)[1].split("/", 1)[1]: r.meta["rep_usage"] for r in
            crawler.spider.responses}  # fmt: skip


@pytest_twisted.ensureDeferred
async def test_record_mode_drops_nothing_and_records_everything(mockserver, run_crawl):
    rules, plain, urls = _site(mockserver)
    crawler = await run_crawl(list(urls.values()), settings=REP)

    # Preferences never decide fetching: only the Disallow rule kept a URL away.
    assert _received(mockserver, rules, plain) == {
        "/open/a", "/open/b", "/closed/c", "/open/d", "/open/bad", "/h1", "/h2",
    }  # fmt: skip
    assert crawler.stat("robotstxt/forbidden") == 1
    seen = _usage_by_path(crawler)
    assert len(seen) == 7 and not _usage_drops(crawler)

    a = seen["open/a"]
    assert a["preferences"] == {"train-ai": "y", "search": "y", "ai-input": "unknown"}
    assert a["use"] == "reference"
    assert a["sources"]["train-ai"] == [
        {"from": "robots.txt", "line": 4, "text": "Content-Usage: /open/ train-ai=y"}
    ]
    assert a["purposes"] == ["train-ai"] and a["refused"] == []
    b = seen["open/b"]  # the header's "n" beats robots.txt's "y"
    assert b["preferences"]["train-ai"] == "n" and b["refused"] == ["train-ai"]
    assert b["sources"]["train-ai"] == [
        {"from": "header", "line": None, "text": "Content-Usage: train-ai=n"}
    ]
    c = seen["closed/c"]
    assert c["preferences"]["train-ai"] == "n" and c["refused"] == ["train-ai"]
    assert c["sources"]["train-ai"] == [  # both statements that refuse, robots.txt first
        {"from": "robots.txt", "line": 3, "text": "Content-Usage: / train-ai=n"},
        {"from": "header", "line": None, "text": "Content-Usage: train-ai=n"},
    ]
    d = seen["open/d"]
    assert d["preferences"]["train-ai"] == "y" and d["preferences"]["search"] == "n"
    assert seen["open/bad"]["preferences"]["train-ai"] == "y"  # robots.txt only
    assert seen["h1"]["preferences"]["train-ai"] == "n"
    assert seen["h2"]["preferences"] == {
        "train-ai": "unknown", "search": "unknown", "ai-input": "unknown",
    }  # fmt: skip

    # Stats: URLs per label and value, one count per downloaded URL.
    assert crawler.stat("rep/usage/train-ai/y") == 3  # open/a, open/d, open/bad
    assert crawler.stat("rep/usage/train-ai/n") == 3  # open/b, closed/c, h1
    # h2 declares nothing: counted nowhere (only what a site declared is counted)
    assert not [key for key in crawler.stats.get_stats() if key.endswith("/unknown")]
    assert crawler.stat("rep/usage/search/y") == 4
    assert crawler.stat("rep/usage/search/n") == 1
    assert crawler.stat("rep/usage/use/reference") == 5
    assert crawler.stat("rep/usage/dropped/robots") is None
    assert crawler.stat("rep/usage/audit/would_drop/header") is None
    assert not any(m.startswith("scrapy-rep usage preferences") for m in crawler.messages())


@pytest_twisted.ensureDeferred
async def test_enforce_drops_refused_purposes_before_and_after_download(mockserver, run_crawl):
    rules, plain, urls = _site(mockserver)
    crawler = await run_crawl(list(urls.values()), settings={**REP, "REP_USAGE_MODE": "enforce"})

    # robots.txt refused /closed/c: never requested. The header refusals were downloaded
    # (nobody knows the header before), then dropped.
    assert _received(mockserver, rules, plain) == {
        "/open/a", "/open/b", "/open/d", "/open/bad", "/h1", "/h2",
    }  # fmt: skip
    assert set(_usage_by_path(crawler)) == {"open/a", "open/d", "open/bad", "h2"}
    # closed/c, open/b, h1: each reaches its errback
    assert sorted(_usage_drops(crawler)) == [
        "Usage refused by header: train-ai",
        "Usage refused by header: train-ai",
        "Usage refused by robots: train-ai",
    ]
    assert crawler.stat("rep/usage/dropped/robots") == 1
    assert crawler.stat("rep/usage/dropped/header") == 2
    # Every URL is counted once, whether downloaded or dropped before download.
    assert crawler.stat("rep/usage/train-ai/n") == 3
    assert crawler.stat("rep/usage/train-ai/y") == 3
    # One DEBUG line per drop, with the reason; nothing at INFO per request.
    drops = [m for m in crawler.messages() if m.startswith("Dropped, usage refused")]
    assert len(drops) == 3
    assert any(
        "/closed/c" in m and "robots.txt line 3: Content-Usage: / train-ai=n" in m for m in drops
    )
    assert any("/h1" in m and "response header: Content-Usage: train-ai=n" in m for m in drops)
    assert not [m for m in crawler.messages(logging.INFO) if "usage refused" in m]
    # The closing summary counts refusals per origin.
    summary = [m for m in crawler.messages() if m.startswith("scrapy-rep usage preferences")]
    assert len(summary) == 1
    assert "3 request(s) dropped for a refused purpose, 2 origin(s)" in summary[0]
    assert f"{mockserver.origin(rules)}: robots.txt 1, header 1" in summary[0]
    assert f"{mockserver.origin(plain)}: robots.txt 0, header 1" in summary[0]
    assert crawler.stat("rep/usage/refused_origins") == 2


@pytest_twisted.ensureDeferred
async def test_audit_records_what_enforce_would_drop(mockserver, run_crawl):
    rules, plain, urls = _site(mockserver)
    crawler = await run_crawl(list(urls.values()), settings={**REP, "REP_USAGE_MODE": "audit"})

    assert len(_received(mockserver, rules, plain)) == 7  # all but the Disallowed one
    seen = _usage_by_path(crawler)
    assert len(seen) == 7 and not _usage_drops(crawler)
    assert seen["closed/c"]["refused"] == ["train-ai"]
    assert crawler.stat("rep/usage/audit/would_drop/robots") == 1
    assert crawler.stat("rep/usage/audit/would_drop/header") == 2
    assert crawler.stat("rep/usage/dropped/robots") is None
    assert crawler.stat("rep/usage/train-ai/n") == 3
    would = [m for m in crawler.messages() if m.startswith("Would be dropped, usage refused")]
    assert len(would) == 3
    summary = [m for m in crawler.messages() if m.startswith("scrapy-rep usage preferences")]
    assert "3 request(s) would be dropped (audit)" in summary[0]


@pytest_twisted.ensureDeferred
async def test_purposes_per_request_override_the_setting(mockserver, run_crawl):
    rules, plain, urls = _site(mockserver)
    requests = [
        # a search crawl may use /closed/c: only train-ai is refused there
        Request(urls["closed"], meta={"rep_purposes": ["search"]}),
        # ...but not /open/d, whose header says search=n
        Request(urls["open-d"], meta={"rep_purposes": "search, train-ai"}),
        # a bad value: warned once, REP_PURPOSES applies (the request is not lost)
        Request(urls["h1"], meta={"rep_purposes": ["ai-train"]}),
        Request(urls["h2"], meta={"rep_purposes": ["nonsense"]}),
    ]
    crawler = await run_crawl(requests, settings={**REP, "REP_USAGE_MODE": "enforce"})

    assert _received(mockserver, rules, plain) == {"/closed/c", "/open/d", "/h1", "/h2"}
    seen = _usage_by_path(crawler)
    assert set(seen) == {"closed/c", "h2"}
    assert seen["closed/c"]["purposes"] == ["search"] and seen["closed/c"]["refused"] == []
    assert seen["h2"]["purposes"] == ["train-ai"]
    assert crawler.stat("rep/usage/dropped/header") == 2  # open/d (search), h1 (train-ai)
    assert crawler.stat("rep/usage/bad_purposes_meta") == 2
    warnings = crawler.messages(logging.WARNING, "scrapy_rep")
    assert sum("unknown purpose 'ai-train'" in m and "is train-ai" in m for m in warnings) == 1
    assert sum("unknown purpose 'nonsense'" in m for m in warnings) == 1


@pytest_twisted.ensureDeferred
async def test_header_recorded_when_robots_is_bypassed_and_after_redirects(mockserver, run_crawl):
    rules, plain, urls = _site(mockserver)
    mockserver.configure(
        plain,
        {
            "robots": {"status": 404},
            "pages": {"/jump": {"status": 302, "redirect": urls["open-a"]}},
            "default": {"body": "ok", "headers": {"Content-Usage": "search=n"}},
        },
    )
    requests = [
        Request(urls["closed"], meta={"dont_obey_robotstxt": True}),
        Request(mockserver.url(plain, "/jump")),
    ]
    crawler = await run_crawl(requests, settings=REP)

    assert {"/closed/c", "/open/a"} <= _received(mockserver, rules)
    seen = _usage_by_path(crawler)
    # bypassing robots.txt bypasses its preferences too (dont_obey_robotstxt): only the
    # header's apply
    assert seen["closed/c"]["preferences"]["train-ai"] == "n"
    assert [s["from"] for s in seen["closed/c"]["sources"]["train-ai"]] == ["header"]
    # after a redirect, the preferences are the final URL's, not the first hop's
    assert seen["open/a"]["preferences"]["train-ai"] == "y"
    assert seen["open/a"]["preferences"]["search"] == "y"
    assert seen["open/a"]["url"] == urls["open-a"]


@pytest_twisted.ensureDeferred
async def test_off_records_nothing(mockserver, run_crawl):
    rules, plain, urls = _site(mockserver)
    crawler = await run_crawl(
        [urls["closed"], urls["h1"]], settings={**REP, "REP_USAGE_MODE": "off"}
    )
    assert _received(mockserver, rules, plain) == {"/closed/c", "/h1"}
    assert all("rep_usage" not in r.meta for r in crawler.spider.responses)
    assert not any(k.startswith("rep/usage/") for k in crawler.stats.get_stats())


def test_usage_settings_are_validated() -> None:
    assert Config.from_settings({}).purposes == ()
    assert Config.from_settings({}).usage_mode == "record"
    config = Config.from_settings(
        {"REP_PURPOSES": "Train-AI, search,train-ai", "REP_USAGE_MODE": "Audit"}
    )
    assert config.purposes == ("train-ai", "search") and config.usage_mode == "audit"
    assert Config.from_settings({"REP_PURPOSES": ("ai-input",)}).purposes == ("ai-input",)
    with pytest.raises(SettingError, match="REP_PURPOSES: unknown purpose 'ai-train'"):
        Config.from_settings({"REP_PURPOSES": ["ai-train"]})
    with pytest.raises(SettingError, match="REP_PURPOSES must be a list"):
        Config.from_settings({"REP_PURPOSES": 3})
    with pytest.raises(SettingError, match="REP_USAGE_MODE"):
        Config.from_settings({"REP_USAGE_MODE": "drop"})


@pytest_twisted.ensureDeferred
async def test_a_bad_setting_stops_the_crawl_at_start(mockserver, run_crawl, host):
    mockserver.configure(host, {"default": {"body": "ok"}})
    with pytest.raises(SettingError, match="REP_PURPOSES: unknown purpose 'training'"):
        await run_crawl(
            [mockserver.url(host, "/x")], settings={**REP, "REP_PURPOSES": ["training"]}
        )
    assert mockserver.paths(host) == []


def test_refusal_summary_lists_the_most_refused_origins_first(caplog) -> None:
    from scrapy_rep.crawl.report import MAX_LISTED_ORIGINS, log_usage_refusals

    class Stats(dict):  # the one StatsCollector method the summary uses
        def set_value(self, key: str, value: Any) -> None:
            self[key] = value

    stats: Any = Stats()
    refusals = {f"http://o{i:02d}.test": {"robots": i, "header": 1} for i in range(25)}
    with caplog.at_level(logging.INFO, logger="scrapy_rep"):
        log_usage_refusals(refusals, audit=False, stats=stats)
    (text,) = [r.getMessage() for r in caplog.records]
    lines = text.splitlines()
    assert lines[0].startswith("scrapy-rep usage preferences: 325 request(s) dropped")
    assert lines[1] == "  http://o24.test: robots.txt 24, header 1"
    assert len(lines) == 1 + MAX_LISTED_ORIGINS + 1 and lines[-1] == "  ... and 5 more origin(s)"
    assert stats == {"rep/usage/refused_origins": 25}


def test_the_per_request_unknown_doc_is_the_doc_of_an_unknown_usage() -> None:
    """The fast path for files stating no preference builds the same meta as the
    general one (usage.py: unknown_doc)."""
    from scrapy_rep.crawl.usage import _doc, unknown_doc
    from scrapy_rep.robotstxt._usage import Usage

    purposes = ("search", "train-ai")
    assert unknown_doc(purposes, "http://a.test/x") == _doc(
        Usage(), purposes, [], "http://a.test/x"
    )
    assert unknown_doc((), "http://a.test/") == _doc(Usage(), (), [], "http://a.test/")


def test_declares_usage_says_when_usage_can_be_skipped() -> None:
    from scrapy_rep.robotstxt import RobotsTxt
    from scrapy_rep.robotstxt._usage import Usage

    plain = RobotsTxt.parse(b"User-agent: *\nDisallow: /private\n")
    assert not plain.declares_usage
    assert plain.usage("/a", "Bot") == Usage()
    for body in (
        b"User-agent: *\nContent-Usage: train-ai=n\nAllow: /\n",
        b"Content-Usage: train-ai=n\nUser-agent: *\nAllow: /\n",
    ):
        assert RobotsTxt.parse(body).declares_usage, body


@pytest_twisted.ensureDeferred
async def test_no_purpose_and_no_preference_says_nothing(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """No REP_PURPOSES, a site that declares no preference: no INFO line about usage
    preferences, no rep/usage/* stats key; the response meta still says "unknown"."""
    mockserver.configure(host, {"robots": {"body": "User-agent: *\nAllow: /\n"}})
    settings = {key: value for key, value in REP.items() if key != "REP_PURPOSES"}
    crawler = await run_crawl([mockserver.url(host, "/a")], settings=settings)
    assert [r.url for r in crawler.spider.responses] == [mockserver.url(host, "/a")]
    assert not [key for key in crawler.stats.get_stats() if key.startswith("rep/usage/")]
    assert not [m for m in crawler.messages() if "usage preferences" in m]
    meta = crawler.spider.responses[0].meta["rep_usage"]
    assert meta["preferences"]["train-ai"] == "unknown" and meta["sources"] == {}
