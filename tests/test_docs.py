"""The documentation says what the code does: every setting, slug and JSON key.

- docs/settings.md has a heading for exactly the settings ``Config.from_settings``
  reads, an index linking each, and each entry's "wrong value" gives the message shown;
- docs/reference.md lists every ``reason`` and ``source`` slug a decision can carry;
- docs/command.md shows every key of ``scrapy robots --json``;
- the README's two Quickstart commands are the ones ``.ci/run`` runs, word for word,
  and the README stays short and in its order;
- neither cites documents a reader does not have;
- the docs' changelog page is CHANGELOG.md, and the local Scrapy inventory is the one
  docs/_inventories/make_inv.py writes.

The README's first steps, run for real: test_docs_first_run.py.

The Sphinx build itself (warnings as errors) runs in ``.ci/run``.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import zlib
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
from scrapy_rep.policy.config import Config, SettingError
from scrapy_rep.policy.records import RULES, OriginRecord
from scrapy_rep.policy.robots_policy import FetchOutcome
from scrapy_rep.robotstxt import RobotsTxt

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"

#: Settings documented in the reference but read outside ``Config``: where they are read
#: (none today: every setting is read by ``Config.from_settings``).
READ_ELSEWHERE: dict[str, str] = {}

#: Settings documented ahead of the branches that add them, each marked in the page with
#: a ``% PENDING NAME`` comment: tolerated while ``Config`` does not read them yet.
PENDING: set[str] = set()


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


def setting_headings(text: str) -> list[str]:
    """The settings with an entry of their own: ``### `NAME` `` headings."""
    return re.findall(r"^### `([A-Z][A-Z0-9_]*)`\s*$", text, flags=re.M)


def setting_entry(text: str, name: str) -> str:
    return section(text, f"`{name}`")


def test_settings_reference_matches_the_config() -> None:
    read = settings_read_by_config()
    assert {"REP_STORAGE", "REP_ENFORCE", "ROBOTSTXT_OBEY"} <= read  # the recorder works
    text = (DOCS / "settings.md").read_text("utf-8")
    headings = setting_headings(text)
    assert len(headings) == len(set(headings)), "a setting has two entries"
    documented = set(headings)
    missing = read - documented
    assert not missing, f"settings read by Config.from_settings, missing from docs: {missing}"
    extra = documented - read - set(READ_ELSEWHERE) - PENDING
    assert not extra, f"documented settings that Config.from_settings does not read: {extra}"
    for name, module in READ_ELSEWHERE.items():
        assert name in documented
        assert f'"{name}"' in (ROOT / module).read_text("utf-8"), (name, module)
    for name in PENDING - read:
        assert f"% PENDING {name}:" in text, f"{name} is documented ahead of its code unmarked"


def test_settings_index_links_every_entry() -> None:
    text = (DOCS / "settings.md").read_text("utf-8")
    index = re.findall(r"^\| \[`([A-Z0-9_]+)`\]\(#([a-z0-9_-]+)\) \|", section(text, "Index"), re.M)
    assert [name for name, _ in index] == setting_headings(text), "index and entries differ"
    for name, anchor in index:
        # The heading's anchor, as MyST (myst_heading_anchors) and GitHub both spell it.
        assert anchor == name.lower(), (name, anchor)


def test_every_setting_entry_has_type_default_example_and_wrong_value() -> None:
    text = (DOCS / "settings.md").read_text("utf-8")
    assert setting_headings(text)
    for name in setting_headings(text):
        entry = setting_entry(text, name)
        for field in ("Type", "Default", "Example", "Wrong value"):
            assert f"- **{field}:** " in entry, f"{name}: no {field}"
        assert f"- **Example:** `{name} = " in entry, name


def test_documented_wrong_values_give_the_documented_messages() -> None:
    text = (DOCS / "settings.md").read_text("utf-8")
    read = settings_read_by_config()
    checked = 0
    for name in setting_headings(text):
        line = re.search(r"^- \*\*Wrong value:\*\* (.*)$", setting_entry(text, name), re.M)
        assert line, name
        shown = re.fullmatch(r"`(\w+) = (.+?)` stops the start: `(.+)`", line.group(1))
        if name in PENDING - read:
            continue  # not read yet: nothing to check it against
        assert shown, f"{name}: its wrong value shows no message"
        setting, value, message = shown.groups()
        assert setting == name
        with pytest.raises(SettingError) as raised:
            Config.from_settings({name: ast.literal_eval(value)})
        assert str(raised.value) == message, (name, str(raised.value))
        checked += 1
    assert checked >= len(read)


def test_readme_settings_table_covers_the_config() -> None:
    text = README.read_text("utf-8")
    documented = set()
    for name in table_names(section(text, "Settings")):
        documented.update(part.strip(" `") for part in name.split("/"))
    missing = settings_read_by_config() - documented - {"USER_AGENT", "DOWNLOAD_TIMEOUT"} - PENDING
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
        "scrapy-rep does nothing",
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


def test_readme_durable_waiting_states_the_default() -> None:
    slow = section(README.read_text("utf-8"), "When robots.txt is slow or down")
    assert Config().durable_waiting is None
    assert "`REP_DURABLE_WAITING` is unset by default" in " ".join(slow.split())
    assert "JOBDIR" in slow and "SCHEDULER_PERSIST" in slow


def test_readme_leaves_maintainer_material_to_the_docs() -> None:
    text = README.read_text("utf-8")
    assert "## Architecture" not in text
    for detail in ("parse_steps", "prepare_steps", "under 10 ms of CPU", "Agent2"):
        assert detail not in text, detail
    for page in ("docs/rfc.md", "docs/architecture.md", "docs/benchmarks.md"):
        assert f"]({page})" in text, page


def test_first_pages_say_how_to_enable_it() -> None:
    for page in (DOCS / "index.md", DOCS / "install.md"):
        text = page.read_text("utf-8")
        assert "`ADDONS` dict your `settings.py`" in text, page
        assert "Nothing can warn" in text, page
    enable = section((DOCS / "install.md").read_text("utf-8"), "Enable it")
    assert enable.strip().startswith("**Add the entry to the `ADDONS` dict"), enable[:200]


def test_changelog_page_includes_the_changelog() -> None:
    page = (DOCS / "changelog.md").read_text("utf-8")
    assert "```{include} ../CHANGELOG.md" in page
    assert re.search(r"^changelog$", (DOCS / "index.md").read_text("utf-8"), re.M)


def test_scrapy_inventory_is_what_make_inv_writes() -> None:
    script = DOCS / "_inventories" / "make_inv.py"
    spec = importlib.util.spec_from_file_location("make_inv", script)
    assert spec and spec.loader
    make_inv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_inv)
    raw = (DOCS / "_inventories" / "scrapy.inv").read_bytes()
    header = make_inv.HEADER.encode("utf-8")
    assert raw.startswith(header), "scrapy.inv has another header: rerun make_inv.py"
    lines = zlib.decompress(raw[len(header) :]).decode("utf-8").splitlines()
    assert lines == make_inv.inventory_lines(), "scrapy.inv is stale: rerun make_inv.py"
    for line in lines:
        name, kind, _, uri, _ = line.split(" ")
        assert uri.endswith(f"#std-{kind.split(':')[1]}-{name}"), line


def test_docs_scrapy_references_are_in_the_inventory() -> None:
    """Every {setting}/{signal} a page names is scrapy-rep's own or in scrapy.inv (the
    Sphinx build, nitpicky, would fail otherwise; this says which, without building)."""
    raw = (DOCS / "_inventories" / "scrapy.inv").read_bytes()
    body = zlib.decompress(raw.split(b"zlib.\n", 1)[1]).decode("utf-8")
    known = {tuple(line.split(" ")[:2]) for line in body.splitlines()}
    settings_page = (DOCS / "settings.md").read_text("utf-8")
    own = set(re.findall(r"^```\{setting\} (\w+)$", settings_page, re.M))
    for page in sorted(DOCS.glob("*.md")):
        for role, name in re.findall(r"\{(setting|signal)\}`([^`]+)`", page.read_text("utf-8")):
            assert name in own or (name, f"std:{role}") in known, (page.name, role, name)
