"""Every real robots.txt of the shared corpus parses and answers without error.

The corpus lives outside the repository (../shared/corpus/robots from the repo
root); without it these tests are skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scrapy_rep import RobotsTxt

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "robots"
COMMON = ("/", "/index.html", "/search?q=x", "/wp-admin/", "/a/b/c.html", "/robots.txt")
RULE = re.compile(rb"^\s*(?:dis)?allow\s*:\s*(/[^\s#]*)", re.I | re.M)

pytestmark = pytest.mark.skipif(
    not CORPUS.is_dir(), reason=f"robots.txt corpus not found at {CORPUS} (shared/ is absent)"
)


def _files() -> list[Path]:
    return sorted(p for p in CORPUS.iterdir() if p.is_file()) if CORPUS.is_dir() else []


def test_corpus_is_large() -> None:
    assert len(_files()) > 1000


def test_every_file_parses_and_answers() -> None:
    failures: list[str] = []
    for path in _files():
        body = path.read_bytes()
        try:
            robots = RobotsTxt.parse(body)
            urls = [m.group(1).decode("utf-8", "replace") for m in RULE.finditer(body[:20_000])]
            for url in [*urls[:5], *COMMON]:
                for agent in ("Googlebot", "MyCrawler/1.0"):
                    absolute = "https://example.com" + url
                    decision = robots.explain(absolute, agent)
                    assert robots.allowed(absolute, agent) is decision.allowed
            assert robots.allowed("/robots.txt", "Googlebot")
            robots.crawl_delay("Googlebot")
            robots.request_rate("Googlebot")
            robots.content_signals("Googlebot")
        except Exception as exc:  # collect, so one run lists them all
            failures.append(f"{path.name}: {type(exc).__name__}: {exc}")
    assert not failures, failures[:20]


def test_a_disallowing_file_is_read_as_such() -> None:
    # At least some files must disallow their own listed rules for the "*" group.
    disallowing = 0
    for path in _files()[:400]:
        body = path.read_bytes()
        robots = RobotsTxt.parse(body)
        if robots.rule_count and not robots.allowed("/", "*"):
            disallowing += 1
    assert disallowing > 0
