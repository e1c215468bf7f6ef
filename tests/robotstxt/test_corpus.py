"""Every real robots.txt of the shared corpus parses and answers without error.

The corpus lives outside the repository (../shared/corpus/robots from the repo
root, or ../../shared from a worktree); without it these tests are skipped.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from scrapy_rep import RobotsTxt

# (beside the repository's checkout, or beside the directory of its worktrees)
CORPUS = next(
    (
        found
        for up in Path(__file__).resolve().parents[3:5]
        if (found := up / "shared" / "corpus" / "robots").is_dir()
    ),
    Path(__file__).resolve().parents[3] / "shared" / "corpus" / "robots",
)
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


# What each corpus file reads as, recorded with the parser before its speed work
# (issue 12): a digest per file of everything RobotsTxt answers.  A change of engine
# that keeps behaviour (faster parse, other memory layout) must keep every digest;
# one that changes behaviour on purpose regenerates the file:
#   python -c "from tests.robotstxt.test_corpus import write_digests; write_digests()"
DIGESTS = Path(__file__).with_name("corpus_digests.txt")
_AGENTS = ("Googlebot", "MyCrawler/1.0", "bingbot", "GPTBot", "mj12bot", "*", "")
_FIELDS = ("crawl-delay", "request-rate", "content-signal", "content-usage")


def digest(body: bytes) -> str:
    """A short digest of everything *body* reads as: issues (with line numbers and
    text), counts, sitemaps, rules, extension values and lines, and the verdict and
    deciding line of its own rules' URLs and common ones, for several crawlers."""
    robots = RobotsTxt.parse(body)
    seen: list[object] = [
        [issue.as_dict() for issue in robots.issues],
        robots.issue_counts,
        robots.sitemaps,
        robots.truncated,
        robots.rule_count,
        [tuple(line) for field in _FIELDS for line in robots.extension_lines(None, field)],
    ]
    paths = [m.group(1).decode("utf-8", "replace") for m in RULE.finditer(body[:20_000])]
    urls = ["https://example.com" + p for p in (*paths[:8], *COMMON, "/%7Ea b")]
    for agent in _AGENTS:
        seen += [
            robots.crawl_delay(agent),
            robots.request_rate(agent),
            robots.content_signals(agent),
            [tuple(line) for field in _FIELDS for line in robots.extension_lines(agent, field)],
            [robots.explain(url, agent) for url in urls],
            [robots.allowed(url, agent) for url in urls],
        ]
    return hashlib.blake2b(repr(seen).encode(), digest_size=8).hexdigest()


def write_digests() -> None:
    DIGESTS.write_text("".join(f"{p.name} {digest(p.read_bytes())}\n" for p in _files()))


@pytest.mark.slow
@pytest.mark.skipif(not DIGESTS.is_file(), reason="no recorded digests")
def test_every_file_reads_as_recorded() -> None:
    recorded = dict(line.split() for line in DIGESTS.read_text().splitlines())
    changed = [p.name for p in _files() if recorded.get(p.name) != digest(p.read_bytes())]
    assert not changed, f"{len(changed)} files read differently: {changed[:20]}"
