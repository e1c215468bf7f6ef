"""The example project: ``python example_project/run_demo.py`` runs and shows what it claims.

One run of the demo (three ``scrapy crawl`` subprocesses against the local demo site)
is shared by every test here; its ``--json`` record gives exact facts to assert on, and
the printed text is checked for the parts a reader relies on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.crawl import assert_spaced

# Three whole `scrapy crawl` runs of the demo, once per pytest-xdist worker that runs a test here.
pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parent.parent
RUN_DEMO = REPO_ROOT / "example_project" / "run_demo.py"


class DemoRun:
    def __init__(self, returncode: int, output: str, record: dict[str, Any], workdir: Path):
        self.workdir = workdir
        self.returncode = returncode
        self.output = output
        self.record = record
        self.origins: dict[str, str] = record["origins"]

    def entries(self, spider: str, role: str | None = None) -> list[dict[str, Any]]:
        entries = self.record["spiders"][spider]["ledger"]["entries"]
        if role is None:
            return list(entries)
        return [e for e in entries if e["origin"] == self.origins[role]]

    def outcome(self, spider: str, role: str, path: str, token: str | None = None) -> str:
        found = [
            e["outcome"]
            for e in self.entries(spider, role)
            if e["path"] == path and (token is None or e["token"] == token)
        ]
        assert len(found) == 1, (spider, role, path, token, found)
        return found[0]

    def hits(self, *roles: str) -> list[dict[str, Any]]:
        return sorted(
            (h for h in self.record["site_hits"] if h["role"] in roles), key=lambda h: h["at"]
        )


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    workdir = tmp_path_factory.mktemp("demo")
    record_file = workdir / "record.json"
    # Offline by construction; a proxy from the environment must not matter either.
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    result = subprocess.run(
        [
            sys.executable,
            str(RUN_DEMO),
            "--json",
            str(record_file),
            "--report",
            str(workdir / "compliance-report.html"),
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    record = json.loads(record_file.read_text("utf-8"))
    return DemoRun(result.returncode, result.stdout, record, workdir)


def test_prints_the_report(demo: DemoRun) -> None:
    # No timed assertion (the project forbids them): the demo's speed is not a test's claim.
    out = demo.output
    # scrapy-rep's own summary line, one per crawl, next to the demo's tables.
    assert out.count("scrapy-rep summary:") == 3
    for spider in ("tour", "nightowl", "archive"):
        assert f'Spider "{spider}":' in out
        assert demo.record["spiders"][spider]["returncode"] == 0
        assert demo.record["spiders"][spider]["summary"].startswith("scrapy-rep summary:")
    # The output ends with the per-origin summary, one row per origin, cdn included
    # (nobody crawls it: it serves the redirect origin's robots.txt hops).
    tail = out[out.index("per-origin summary") :]
    for role in demo.origins:
        assert f"\n{role} " in tail and demo.origins[role] in tail, role
    assert "(redirect's hops)" in tail
    # The summary of the crawl that met the 503 says so, as its stats do.
    tour = demo.record["spiders"]["tour"]
    assert tour["ledger"]["stats"]["robotstxt/unreachable"] == 1
    assert "turned unreachable during the crawl: 1 time(s)" in tour["summary"]
    assert "dropped by robots.txt:" in out
    assert "all crawls finished" in out.splitlines()[-1]


def test_disallowed_urls_are_dropped_with_their_rule(demo: DemoRun) -> None:
    dropped = {
        (e["origin"], e["path"]): e for e in demo.entries("tour") if e["outcome"] == "dropped"
    }
    expected = {
        ("rules", "/private/report.html"): "Disallow: /private/",
        ("rules", "/shop/cart.html"): "Disallow: /shop/",
        ("flaky", "/tmp/scratch.html"): "Disallow: /tmp/",
        ("redirect", "/old/page.html"): "Disallow: /old/",
        ("slow", "/admin/login.html"): "Disallow: /admin/",
    }
    assert set(dropped) == {(demo.origins[role], path) for role, path in expected}
    for (role, path), rule in expected.items():
        entry = dropped[(demo.origins[role], path)]
        assert entry["rule"] == rule
        assert entry["line"] is not None
        assert f"{demo.origins[role]}{path}" in demo.output
    assert '"Disallow: /private/" (group demobot)' in demo.output
    # Nothing is lost: every request was downloaded or dropped by robots.txt.
    assert {e["outcome"] for e in demo.entries("tour")} == {"downloaded", "dropped"}


def test_404_robots_txt_allows_everything(demo: DemoRun) -> None:
    entries = demo.entries("tour", "missing")
    assert sorted(e["path"] for e in entries) == ["/", "/about.html", "/private/anything.html"]
    assert all(e["outcome"] == "downloaded" for e in entries)
    assert [h["status"] for h in demo.hits("missing")] == [404]


def test_503_then_200_delays_then_crawls(demo: DemoRun) -> None:
    hits = demo.hits("flaky")
    assert [h["status"] for h in hits] == [503, 200]
    # The retry came after REP_RETRY_BACKOFF = 1 s, not at once (no RetryMiddleware).
    assert hits[1]["at"] - hits[0]["at"] >= 0.9
    crawled = [e for e in demo.entries("tour", "flaky") if e["outcome"] == "downloaded"]
    assert sorted(e["path"] for e in crawled) == ["/", "/status.html"]
    for entry in crawled:
        assert entry["held"]
        assert entry["waited"] >= 0.9
        assert entry["at"] >= hits[1]["at"]
    # The rules of the 200 answer then applied.
    assert demo.outcome("tour", "flaky", "/tmp/scratch.html") == "dropped"
    assert demo.record["spiders"]["tour"]["ledger"]["stats"]["robotstxt/unreachable"] == 1


def test_redirect_chain_rules_apply_to_the_original_origin(demo: DemoRun) -> None:
    hits = demo.hits("redirect", "cdn")
    assert [(h["role"], h["status"]) for h in hits] == [
        ("redirect", 301),
        ("cdn", 302),
        ("cdn", 200),
    ]
    assert demo.outcome("tour", "redirect", "/old/page.html") == "dropped"
    assert demo.outcome("tour", "redirect", "/new/page.html") == "downloaded"


def test_crawl_delay_and_slow_robots_txt(demo: DemoRun) -> None:
    times = sorted(e["at"] for e in demo.entries("tour", "delay") if e["outcome"] == "downloaded")
    assert len(times) == 3
    slow = demo.entries("tour", "slow")
    assert all(e["held"] and e["waited"] >= 1.5 for e in slow)
    # The other origins did not wait for the slow one: each waited less than any of its
    # requests did (compared with each other, not with a clock, which load stretches).
    assert max(e["waited"] for e in demo.entries("tour", "missing")) < min(
        e["waited"] for e in slow
    )
    # "at" is when each response reached the crawler: transit stretches it under load,
    # so the spacing is checked as the server-side tests do (tests.support.crawl.assert_spaced).
    assert_spaced(times, 1.0)


def test_product_token_overrides_change_verdicts(demo: DemoRun) -> None:
    report = "/private/report.html"
    # Project-wide token from settings.py.
    assert demo.outcome("tour", "rules", report, "DemoBot") == "dropped"
    assert demo.outcome("tour", "rules", "/drafts/plan.html", "DemoBot") == "downloaded"
    # Per-request meta: the same URL, allowed for PressBot.
    assert demo.outcome("tour", "rules", report, "PressBot") == "downloaded"
    # Spider attribute: NightOwl may not read drafts, which DemoBot may.
    assert demo.outcome("nightowl", "rules", "/drafts/plan.html") == "dropped"
    assert demo.outcome("nightowl", "rules", "/public/news.html") == "downloaded"
    # custom_settings: ArchiveBot may read the report DemoBot may not.
    assert demo.outcome("archive", "rules", report) == "downloaded"
    assert demo.outcome("archive", "rules", "/shop/cart.html") == "dropped"
    sources = {
        (e["token"], e["token_from"])
        for spider in ("tour", "nightowl", "archive")
        for e in demo.entries(spider, "rules")
    }
    assert sources == {
        ("DemoBot", "settings.py"),
        ("PressBot", "Request.meta"),
        ("NightOwl", "spider attribute"),
        ("ArchiveBot", "custom_settings"),
    }
    assert "PressBot (tour, Request.meta)" in demo.output


def test_docs_demo_table_lists_the_origins_the_demo_prints(demo: DemoRun) -> None:
    import re

    text = (REPO_ROOT / "docs" / "demo.md").read_text("utf-8")
    table = text[text.index("| origin | robots.txt | what you see |") :]
    table = table[: table.index("\n\n")]
    documented = re.findall(r"^\| `([a-z]+)` \|", table, flags=re.M)
    header = "scrapy-rep demo site, one origin per port:\n"
    listing = demo.output[demo.output.index(header) + len(header) :].split("\n")
    printed = [line.split()[0] for line in listing[: len(demo.origins)]]
    assert printed == list(demo.origins)
    assert documented == printed


def test_the_ledger_counts_the_held_requests_scrapy_rep_counts(demo: DemoRun) -> None:
    # Each held request's robotstxt_decision shows a wait above 0, however brief.
    for spider in ("tour", "nightowl", "archive"):
        held = sum(1 for e in demo.entries(spider) if e["held"])
        assert held == demo.record["spiders"][spider]["ledger"]["stats"]["robotstxt/delayed"]


def test_the_compliance_record_verifies_and_is_reported(demo: DemoRun) -> None:
    """Every crawl of the demo writes its record (REP_RECORD); the demo verifies them
    all and writes their report."""
    section = demo.output.split("===== compliance record (REP_RECORD) =====")[1]
    assert "verify: 3 file(s), 3 run(s)" in section
    assert " 0 mismatched" in section and "INFO" not in section
    page = (demo.workdir / "compliance-report.html").read_text("utf-8")
    assert demo.origins["rules"] in page and "Disallow: /private/" in page
