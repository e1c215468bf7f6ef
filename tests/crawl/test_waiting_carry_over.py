"""Waiting requests across runs (docs/waiting.md): they outlive a run only
where the crawl itself persists, an adopted request never makes a page crawled twice,
what is called kept is what the store holds, and restarts never multiply parked copies.

Real ``scrapy crawl`` / ``scrapy runspider`` subprocesses on one project directory, real
SIGINT and ``kill -9``, the real SQLite store; what the local server received, the
feeds and the stats are the evidence."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
import scrapy
from twisted.internet import defer

from scrapy_rep.crawl.durable_waiting import open_cluster
from tests.crawl.test_crawl_storage_shared import start_process
from tests.crawl.test_waiting_adoption import NextRun, owners_alive
from tests.support.crawl import REP, pages_of
from tests.support.resolver import RESOLVER_SETTING
from tests.support.scrapy_compat import RESOLVER_SETTING_NAME
from tests.support.waits import wait_until

ALLOW_ALL = "User-agent: *\nAllow: /\n"

# -- two runs of a CrawlSpider on one project directory ---------------------------------

SETTINGS_PY = """\
BOT_NAME = "carry"
SPIDER_MODULES = ["carry.spiders"]
ADDONS = {"scrapy_rep.Addon": 0}
ROBOTSTXT_OBEY = True
RETRY_ENABLED = False
TELNETCONSOLE_ENABLED = False
LOG_LEVEL = "INFO"
# a run ends soon after nothing but the 503 origin's request is left
REP_IDLE_WAIT = 1
REP_RETRY_BACKOFF = 0.5
REP_MAX_RETRY_BACKOFF = 1
"""

SPIDER_PY = """\
import os

from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule


class SiteSpider(CrawlSpider):
    name = "site"
    start_urls = [os.environ["CARRY_START"]]
    rules = (Rule(LinkExtractor(), callback="parse_item", follow=True),)

    def parse_start_url(self, response):
        return self.parse_item(response)

    def parse_item(self, response):
        yield {"url": response.url}
"""


def make_project(root: Path) -> Path:
    """A Scrapy project with default scrapy-rep settings (the SQLite store in .scrapy/)."""
    root.mkdir()
    (root / "scrapy.cfg").write_text("[settings]\ndefault = carry.settings\n")
    package = root / "carry"
    (package / "spiders").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(SETTINGS_PY)
    (package / "spiders" / "__init__.py").write_text("")
    (package / "spiders" / "site.py").write_text(textwrap.dedent(SPIDER_PY))
    return root


def scrapy_crawl(
    project: Path, env: dict[str, str], start: str, feed: str, *extra: str
) -> tuple[str, list[str]]:
    """One ``scrapy crawl site`` run to its end: its log, and the URLs of its feed."""
    command = [
        sys.executable, "-m", "scrapy", "crawl", "site", "-O", feed,
        "-s", f"{RESOLVER_SETTING_NAME}={RESOLVER_SETTING}",
        *extra,
    ]  # fmt: skip
    done = subprocess.run(
        command,
        cwd=project,
        env={**env, "CARRY_START": start},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = (project / feed).read_text().splitlines()
    return done.stderr, [json.loads(line)["url"] for line in lines if line.strip()]


def stat_in_log(log: str, key: str) -> Any:
    """A value of Scrapy's closing stats dump (``'key': value``), or None."""
    found = re.search(rf"'{re.escape(key)}': (\d+)", log)
    return int(found.group(1)) if found else None


def two_origin_site(mockserver: Any) -> tuple[str, str, str]:
    """A site whose start page links to a page of its own and to one of another origin,
    whose robots.txt answers 503. Returns (start URL, own page, the other's page)."""
    site, other = mockserver.unique_host("site"), mockserver.unique_host("other")
    own, elsewhere = mockserver.url(site, "/about"), mockserver.url(other, "/page")
    mockserver.configure(
        site, {"robots": {"body": ALLOW_ALL}, "pages": {"/": {"links": [own, elsewhere]}}}
    )
    mockserver.configure(other, {"robots": {"status": 503}})
    return mockserver.url(site, "/"), own, elsewhere


def received(mockserver: Any, url: str) -> int:
    host = url.split("//", 1)[1].split(":", 1)[0]
    path = "/" + url.split("//", 1)[1].split("/", 1)[1]
    return Counter(pages_of(mockserver, host))[path]


@pytest.mark.slow
def test_a_stopped_run_drops_its_waiting_request_and_the_next_crawls_each_page_once(
    mockserver: Any, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    """Default settings, no JOBDIR: run 1 ends on REP_IDLE_WAIT while the other origin
    answers 503; it says at start that waiting requests are dropped, and drops the one
    it has with a summary line and a stats key. Run 2, the origin recovered: the page
    is found again and crawled once; each item is once in the feed."""
    project = make_project(tmp_path / "project")
    start, own, elsewhere = two_origin_site(mockserver)

    log, items = scrapy_crawl(project, subprocess_env, start, "run1.jsonl")
    assert "requests waiting on robots.txt when the crawl stops are dropped" in log
    assert "dropped 1 request(s), the spider closed while they waited" in log
    assert stat_in_log(log, "robotstxt/dropped_at_close") == 1
    assert stat_in_log(log, "robotstxt/kept_in_store") is None
    assert sorted(items) == sorted([start, own])
    assert received(mockserver, elsewhere) == 0

    other = elsewhere.split("//", 1)[1].split(":", 1)[0]
    mockserver.configure(other, {"robots": {"body": ALLOW_ALL}})
    log, items = scrapy_crawl(project, subprocess_env, start, "run2.jsonl")
    assert "adopted" not in log
    assert sorted(items) == sorted([start, own, elsewhere])  # each item once
    assert received(mockserver, elsewhere) == 1  # the site saw one GET
    assert received(mockserver, own) == 2  # once per run, as Scrapy crawls without JOBDIR


@pytest.mark.slow
def test_a_kept_request_adopted_by_the_next_run_passes_its_dupefilter(
    mockserver: Any, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    """REP_DURABLE_WAITING = True, no JOBDIR: run 1 keeps its waiting request in the
    store; run 2 adopts it and also finds the same link again. The adopted request goes
    through run 2's dupefilter like any scheduled request: the page is crawled once."""
    project = make_project(tmp_path / "project")
    start, own, elsewhere = two_origin_site(mockserver)
    durable = ("-s", "REP_DURABLE_WAITING=True")

    log, _ = scrapy_crawl(project, subprocess_env, start, "run1.jsonl", *durable)
    assert "outlive this run (REP_DURABLE_WAITING = True)" in log
    assert stat_in_log(log, "robotstxt/kept_in_store") == 1

    other = elsewhere.split("//", 1)[1].split(":", 1)[0]
    mockserver.configure(other, {"robots": {"body": ALLOW_ALL}})
    log, items = scrapy_crawl(project, subprocess_env, start, "run2.jsonl", *durable)
    assert stat_in_log(log, "robotstxt/ledger/adopted") == 1
    assert sorted(items) == sorted([start, own, elsewhere])  # each item once
    assert received(mockserver, elsewhere) == 1


@pytest.mark.slow
def test_with_jobdir_the_waiting_request_is_crawled_once_in_the_resumed_run(
    mockserver: Any, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    """The same two runs with JOBDIR: run 1 hands the waiting request back to the
    scheduler, the resumed run crawls it once, and the page it finds again is
    filtered by the persisted dupefilter."""
    project = make_project(tmp_path / "project")
    start, own, elsewhere = two_origin_site(mockserver)
    jobdir = ("-s", "JOBDIR=job")

    log, items = scrapy_crawl(project, subprocess_env, start, "run1.jsonl", *jobdir)
    assert "requests waiting on robots.txt outlive this run (JOBDIR is set)" in log
    assert stat_in_log(log, "robotstxt/handed_back") == 1
    assert stat_in_log(log, "robotstxt/dropped_at_close") is None
    assert received(mockserver, elsewhere) == 0

    other = elsewhere.split("//", 1)[1].split(":", 1)[0]
    mockserver.configure(other, {"robots": {"body": ALLOW_ALL}})
    log, items = scrapy_crawl(project, subprocess_env, start, "run2.jsonl", *jobdir)
    assert Counter(items)[elsewhere] == 1
    assert received(mockserver, elsewhere) == 1
    assert received(mockserver, own) == 1  # the resumed run's dupefilter knows it


# -- a graceful stop while robots.txt fetches are in flight -----------------------------

ORIGINS = 5
PER_ORIGIN = 3


def start_with_fetches_held(
    mockserver: Any, tmp_path: Path, env: dict[str, str], spec: str, *extra: str
) -> tuple[subprocess.Popen[bytes], Path, Path, list[str], str]:
    """A crawler process holding 3 requests of each of 5 origins whose robots.txt
    answers only when the test opens a gate; returns once the 5 fetches are in flight
    and the 15 requests wait."""
    gate = f"robots-{mockserver.unique_host('gate')}"
    hosts = [mockserver.unique_host(f"late{i}") for i in range(ORIGINS)]
    for host in hosts:
        mockserver.configure(host, {"robots": {"body": ALLOW_ALL, "hold": gate}})
    urls = [mockserver.url(h, f"/w{i}") for h in hosts for i in range(PER_ORIGIN)]
    (tmp_path / "go").write_text("go")
    proc, result, log = start_process(tmp_path, env, spec, "stopped", urls, extra)
    try:
        deadline = time.monotonic() + 60
        while log.read_text().count("Delayed until robots.txt") < len(urls) or sum(
            mockserver.count(h, "/robots.txt") for h in hosts
        ) < len(hosts):
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the requests did not start waiting"
            time.sleep(0.05)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc, result, log, hosts, gate


def stop_gracefully_then_answer(
    mockserver: Any, proc: subprocess.Popen[bytes], log: Path, gate: str
) -> None:
    """SIGINT (Ctrl-C), then the robots.txt answers land while the engine closes."""
    proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 60
    while "Closing spider (shutdown)" not in log.read_text():
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.05)
    mockserver.open_gate(gate)
    assert proc.wait(timeout=90) == 0, log.read_text()[-3000:]


@pytest.mark.slow
def test_a_graceful_stop_with_fetches_in_flight_drops_and_counts_what_nothing_keeps(
    mockserver: Any, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    """Default settings (nothing persists): the requests released while the engine
    closes are neither handed to the closing scheduler nor called kept: they are
    counted as dropped, once each."""
    spec = f"sqlite:{tmp_path / 'store.db'}"
    proc, _, log, hosts, gate = start_with_fetches_held(mockserver, tmp_path, subprocess_env, spec)
    stop_gracefully_then_answer(mockserver, proc, log, gate)
    text = log.read_text()  # (the closing stats dump: the last word on every key)
    assert stat_in_log(text, "robotstxt/dropped_at_close") == ORIGINS * PER_ORIGIN
    assert stat_in_log(text, "robotstxt/kept_in_store") is None
    assert all(pages_of(mockserver, h) == [] for h in hosts)
    assert "kept in the shared store" not in text


@pytest.mark.slow
@pytest_twisted.ensureDeferred
async def test_a_graceful_stop_with_fetches_in_flight_keeps_what_it_says_it_keeps(
    mockserver: Any, run_crawl: Any, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    """REP_DURABLE_WAITING = True: the requests released while the engine closes are
    parked again, so the store holds the 15 the log and stats call kept, none is
    also counted dropped, and the next run adopts exactly those 15 and crawls each
    once."""
    spec = f"sqlite:{tmp_path / 'store.db'}"
    durable = ("-s", "REP_DURABLE_WAITING=True", "-s", "REP_CLUSTER_HEARTBEAT=1")
    proc, _, log, hosts, gate = start_with_fetches_held(
        mockserver, tmp_path, subprocess_env, spec, *durable
    )
    stop_gracefully_then_answer(mockserver, proc, log, gate)
    text = log.read_text()  # (the closing stats dump: the last word on every key)
    kept = ORIGINS * PER_ORIGIN
    assert stat_in_log(text, "robotstxt/kept_in_store") == kept
    assert stat_in_log(text, "robotstxt/dropped_at_close") is None
    assert f"{kept} request(s) waiting on robots.txt kept in the shared store" in text
    assert all(pages_of(mockserver, h) == [] for h in hosts)
    cluster = open_cluster(spec, NextRun.name)
    assert cluster is not None
    try:
        assert len(cluster.parked()) == kept  # what the log says is what the store holds
        settings = {
            **REP,
            "REP_STORAGE": spec,
            "REP_CLUSTER_HEARTBEAT": 1,
            "REP_DURABLE_WAITING": True,
        }
        crawler = await run_crawl([], settings=settings, spider_cls=NextRun)
        assert crawler.stat("robotstxt/ledger/adopted") == kept
        crawled = Counter((h, p.split("?")[0]) for h in hosts for p in pages_of(mockserver, h))
        assert sorted(crawled.values()) == [1] * kept  # each exactly once
        assert cluster.parked() == []
    finally:
        cluster.close()


# -- kill -9 restarts ---------------------------------------------------------------------


def parked_per_owner_pid(cluster_file: Path, spider: str) -> dict[int, int]:
    """Parked rows per owner process id (an owner id is host-pid-random)."""
    if not cluster_file.exists():
        return {}
    try:
        with sqlite3.connect(cluster_file) as conn:
            rows = conn.execute(
                "SELECT owner, COUNT(*) FROM parked WHERE spider = ? GROUP BY owner", (spider,)
            ).fetchall()
    except sqlite3.OperationalError:  # the first process is still creating the tables
        return {}
    return {int(str(owner).rsplit("-", 2)[1]): int(n) for owner, n in rows}


@pytest.mark.slow
def test_kill_9_restarts_leave_one_parked_copy_per_dont_filter_request(
    mockserver: Any, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    """Five runs in a row, each killed with kill -9 while its dont_filter start requests
    wait (robots.txt 503), with durable waiting on: each run takes over the entries of
    the run before (the same requests, yielded again), so the store never holds more
    than one copy per request. A last run, the origin recovered, crawls each once."""
    host = mockserver.unique_host("restart")
    mockserver.configure(host, {"robots": {"status": 503}})
    paths = [f"/r{i}" for i in range(6)]
    urls = [mockserver.url(host, p) for p in paths]
    db = tmp_path / "store.db"
    spec = f"sqlite:{db}"
    cluster_file = Path(f"{db}.cluster")
    (tmp_path / "go").write_text("go")
    durable = (
        "-s", "REP_DURABLE_WAITING=True",
        "-s", "REP_CLUSTER_HEARTBEAT=1",
        "-s", "REP_RETRY_BACKOFF=0.5",
        "-s", "REP_MAX_RETRY_BACKOFF=1",
        "-s", "LOG_LEVEL=INFO",
        "-s", "LOGSTATS_INTERVAL=10",
    )  # fmt: skip
    for _ in range(5):
        # (one tag for every run: the same start requests, as a restarted spider yields)
        proc, _, log = start_process(tmp_path, subprocess_env, spec, "same", urls, durable)
        try:
            deadline = time.monotonic() + 90
            while True:
                per_pid = parked_per_owner_pid(cluster_file, NextRun.name)
                # This run parked its own, nothing of the runs before is left apart, and
                # it has been up for a LogStats interval (10 s), longer than its first
                # hand-out of adopted requests (every 5 s), so a re-parked copy would be
                # in the store by now.
                if (
                    per_pid.get(proc.pid, 0) >= len(urls)
                    and set(per_pid) == {proc.pid}
                    and log.read_text().count("[scrapy.extensions.logstats] INFO") >= 2
                ):
                    break
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, f"parked per pid: {per_pid}"
                time.sleep(0.05)
            assert per_pid == {proc.pid: len(urls)}  # one copy per request
        finally:
            proc.kill()  # SIGKILL: the store is all that is left
            proc.wait()
        assert sum(parked_per_owner_pid(cluster_file, NextRun.name).values()) == len(urls)
    assert pages_of(mockserver, host) == []

    mockserver.configure(host, {"robots": {"body": ALLOW_ALL}})
    deadline = time.monotonic() + 30
    while owners_alive(cluster_file):  # the last holder's heartbeat runs out
        assert time.monotonic() < deadline, "the killed holder still looks alive"
        time.sleep(0.05)
    proc, _, log = start_process(tmp_path, subprocess_env, spec, "same", urls, durable)
    assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]
    crawled = Counter(p.split("?")[0] for p in pages_of(mockserver, host))
    assert crawled == Counter(paths)  # each exactly once
    assert parked_per_owner_pid(cluster_file, NextRun.name) == {}


# -- a store that takes no more writes at close -------------------------------------------


def parked_rows(cluster_file: Path) -> int:
    try:
        with sqlite3.connect(cluster_file) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM parked").fetchone()[0])
    except sqlite3.OperationalError:  # not created yet
        return 0


@pytest.mark.slow
@pytest_twisted.ensureDeferred
async def test_what_is_called_kept_is_what_the_store_holds_when_writes_fail(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Path
) -> None:
    """Durable waiting; 5 requests are parked, then the store stops taking writes (a
    real SQLite lock held by another connection until the crawl has ended) and 3 more
    start waiting. At close the log and ``robotstxt/kept_in_store`` say 5, what the
    store holds, and the 3 it never took are counted as dropped, not as kept."""
    mockserver.configure(host, {"robots": {"status": 503}})
    db = tmp_path / "store.db"
    cluster_file = Path(f"{db}.cluster")
    first = [mockserver.url(host, f"/a{i}") for i in range(5)]
    second = [mockserver.url(host, f"/b{i}") for i in range(3)]

    class TwoBatches(scrapy.Spider):
        name = "two_batches"
        go_on = False

        async def start(self) -> Any:
            for url in first:
                yield scrapy.Request(url, callback=self.parse)
            while not TwoBatches.go_on:
                await asyncio.sleep(0.05)
            for url in second:
                yield scrapy.Request(url, callback=self.parse)

        def parse(self, response: Any) -> None:
            pass

    settings = {
        **REP,
        "REP_STORAGE": f"sqlite:{db}",
        "REP_DURABLE_WAITING": True,
        "REP_IDLE_WAIT": 0,
        "REP_RETRY_BACKOFF": 0.5,
        "REP_MAX_RETRY_BACKOFF": 1,
    }
    crawl = defer.ensureDeferred(run_crawl([], settings=settings, spider_cls=TwoBatches))
    lock = None
    try:
        await wait_until(lambda: parked_rows(cluster_file) == 5, "5 parked", timeout=60)
        lock = sqlite3.connect(cluster_file, isolation_level=None, timeout=0)
        lock.execute("BEGIN EXCLUSIVE")  # no other connection writes until ROLLBACK
        TwoBatches.go_on = True
        crawler = await crawl
    finally:
        TwoBatches.go_on = True
        if lock is not None:
            lock.execute("ROLLBACK")
            lock.close()
    assert parked_rows(cluster_file) == 5
    assert crawler.stat("robotstxt/kept_in_store") == 5
    assert crawler.logged("5 request(s) waiting on robots.txt kept in the shared store")
    assert crawler.stat("robotstxt/dropped_at_close") == 3
    assert pages_of(mockserver, host) == []
