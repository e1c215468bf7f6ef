"""The README's first steps, done as a new user does them, in real ``scrapy`` subprocesses.

- "Enable it": in a fresh ``scrapy startproject`` project, the README's add-on entry put
  into the template's own ``ADDONS`` dict enables scrapy-rep (the log's enabled add-ons
  and middlewares, scrapy-rep's stats, what the server received); the same entry pasted
  as a new ``ADDONS = ...`` line at the top is silently replaced by the template's
  ``ADDONS = {}``, which is why the README says so in its first lines.
- "``scrapy robots``": the README's example, run against the mock server serving the
  README's robots.txt from inside such a project, prints what the README shows.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.mockserver import MockServer
from tests.support.resolver import RESOLVER_SETTING
from tests.support.scrapy_compat import RESOLVER_SETTING_NAME
from tests.test_docs import README, section

PROJECT = "newbot"
STOCK_MIDDLEWARE = "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware"
REP_MIDDLEWARE = "scrapy_rep.middleware.RobotsTxtMiddleware"
RULES = "User-agent: *\nDisallow: /private\n"


def scrapy(
    args: list[str], cwd: Path, env: dict[str, str], *, online: bool = True
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "scrapy", *args]
    if online:
        command += ["-s", f"{RESOLVER_SETTING_NAME}={RESOLVER_SETTING}", "-s", "LOG_LEVEL=DEBUG"]
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture(scope="module")
def template_project(
    tmp_path_factory: pytest.TempPathFactory, subprocess_env: dict[str, str]
) -> Iterator[Path]:
    """A project exactly as ``scrapy startproject`` writes it (made once, copied per test)."""
    root = tmp_path_factory.mktemp("startproject")
    made = scrapy(["startproject", PROJECT], root, subprocess_env, online=False)
    assert made.returncode == 0, made.stderr
    yield root / PROJECT


@pytest.fixture
def project(template_project: Path, tmp_path: Path) -> Path:
    copy = tmp_path / PROJECT
    shutil.copytree(template_project, copy)
    return copy


def settings_file(project: Path) -> Path:
    return project / PROJECT / "settings.py"


def readme_enable_snippet() -> str:
    blocks = re.findall(
        r"```python\n(.*?)```", section(README.read_text("utf-8"), "Enable it"), re.S
    )
    assert blocks, "no settings.py snippet under README 'Enable it'"
    return str(blocks[0])


def apply_readme_instruction(settings: str, snippet: str) -> str:
    """Do what the README says: put the snippet's ADDONS entries into the template's own
    ADDONS dict, and set its other assignments (replacing the template's line if any)."""
    entries = re.search(r"^ADDONS = \{\n(.*?)^\}", snippet, re.M | re.S)
    assert entries, f"the README snippet shows no multi-line ADDONS dict:\n{snippet}"
    template_dict = re.search(r"^ADDONS = \{(.*?)\}", settings, re.M | re.S)
    assert template_dict, "the startproject template has no ADDONS dict any more"
    inner = template_dict.group(1).strip("\n")
    merged = "ADDONS = {\n" + (inner + "\n" if inner else "") + entries.group(1) + "}"
    settings = settings[: template_dict.start()] + merged + settings[template_dict.end() :]
    rest = snippet[entries.end() :]
    for line in rest.splitlines():
        assignment = re.match(r"^([A-Z_]+) = ", line)
        if not assignment:
            continue
        existing = re.search(rf"^{assignment.group(1)} = .*$", settings, re.M)
        if existing:
            settings = settings[: existing.start()] + line + settings[existing.end() :]
        else:
            settings += "\n" + line + "\n"
    return settings


def enabled_block(log: str, what: str) -> str:
    """The list Scrapy logs after ``Enabled <what>:`` (up to the next log line)."""
    match = re.search(rf"Enabled {what}:\n(.*?)\n\d{{4}}-\d\d-\d\d ", log, re.S)
    assert match, f"no 'Enabled {what}' line in the log"
    return match.group(1)


def test_readme_enable_it_says_to_use_the_templates_addons_dict() -> None:
    first_lines = section(README.read_text("utf-8"), "Enable it").strip().split("\n\n")[0]
    assert "`ADDONS` dict your `settings.py` already has" in first_lines
    assert "scrapy startproject" in first_lines
    assert "Nothing warns you" in first_lines
    assert REP_MIDDLEWARE in first_lines


@pytest.mark.slow
def test_readme_instruction_enables_scrapy_rep_in_a_new_project(
    project: Path, mockserver: MockServer, host: str, subprocess_env: dict[str, str]
) -> None:
    path = settings_file(project)
    path.write_text(apply_readme_instruction(path.read_text("utf-8"), readme_enable_snippet()))
    mockserver.configure(host, {"robots": {"body": RULES}})

    allowed = scrapy(["fetch", mockserver.url(host, "/page")], project, subprocess_env)
    forbidden = scrapy(["fetch", mockserver.url(host, "/private/x")], project, subprocess_env)

    for run in (allowed, forbidden):
        assert run.returncode == 0, run.stderr
        assert "scrapy_rep.addon.Addon" in enabled_block(run.stderr, "addons")
        middlewares = enabled_block(run.stderr, "downloader middlewares")
        assert REP_MIDDLEWARE in middlewares and STOCK_MIDDLEWARE not in middlewares
        assert "'robotstxt/origins': 1" in run.stderr  # a stat only scrapy-rep keeps
    assert "'robotstxt/forbidden': 1" in forbidden.stderr
    # robots.txt once (the default SQLite store in the project keeps it for the second
    # run), the allowed page, never the disallowed one.
    assert mockserver.paths(host) == ["/robots.txt", "/page"]


@pytest.mark.slow
def test_pasting_the_entry_above_the_templates_addons_does_nothing(
    project: Path, mockserver: MockServer, host: str, subprocess_env: dict[str, str]
) -> None:
    """What the README warns about: Scrapy's stock middleware runs, and nothing says so."""
    path = settings_file(project)
    path.write_text('ADDONS = {"scrapy_rep.Addon": 0}\n' + path.read_text("utf-8"))
    mockserver.configure(host, {"robots": {"body": RULES}})

    run = scrapy(["fetch", mockserver.url(host, "/page")], project, subprocess_env)

    assert run.returncode == 0, run.stderr
    assert enabled_block(run.stderr, "addons").strip() == "[]"
    assert STOCK_MIDDLEWARE in enabled_block(run.stderr, "downloader middlewares")
    assert "scrapy_rep" not in run.stderr


def test_readme_scrapy_robots_example_is_the_real_output(
    project: Path, mockserver: MockServer, host: str, subprocess_env: dict[str, str]
) -> None:
    example = re.search(
        r"```text\n\$ curl -s (\S+)\n(.*?)\$ (scrapy robots [^\n]+)\n(.*?)```",
        section(README.read_text("utf-8"), "`scrapy robots`"),
        re.S,
    )
    assert example, "the README's scrapy robots example lost its curl line or its command"
    robots_url, body, command, shown = example.groups()
    readme_origin = robots_url.removesuffix("/robots.txt")
    mockserver.configure(host, {"robots": {"body": body}})
    args = command.replace(readme_origin, mockserver.origin(host)).split()[2:]

    run = scrapy(["robots", *args], project, subprocess_env)

    store = project / ".scrapy" / "scrapy_rep.sqlite3"
    readme_store = re.search(r"stored \(sqlite (\S+)\)", shown)
    expected = shown.replace(readme_origin, mockserver.origin(host))
    if readme_store:
        expected = expected.replace(readme_store.group(1), str(store))
    printed = [
        line
        for line in run.stdout.splitlines()
        # Until `scrapy robots` prints only the usage preferences a site declared, it
        # adds an all-"unknown" usage line under each URL; drop this filter then.
        if not re.fullmatch(r"\s+usage: (?:[\w-]+=unknown(?:, )?)+", line)
    ]
    assert printed == expected.rstrip("\n").splitlines(), run.stdout
    status = re.search(r"\(exit status (\d)\)", shown)
    assert status and run.returncode == int(status.group(1)), run.stderr
