"""Two real crawl processes on one SQLite store, a thousand origins: every origin is
decided in both, nothing is logged as an error, and both stop promptly at SIGINT.

Crawl A starts with origins whose robots.txt takes 10 s: they fill its fetch slots
(CONCURRENT_REQUESTS = 8), so its thousand fast origins queue behind them. Crawl B
starts 2 s later on the same fast origins and fetches many of them first. When A's
slow fetches end, A's queue drains through origins B has already stored (or holds the
lease of): each such fetch ends at once, inside the call that started it. A queue
that started the next fetch from there recursed once per origin (RecursionError,
origins left pending, and a stop that hung on the store's worker thread).

Two origins in each crawl never answer (robots.txt hangs past DOWNLOAD_TIMEOUT, so
they stay unreachable and their requests wait): both processes are still running
when the test sends SIGINT, with robots.txt fetches, lease polls and store calls in
flight. Every wait is bounded; a process that does not exit is killed (-9) and the
test fails.
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

from tests.cluster_helpers import wait_for
from tests.conftest import RESOLVER_SETTING, TESTS_DIR
from tests.scrapy_compat import RESOLVER_SETTING_NAME

SPIDER_FILE = TESTS_DIR / "spiders_for_subprocess.py"
FAST = 1000
SLOW = 6
HANGING = 2
ALLOW_ALL = "User-agent: *\nDisallow: /private\n"
#: Generous: a loaded CI machine, two crawls of a thousand origins each.
CRAWL_BOUND = 300.0
#: How long a process may take to exit after SIGINT: the store's stop is bounded
#: (a few seconds); a deadlock never ends.
EXIT_BOUND = 60.0
ERROR_LINE = re.compile(r"\] (ERROR|CRITICAL):")


class CrawlProcess:
    def __init__(
        self, tmp_path: Path, env: dict[str, str], tag: str, store: str, urls: list[str]
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
            "-s", "CONCURRENT_REQUESTS=8",
            "-s", "DOWNLOAD_TIMEOUT=20",
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
    hanging = [mockserver.unique_host("two-hang") for _ in range(HANGING)]
    specs: dict[str, dict[str, Any]] = {h: {"robots": {"body": ALLOW_ALL}} for h in fast}
    specs.update({h: {"robots": {"body": ALLOW_ALL, "delay": 10}} for h in slow})
    specs.update({h: {"robots": {"body": ALLOW_ALL, "delay": 40}} for h in hanging})
    mockserver.configure_many(specs)
    store = f"sqlite:{tmp_path / 'shared.sqlite3'}"

    def urls(hosts: list[str]) -> list[str]:
        return [mockserver.url(h, "/a") for h in hosts]

    # A: the hanging and slow origins first (they take every fetch slot), then the rest.
    a_urls = urls(hanging) + urls(slow) + urls(fast)
    b_urls = urls(hanging) + urls(fast)
    crawls: list[CrawlProcess] = []
    try:
        a = CrawlProcess(tmp_path, subprocess_env, "a", store, a_urls)
        crawls.append(a)
        b = CrawlProcess(tmp_path, subprocess_env, "b", store, b_urls)
        crawls.append(b)
        wait_for(lambda: a.ready() and b.ready(), "both crawls to start", timeout=120)
        a.go()
        wait_for(
            lambda: sum(e["path"] == "/robots.txt" for e in _log(mockserver, slow)) == SLOW,
            "A's slow robots.txt requests",
            timeout=60,
        )
        time.sleep(2)  # B starts a little later (a start offset, not a wait for a result)
        b.go()

        expected = {(h, "/a?p=a") for h in slow + fast} | {(h, "/a?p=b") for h in fast}

        def all_received() -> bool:
            for crawl in crawls:
                if crawl.proc.poll() is not None:
                    raise AssertionError(f"crawl {crawl.tag} exited early:\n{crawl.log()[-3000:]}")
            received = {(e["host"], e["path"]) for e in mockserver.log() if "?p=" in e["path"]}
            return expected <= received

        wait_for(all_received, "every page of both crawls", timeout=CRAWL_BOUND)
        codes = {crawl.tag: crawl.interrupt_and_wait() for crawl in crawls}
    finally:
        for crawl in crawls:
            crawl.kill()
    assert codes == {"a": 0, "b": 0}, codes
    for crawl in crawls:
        log = crawl.log()
        assert "RecursionError" not in log, crawl.tag
        errors = [line for line in log.splitlines() if ERROR_LINE.search(line)]
        assert errors == [], (crawl.tag, errors[:10])
        assert "Received SIGINT" in log, crawl.tag  # stopped by the signal, not on its own
    received = [e for e in mockserver.log() if "?p=" in e["path"] and e["host"] in set(fast)]
    # each page once per crawl: nothing crawled twice, nothing lost
    assert len(received) == 2 * FAST
    # One fetch serves both crawls for most origins (the rest: fetched by each, when a
    # process decided before the other's record was stored).
    robots = [e for e in mockserver.log() if e["path"] == "/robots.txt" and e["host"] in set(fast)]
    assert FAST <= len(robots) <= 2 * FAST


def _log(mockserver: Any, hosts: list[str]) -> list[dict[str, Any]]:
    wanted = set(hosts)
    return [e for e in mockserver.log() if e["host"] in wanted]
