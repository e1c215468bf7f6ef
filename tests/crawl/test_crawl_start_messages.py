"""What a new user's first runs say: typos in setting names, scrapy-rep switched off by
``ROBOTSTXT_OBEY``, a store that cannot be reached at start, and the origin that keeps
a run waiting, named on every run.

Real ``scrapy crawl`` subprocesses on a project directory (tests/crawl/
test_waiting_carry_over.py's project) and real in-process crawls against the suite's
local server; the log lines and what the server received are the evidence."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
import redis
import scrapy
from scrapy.settings import Settings

from scrapy_rep.policy.config import SETTING_NAMES, Config, unknown_settings
from tests.crawl.test_waiting_carry_over import (
    ALLOW_ALL,
    make_project,
    scrapy_crawl,
    two_origin_site,
)
from tests.support import redis_server as redis_helper
from tests.support.crawl import REP, pages_of
from tests.support.redis_server import RedisServer
from tests.support.resolver import RESOLVER_SETTING
from tests.support.scrapy_compat import RESOLVER_SETTING_NAME

private_redis_server = redis_helper.private_redis_server

# -- typos in setting names ------------------------------------------------------------


def test_unknown_rep_names_come_with_the_closest_known_name() -> None:
    settings = Settings({"REP_STORGE": "memory", "REP_ENFORSE": False, "REP_ZZZ": 1})
    assert unknown_settings(settings) == [
        ("REP_ENFORSE", "REP_ENFORCE"),
        ("REP_STORGE", "REP_STORAGE"),
        ("REP_ZZZ", None),
    ]
    # every name the config reads is known, so none of them is reported
    assert unknown_settings(Settings(dict.fromkeys(SETTING_NAMES))) == []


@pytest.mark.slow
def test_a_typo_in_a_setting_name_is_one_warning_at_start(
    mockserver: Any, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    """``scrapy crawl ... -s REP_ENFORSE=False``: the crawl runs with REP_ENFORCE's
    default, and says once, at WARNING, which name it does not know and which it meant."""
    site = mockserver.unique_host("typo")
    mockserver.configure(site, {"robots": {"body": ALLOW_ALL}})
    project = make_project(tmp_path / "project")
    start = mockserver.url(site, "/")
    log, urls = scrapy_crawl(
        project, subprocess_env, start, "items.jsonl", "-s", "REP_ENFORSE=False"
    )
    assert urls == [start]
    warning = (
        "[scrapy_rep.middleware] WARNING: unknown setting REP_ENFORSE is ignored; "
        "did you mean REP_ENFORCE?"
    )
    assert log.count(warning) == 1, log[-3000:]
    assert "enforcing" in log  # the default applies: REP_ENFORSE changed nothing


# -- ROBOTSTXT_OBEY = False with the add-on --------------------------------------------


@pytest_twisted.ensureDeferred
async def test_the_addon_with_robotstxt_obey_false_says_it_is_off(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    mockserver.configure(host, {"robots": {"body": "User-agent: *\nDisallow: /\n"}})
    crawler = await run_crawl(
        [mockserver.url(host, "/a")], settings={**REP, "ROBOTSTXT_OBEY": False}
    )
    assert mockserver.paths(host) == ["/a"]  # robots.txt neither fetched nor obeyed
    lines = [
        m
        for m in crawler.messages(logging.INFO, logger="scrapy_rep")
        if m.startswith("scrapy-rep is off: ROBOTSTXT_OBEY is False")
    ]
    assert len(lines) == 1, crawler.messages(logging.INFO)


# -- a store that cannot be reached at start -------------------------------------------


def crawl_with_store(
    mockserver: Any, tmp_path: Path, subprocess_env: dict[str, str], url: str
) -> tuple[subprocess.CompletedProcess[str], str, str]:
    """A ``scrapy crawl`` whose REP_STORAGE is ``url``, to its end: the finished process,
    the first ``the crawl cannot start`` ERROR line and the host the spider would crawl."""
    site = mockserver.unique_host("noredis")
    mockserver.configure(site, {"robots": {"body": ALLOW_ALL}})
    project = make_project(tmp_path / "project")
    command = [
        sys.executable, "-m", "scrapy", "crawl", "site",
        "-s", f"{RESOLVER_SETTING_NAME}={RESOLVER_SETTING}",
        "-s", f"REP_STORAGE={url}",
    ]  # fmt: skip
    done = subprocess.run(
        command,
        cwd=project,
        env={**subprocess_env, "CARRY_START": mockserver.url(site, "/")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if scrapy.version_info >= (2, 19):
        # (Scrapy 2.14 exits 0 when a crawl fails after its spider was built: its
        # CrawlerProcess counts only crawls without a spider as failed to start)
        assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if " ERROR: " in line]
    assert errors, done.stderr[-3000:]
    assert sum("the crawl cannot start" in line for line in done.stderr.splitlines()) == 1
    return done, errors[0], site


@pytest.mark.slow
def test_an_unreachable_redis_at_start_stops_the_crawl(
    mockserver: Any, tmp_path: Path, subprocess_env: dict[str, str], refused_port: int
) -> None:
    """REP_STORAGE names a Redis nothing listens on: a few seconds of retries, then one
    ERROR line naming REP_STORAGE and the reason, no request sent, exit status 1."""
    url = f"redis://127.0.0.1:{refused_port}/0"
    _, first, site = crawl_with_store(mockserver, tmp_path, subprocess_env, url)
    assert "[scrapy_rep.middleware] ERROR: the crawl cannot start: REP_STORAGE = " in first
    assert f"'{url}': the store does not answer (" in first
    assert mockserver.paths(site) == []


@pytest.mark.slow
def test_a_wrong_redis_password_at_start_stops_the_crawl_at_once(
    mockserver: Any,
    tmp_path: Path,
    subprocess_env: dict[str, str],
    private_redis_server: RedisServer,
) -> None:
    """A real redis-server that asks for a password, a URL with the wrong one: the crawl
    stops without retries (the server saw one connection), one ERROR line that names
    REP_STORAGE with the password masked, and no request sent."""
    admin = redis.Redis.from_url(private_redis_server.url)
    try:
        before = int(admin.info("stats")["total_connections_received"])
        url = f"redis://:wrong-pw@127.0.0.1:{private_redis_server.port}/0"
        done, first, site = crawl_with_store(mockserver, tmp_path, subprocess_env, url)
        after = int(admin.info("stats")["total_connections_received"])
    finally:
        admin.close()
    assert after - before == 1  # one try, not 3 s of them
    masked = f"redis://:***@127.0.0.1:{private_redis_server.port}/0"
    assert f"the crawl cannot start: REP_STORAGE = '{masked}': the store does not" in first
    assert "an authentication error, not retried" in first
    assert "wrong-pw" not in done.stderr
    assert mockserver.paths(site) == []


# -- the waiting origin, named on every run ---------------------------------------------


@pytest.mark.slow
def test_every_run_names_the_origin_that_keeps_it_waiting(
    mockserver: Any, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    """Two runs on one project (the SQLite store in .scrapy/) while an origin answers
    503. The first finds it unreachable and says so at WARNING; the second finds it
    unreachable in the store (its failed refetches are DEBUG lines) and still says at
    WARNING which origin keeps its requests waiting, until when, and what Ctrl-C does
    (before: only an INFO line without the origin)."""
    start, _own, elsewhere = two_origin_site(mockserver)
    other = elsewhere.rsplit("/", 1)[0]
    project = make_project(tmp_path / "project")
    first, _ = scrapy_crawl(project, subprocess_env, start, "first.jsonl")
    warned = [
        line
        for line in first.splitlines()
        if f"[scrapy_rep.crawl.coordinator] WARNING: robots.txt of {other} is unreachable (503)"
        in line
    ]
    assert len(warned) == 1, first[-3000:]
    assert "the wait ends at " in warned[0]
    assert warned[0].endswith("Ctrl-C stops the crawl now, and the waiting requests are dropped"), (
        warned[0]
    )
    assert "stays open only for requests waiting" not in first  # said once, not twice

    second, _ = scrapy_crawl(project, subprocess_env, start, "second.jsonl")
    assert f"WARNING: robots.txt of {other} is unreachable" not in second
    warnings = [
        line
        for line in second.splitlines()
        if "[scrapy_rep.crawl.closing] WARNING: the spider stays open only for requests "
        "waiting on robots.txt: " in line
    ]
    assert len(warnings) == 1, second[-3000:]
    line = warnings[0]
    # the origin's own wait (REP_UNREACHABLE_WAIT, 12 h) ends after the spider closes,
    # so the time given is the close's (REP_IDLE_WAIT)
    assert f"{other} (1 request(s), robots.txt unreachable: 503)" in line, line
    assert "it waits until " in line and " UTC (REP_IDLE_WAIT)" in line
    assert line.endswith("Ctrl-C stops the crawl now, and the waiting requests are dropped"), line


def test_a_wait_ending_another_day_shows_its_date() -> None:
    from scrapy_rep.crawl.visibility import clock_time

    noon = 1_700_000_000.0 - 1_700_000_000.0 % 86_400 + 43_200  # 12:00 UTC
    assert clock_time(noon + 3600, noon) == "13:00:00 UTC"
    assert clock_time(noon + 13 * 3600, noon).endswith(" 01:00:00 UTC")
    assert len(clock_time(noon + 13 * 3600, noon)) == len("2023-11-15 01:00:00 UTC")


def test_config_defaults_come_from_the_table() -> None:
    """One default per setting: ``Config()`` and ``Config.from_settings({})`` agree,
    but for the settings Scrapy itself defaults (read from its settings there)."""
    built, read = Config(), Config.from_settings({})
    assert built == read


@pytest_twisted.ensureDeferred
async def test_summary_counts_an_origin_that_recovered(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """503, then 200: the summary's state at close is "0 unreachable", and it says the
    origin turned unreachable during the crawl, as the stats key robotstxt/unreachable
    does (the demo's summary said "0 unreachable" beside robotstxt/unreachable=1)."""
    mockserver.configure(
        host, {"robots": [{"status": 503}, {"body": ALLOW_ALL}], "pages": {"/a": {}}}
    )
    crawler = await run_crawl([mockserver.url(host, "/a")], settings=REP)
    assert pages_of(mockserver, host) == ["/a"]
    assert crawler.stat("robotstxt/unreachable") == 1
    summary = next(m for m in crawler.messages() if m.startswith("scrapy-rep summary:"))
    assert "0 unreachable" in summary
    assert "turned unreachable during the crawl: 1 time(s) (robotstxt/unreachable)" in summary
