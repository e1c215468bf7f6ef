"""Audit mode (REP_ENFORCE = False), the decision meta and the per-origin summary."""

from __future__ import annotations

import pytest_twisted

REP = {"ADDONS": {"scrapy_rep.Addon": 0}, "REP_STORAGE": "memory"}
RULES = "User-agent: *\nDisallow: /private\nAllow: /private/ok\n"


def _site(mockserver, rules_host, plain_host, down_host):
    mockserver.configure(rules_host, {"robots": {"body": RULES}})
    mockserver.configure(plain_host, {"robots": {"status": 404}})
    mockserver.configure(down_host, {"robots": {"status": 503}})
    return [
        mockserver.url(rules_host, "/public"),
        mockserver.url(rules_host, "/private/a"),
        mockserver.url(rules_host, "/private/b"),
        mockserver.url(rules_host, "/private/ok"),
        mockserver.url(plain_host, "/anything"),
    ]


@pytest_twisted.ensureDeferred
async def test_audit_mode_drops_nothing_and_counts_what_enforcing_drops(mockserver, run_crawl):
    hosts = [mockserver.unique_host(p) for p in ("rules", "plain", "down", "down-audit")]
    enforce_urls = _site(mockserver, hosts[0], hosts[1], hosts[2])
    enforcing = await run_crawl(enforce_urls, settings=REP)

    audit_hosts = [mockserver.unique_host(p) for p in ("arules", "aplain")]
    audit_urls = _site(mockserver, audit_hosts[0], audit_hosts[1], hosts[3])
    audit_urls.append(mockserver.url(hosts[3], "/waits-when-enforcing"))
    audit = await run_crawl(audit_urls, settings={**REP, "REP_ENFORCE": False})

    # Nothing is dropped or delayed: every URL reached the server.
    received = {p for h in audit_hosts for p in mockserver.paths(h)} | set(
        mockserver.paths(hosts[3])
    )
    assert {"/public", "/private/a", "/private/b", "/private/ok", "/anything"} <= received
    assert "/waits-when-enforcing" in received
    assert audit.stat("robotstxt/forbidden") is None
    # Requests wait only for each origin's first robots.txt answer (so the decision can
    # be recorded); an unreachable origin releases them at once.
    assert audit.stat("robotstxt/unreachable") == 1
    # ...and the would-be decisions match the enforcing crawl's.
    assert audit.stat("robotstxt/audit/would_forbid") == enforcing.stat("robotstxt/forbidden") == 2
    assert audit.stat("robotstxt/audit/would_delay") == 1
    assert audit.stat("robotstxt/allowed") == enforcing.stat("robotstxt/allowed") == 3
    assert audit.logged("audit mode")


@pytest_twisted.ensureDeferred
async def test_each_downloaded_request_carries_its_decision(mockserver, run_crawl):
    rules_host, plain_host = mockserver.unique_host("meta"), mockserver.unique_host("nometa")
    mockserver.configure(rules_host, {"robots": {"body": RULES}})
    mockserver.configure(plain_host, {"robots": {"status": 404}})
    urls = [
        mockserver.url(rules_host, "/private/ok"),
        mockserver.url(rules_host, "/public"),
        mockserver.url(plain_host, "/x"),
    ]
    crawler = await run_crawl(urls, settings=REP)
    decisions = {
        r.url.rsplit("/", 2)[-1] if "private" in r.url else r.url.rsplit("/", 1)[-1]: r.meta[
            "robotstxt_decision"
        ]
        for r in crawler.spider.responses
    }
    ok = decisions["ok"]
    assert ok["allowed"] is True and ok["reason"] == "rule"
    assert ok["line"] == 3 and ok["rule"] == "Allow: /private/ok" and ok["groups"] == ["*"]
    assert ok["source"] == "fresh" and ok["robots"] == "200"
    assert ok["waited"] > 0  # held until robots.txt arrived
    assert decisions["public"]["reason"] == "no-matching-rule"
    assert decisions["x"]["allowed"] is True
    assert decisions["x"]["reason"] == "allow-all"
    assert decisions["x"]["robots"] == "404"


@pytest_twisted.ensureDeferred
async def test_summary_block_at_close(mockserver, run_crawl):
    hosts = [mockserver.unique_host(p) for p in ("sum-rules", "sum-plain", "sum-down")]
    urls = _site(mockserver, *hosts)
    urls.append(mockserver.url(hosts[2], "/held"))
    crawler = await run_crawl(
        urls,
        settings={**REP, "REP_UNREACHABLE_WAIT": 1, "REP_RETRY_BACKOFF": 0.3},
    )
    summary = [m for m in crawler.messages() if m.startswith("scrapy-rep summary")]
    assert len(summary) == 1
    text = summary[0]
    assert "3 origin(s): 1 with rules, 1 allow-all, 1 unreachable" in text
    assert "stale copies used: 0" in text
    assert "requests forbidden: 2, delayed: 6, dropped at close: 0, handed back: 0" in text
    assert crawler.stat("robotstxt/fallback/allow-all") == 1
    assert "/held" in mockserver.paths(hosts[2])  # released by the fallback after the wait
