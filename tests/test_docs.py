"""The documentation says what the code does: every setting, slug and JSON key.

- docs/settings.md lists exactly the settings ``Config.from_settings`` reads;
- docs/reference.md lists every ``reason`` and ``source`` slug a decision can carry;
- docs/command.md shows every key of ``scrapy robots --json``;
- the README's two Quickstart commands are the ones ``.ci/run`` runs, word for word,
  and the README stays short and in its order;
- neither cites documents a reader does not have.

The Sphinx build itself (warnings as errors) runs in ``.ci/run``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from scrapy_rep.commands.output import (
    COPY_STORED,
    HOLD,
    SOURCE_FILE,
    OriginReport,
    Report,
    StoredState,
    UrlResult,
    Verdict,
)
from scrapy_rep.crawl import decide
from scrapy_rep.policy import robots_policy
from scrapy_rep.policy.config import Config
from scrapy_rep.policy.records import RULES, OriginRecord
from scrapy_rep.policy.robots_policy import FetchOutcome
from scrapy_rep.robotstxt import RobotsTxt

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"

#: Settings documented in the reference but read outside ``Config``: where they are read
#: (none today: every setting is read by ``Config.from_settings``).
READ_ELSEWHERE: dict[str, str] = {}


class _RecordingSettings(dict[str, Any]):
    """A settings mapping that remembers every name asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.asked.add(key)
        return default

    def __getitem__(self, key: str) -> Any:
        self.asked.add(key)
        raise KeyError(key)


def settings_read_by_config() -> set[str]:
    settings = _RecordingSettings()
    Config.from_settings(settings)
    return settings.asked


def table_names(text: str) -> set[str]:
    """The backticked names in the first column of Markdown tables."""
    names: set[str] = set()
    for line in text.splitlines():
        match = re.match(r"\|\s*(`[^|]+`)\s*\|", line)
        if match:
            names.update(re.findall(r"`([^`]+)`", match.group(1)))
    return names


def section(text: str, heading: str) -> str:
    """The text under ``heading`` (any level) up to the next heading of that level."""
    match = re.search(rf"^(#+) {re.escape(heading)}\s*$", text, flags=re.M)
    assert match, f"no heading {heading!r}"
    level = match.group(1)
    rest = text[match.end() :]
    end = re.search(rf"^{level} ", rest, flags=re.M)
    return rest if end is None else rest[: end.start()]


def test_settings_reference_matches_the_config() -> None:
    read = settings_read_by_config()
    assert {"REP_STORAGE", "REP_ENFORCE", "ROBOTSTXT_OBEY"} <= read  # the recorder works
    documented = table_names((DOCS / "settings.md").read_text("utf-8"))
    missing = read - documented
    assert not missing, f"settings read by Config.from_settings, missing from docs: {missing}"
    extra = documented - read - set(READ_ELSEWHERE)
    assert not extra, f"documented settings that Config.from_settings does not read: {extra}"
    for name, module in READ_ELSEWHERE.items():
        assert name in documented
        assert f'"{name}"' in (ROOT / module).read_text("utf-8"), (name, module)


def test_readme_settings_table_covers_the_config() -> None:
    text = README.read_text("utf-8")
    documented = set()
    for name in table_names(section(text, "Settings")):
        documented.update(part.strip(" `") for part in name.split("/"))
    missing = settings_read_by_config() - documented - {"USER_AGENT", "DOWNLOAD_TIMEOUT"}
    assert not missing, f"README settings table lacks {missing}"


def test_every_reason_and_source_slug_is_documented() -> None:
    reference = (DOCS / "reference.md").read_text("utf-8")
    reasons = table_names(section(reference, "`robotstxt_decision`").split("`source`:")[0])
    sources = table_names(reference.split("`source`:")[1])
    code_reasons = {
        "rule",
        "no-matching-rule",
        "no-matching-group",
        "robots.txt-always-allowed",
        *(getattr(decide, n) for n in dir(decide) if n.startswith("REASON_")),
    }
    code_sources = {
        robots_policy.FRESH,
        robots_policy.EXPIRED,
        robots_policy.STALE,
        robots_policy.FALLBACK,
        decide.SOURCE_UNREACHABLE,
        SOURCE_FILE,
    }
    assert code_reasons <= reasons, code_reasons - reasons
    assert code_sources <= sources, code_sources - sources


def test_explain_reasons_are_the_documented_ones() -> None:
    from scrapy_rep.robotstxt._robotstxt import RobotsTxt

    robots = RobotsTxt.parse("User-agent: a\nDisallow: /x\n")
    found = {
        robots.explain(url, token).reason
        for url, token in (("/x", "a"), ("/y", "a"), ("/y", "b"), ("/robots.txt", "a"))
    }
    assert found == {"rule", "no-matching-rule", "no-matching-group", "robots.txt-always-allowed"}


def _json_keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        keys = set(value)
        for item in value.values():
            keys |= _json_keys(item)
        return keys
    if isinstance(value, list):
        return set().union(*(_json_keys(item) for item in value)) if value else set()
    return set()


def test_every_json_key_is_documented() -> None:
    now = 1_700_000_000.0
    record = OriginRecord(RULES, b"User-agent: *\nDisallow: /\n", now - 60, now + 60)
    verdict = Verdict("disallowed", 2, "Disallow: /", "*", "rule", "fresh")
    origin = OriginReport(
        origin="https://a.example",
        robots_url="https://a.example/robots.txt",
        fetch=FetchOutcome(RULES, "200", b"", 200),
        action=HOLD,
        copy=COPY_STORED,
        stored=StoredState("sqlite /x", record),
        request_rate=(1, 5.0),
    )
    usage = RobotsTxt.parse(b"User-agent: *\nContent-Usage: train-ai=n\n").usage("/p", "MyBot")
    result = UrlResult(
        "https://a.example/p", "https://a.example", verdict, verdict, verdict, usage.to_json()
    )
    origin.urls = [result]
    doc = Report("MyBot", "fetch", [origin], [result], now=now).to_json()
    schema = section((DOCS / "command.md").read_text("utf-8"), "`--json`")
    quoted = set(re.findall(r'"([a-z_-]+)"', schema))
    missing = _json_keys(doc) - quoted
    assert not missing, f"--json keys missing from docs/command.md: {missing}"


# -- the README -------------------------------------------------------------------------

README_ORDER = [
    "Install",
    "Quickstart",
    "Enable it",
    "When robots.txt is slow or down",
    "Settings",
    "`scrapy robots`",
    "Troubleshooting",
    "Architecture",
    "Documentation",
    "Benchmarks",
]


def quickstart_commands() -> list[str]:
    text = section(README.read_text("utf-8"), "Quickstart")
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S)]


def test_readme_quickstart_commands_are_what_ci_runs() -> None:
    commands = quickstart_commands()
    assert len(commands) == 2, commands
    demo, tests = commands
    assert "example_project/run_demo.py" in demo and "pytest" in tests
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text("utf-8").splitlines()]
    for command in commands:
        assert "\n" not in command
        assert command in ci_lines, f"{command!r} is not a line of .ci/run"


def test_readme_is_short_and_in_order() -> None:
    text = README.read_text("utf-8")
    assert len(text.splitlines()) <= 300
    headings = re.findall(r"^## (.+?)\s*$", text, flags=re.M)
    assert headings == README_ORDER
    assert "pip install scrapy-rep" in section(text, "Install")
    assert "scrapy-rep[redis]" in section(text, "Install")
    slow = section(text, "When robots.txt is slow or down")
    for topic in ("REP_IDLE_WAIT", "REP_ENFORCE = False", "--forget", "--refresh"):
        assert topic in slow, topic
    trouble = section(text, "Troubleshooting")
    for case in (
        "My crawl doesn't finish",
        "robots.txt changed but is ignored",
        "robots.txt fetched twice",
    ):
        assert case in trouble


@pytest.mark.parametrize(
    "path", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: str(Path(p).name)
)
def test_no_references_a_reader_does_not_have(path: Path) -> None:
    text = path.read_text("utf-8")
    assert not re.search(r"\bSPEC\b", text), path
    assert "../shared" not in text and "/work/" not in text, path


def test_docs_links_point_at_pages() -> None:
    text = README.read_text("utf-8")
    for target in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / target).is_file(), target
    index = (DOCS / "index.md").read_text("utf-8")
    pages = {p.stem for p in DOCS.glob("*.md")} - {"index"}
    listed = set(re.findall(r"^([a-z]+)$", index, flags=re.M))
    assert pages <= listed, pages - listed
