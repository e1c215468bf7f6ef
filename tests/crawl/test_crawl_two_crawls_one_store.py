"""Two real crawl processes on one SQLite store, a thousand origins: every origin is
decided in both, nothing is logged as an error, and both stop promptly at SIGINT.

Crawl B starts first and takes the fetch lease of a thousand origins (their robots.txt
answers only when the test says so). Crawl A then meets the same origins: another
process holds each lease, so A polls the store for each. A's own 8 slow origins then
take every fetch slot of A (CONCURRENT_REQUESTS = 8), and each poll that finds the
origin still undecided queues a fetch behind them. B's robots.txt files answer and
B stores every origin; then A's slow ones answer, and A's queue drains through a
thousand origins B has stored: each fetch ends at once, inside the call that started
it (the store answers without waiting). A queue that started the next fetch from
there recursed once per origin (RecursionError, origins left pending, and a stop that
hung on the store's worker thread).

An origin whose robots.txt answers 503 keeps both processes running (its request waits
for it to recover) until the test sends SIGINT, with lease polls, retries and store
calls in flight. Every wait is bounded; a process that does not exit is killed (-9)
and the test fails.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.resolver import RESOLVER_SETTING
from tests.support.scrapy_compat import RESOLVER_SETTING_NAME
from tests.support.subprocess_spider import SPIDER_FILE
from tests.support.waits import wait_for

FAST = 1000
SLOW = 8  # = CONCURRENT_REQUESTS: every fetch slot of A
ALLOW_ALL = "User-agent: *\nDisallow: /private\n"
#: Generous: a loaded CI machine, two crawls of a thousand origins each.
CRAWL_BOUND = 400
#: How long a process may take to exit after SIGINT: the store's stop is bounded
#: (a few seconds); a deadlock never ends.
EXIT_BOUND = 60.0
ERROR_LINE = re.compile(r"\] (ERROR|CRITICAL):")


class CrawlProcess:
    def __init__(
        self,
        tmp_path: Path,
        env: dict[str, str],
        tag: str,
        store: str,
        urls: list[str],
        concurrency: int,
    ) -> None:
        gate = tmp_path / f"gate-{tag}"
        gate.mkdir()
        self.gate = gate
        self.log_path = tmp_path / f"log-{tag}.txt"
        self.result = tmp_path / f"result-{tag}.json"
        config = {"urls": urls, "tag": tag, "gate_dir": str(gate), "result": str(self.result)}
        command = [
            sys.executable, "-m", "scrapy", "runspider", str(SPIDER_FILE),
            "-s", f"{RESOLVER_SETTING_NAME}={RESOLVER_SETTING}",
            "-s", f"REP_STORAGE={store}",
            "-s", f"CONCURRENT_REQUESTS={concurrency}",
            "-s", "DOWNLOAD_TIMEOUT=600",
            "-s", "LOG_LEVEL=INFO",
        ]  # fmt: skip
        with self.log_path.open("wb") as log_file:
            self.proc = subprocess.Popen(
                command,
                env={**env, "REP_TEST_CONFIG": json.dumps(config)},
                cwd=tmp_path,
                stdout=subprocess.DEVNULL,
                stderr=log_file,
            )

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"exited before it was ready:\n{self.log()[-3000:]}")
        return (self.gate / f"ready-{self.tag}").exists()

    @property
    def tag(self) -> str:
        return self.log_path.stem.removeprefix("log-")

    def go(self) -> None:
        (self.gate / "go").write_text("go")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def interrupt_and_wait(self) -> int:
        """SIGINT (Scrapy's graceful stop), then wait at most EXIT_BOUND."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=EXIT_BOUND)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"crawl {self.tag} still running {EXIT_BOUND} s after SIGINT; log tail:\n"
                f"{self.log()[-3000:]}"
            ) from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


@pytest.mark.slow
def test_two_crawls_on_one_sqlite_store_decide_every_origin_and_stop_at_sigint(
    mockserver: Any, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    fast = [mockserver.unique_host("two-fast") for _ in range(FAST)]
    slow = [mockserver.unique_host("two-slow") for _ in range(SLOW)]
    unreachable = mockserver.unique_host("two-unreachable")
    fast_gate, slow_gate = f"{unreachable}-fast", f"{unreachable}-slow"

    def held(gate: str) -> dict[str, Any]:
        return {"robots": {"body": ALLOW_ALL, "hold": gate, "hold_max": CRAWL_BOUND}}

    specs = {h: held(fast_gate) for h in fast}
    specs.update({h: held(slow_gate) for h in slow})
    # 503: unreachable, its request waits (REP_UNREACHABLE_WAIT) and the crawl stays up
    specs[unreachable] = {"robots": {"status": 503}}
    mockserver.configure_many(specs)
    store = f"sqlite:{tmp_path / 'shared.sqlite3'}"

    def urls(hosts: list[str]) -> list[str]:
        return [mockserver.url(h, "/a") for h in hosts]

    def check_running() -> None:
        for crawl in crawls:
            if crawl.proc.poll() is not None:
                raise AssertionError(f"crawl {crawl.tag} exited early:\n{crawl.log()[-3000:]}")

    def robots_requests(hosts: list[str]) -> int:
        check_running()
        return sum(e["path"] == "/robots.txt" for e in _log(mockserver, hosts))

    def received(tag: str, hosts: list[str]) -> bool:
        check_running()
        got = {e["host"] for e in mockserver.log() if e["path"] == f"/a?p={tag}"}
        return set(hosts) <= got

    crawls: list[CrawlProcess] = []
    try:
        b = CrawlProcess(tmp_path, subprocess_env, "b", store, urls([unreachable, *fast]), FAST + 8)
        crawls.append(b)
        a = CrawlProcess(tmp_path, subprocess_env, "a", store, urls([*fast, *slow, unreachable]), 8)
        crawls.append(a)
        wait_for(lambda: a.ready() and b.ready(), "both crawls to start", timeout=120)
        b.go()
        wait_for(lambda: robots_requests(fast) == FAST, "B's leases", timeout=CRAWL_BOUND)
        a.go()
        wait_for(lambda: robots_requests(slow) == SLOW, "A's slow fetches", timeout=CRAWL_BOUND)
        # A's polls of B's leases queue fetches behind the slow ones meanwhile (a
        # scenario's pace, not a wait for a result)
        time.sleep(3)
        mockserver.open_gate(fast_gate)
        wait_for(lambda: received("b", fast), "B's pages", timeout=CRAWL_BOUND)
        mockserver.open_gate(slow_gate)  # A's queue drains through B's stored origins
        wait_for(lambda: received("a", slow + fast), "A's pages", timeout=CRAWL_BOUND)
        codes = {crawl.tag: crawl.interrupt_and_wait() for crawl in crawls}
    finally:
        for crawl in crawls:
            crawl.kill()
        for gate in (fast_gate, slow_gate):
            mockserver.open_gate(gate)
    assert codes == {"a": 0, "b": 0}, codes
    for crawl in crawls:
        log = crawl.log()
        assert "RecursionError" not in log, crawl.tag
        errors = [line for line in log.splitlines() if ERROR_LINE.search(line)]
        assert errors == [], (crawl.tag, errors[:10])
        assert "Received SIGINT" in log, crawl.tag  # stopped by the signal, not on its own
    pages = [e for e in mockserver.log() if "?p=" in e["path"] and e["host"] in set(fast)]
    assert len(pages) == 2 * FAST  # each page once per crawl: nothing twice, nothing lost
    # B fetched and stored every fast origin; A waited on B's leases: one fetch each.
    robots = [e for e in mockserver.log() if e["path"] == "/robots.txt" and e["host"] in set(fast)]
    assert len(robots) == FAST


def _log(mockserver: Any, hosts: list[str]) -> list[dict[str, Any]]:
    wanted = set(hosts)
    return [e for e in mockserver.log() if e["host"] in wanted]
