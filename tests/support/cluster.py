"""A real scrapy-redis cluster for tests: N ``scrapy runspider`` worker subprocesses on a
redis-server of the test's own, crawling the suite's mock server.

    with Cluster(tmp_path, redis, subprocess_env) as cluster:
        cluster.start("w1", urls=[...], settings={...})
        ...
        cluster.kill("w1")          # kill -9
        cluster.terminate("w2")     # SIGTERM: a graceful stop
        cluster.wait_all()          # every worker has exited (bounded)

Each worker runs ``tests/support/cluster_spider.py`` (scrapy-redis scheduler, dupefilter and
idle close, ``SCHEDULER_PERSIST = True``, ``REP_STORAGE`` = the same Redis). Its log is
``<tmp>/log-<tag>.txt``; ``closed()`` writes ``<tmp>/result-<tag>.json``. Every wait is
bounded, and leaving the ``with`` block kills whatever still runs.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.support.redis_server import RedisServer
from tests.support.resolver import RESOLVER_SETTING
from tests.support.scrapy_compat import RESOLVER_SETTING_NAME

CLUSTER_SPIDER_FILE = Path(__file__).resolve().parent / "cluster_spider.py"


@dataclass
class Worker:
    tag: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    result_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def result(self) -> dict[str, Any] | None:
        if not self.result_path.exists():
            return None
        loaded: dict[str, Any] = json.loads(self.result_path.read_text())
        return loaded


class Cluster:
    def __init__(self, tmp_path: Path, redis: RedisServer, env: dict[str, str]) -> None:
        self.tmp_path = tmp_path
        self.redis = redis
        self.env = env
        self.workers: dict[str, Worker] = {}

    def __enter__(self) -> Cluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.kill_all()

    def start(
        self,
        tag: str,
        urls: list[str],
        settings: dict[str, Any] | None = None,
        **config: Any,
    ) -> Worker:
        result = self.tmp_path / f"result-{tag}.json"
        log = self.tmp_path / f"log-{tag}.txt"
        options = {
            RESOLVER_SETTING_NAME: RESOLVER_SETTING,
            "REDIS_URL": self.redis.url,
            "REP_STORAGE": self.redis.url,
            **(settings or {}),
        }
        command = [sys.executable, "-m", "scrapy", "runspider", str(CLUSTER_SPIDER_FILE)]
        for name, value in options.items():
            command += ["-s", f"{name}={value}"]
        spider_config = {"urls": urls, "result": str(result), **config}
        with log.open("wb") as log_file:
            proc = subprocess.Popen(
                command,
                env={**self.env, "REP_CLUSTER_CONFIG": json.dumps(spider_config)},
                cwd=self.tmp_path,
                stdout=subprocess.DEVNULL,
                stderr=log_file,
            )
        worker = self.workers[tag] = Worker(tag, proc, log, result)
        return worker

    def by_pid(self, pid: int) -> Worker:
        return next(w for w in self.workers.values() if w.pid == pid)

    def terminate(self, tag: str) -> None:
        """SIGTERM: Scrapy's graceful stop (the first signal)."""
        self.workers[tag].proc.send_signal(signal.SIGTERM)

    def kill(self, tag: str) -> None:
        """kill -9: no cleanup of any kind runs in the worker."""
        proc = self.workers[tag].proc
        proc.kill()
        proc.wait(timeout=10)

    def wait(self, tag: str, timeout: float = 90.0) -> int:
        worker = self.workers[tag]
        try:
            return worker.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"worker {tag} still running after {timeout} s; log tail:\n{worker.log()[-3000:]}"
            ) from None

    def wait_all(self, timeout: float = 90.0) -> dict[str, int]:
        deadline = time.monotonic() + timeout
        return {tag: self.wait(tag, max(deadline - time.monotonic(), 0.1)) for tag in self.workers}

    def running(self) -> list[str]:
        return [tag for tag, w in self.workers.items() if w.proc.poll() is None]

    def kill_all(self) -> None:
        for worker in self.workers.values():
            if worker.proc.poll() is None:
                worker.proc.kill()
                worker.proc.wait(timeout=10)


def parked_by_pid(redis_url: str, spider: str = "cluster") -> dict[int, int]:
    """pid of the owning worker -> how many requests it has parked in the store (owner
    ids are ``<host>-<pid>-<random>``), live owners only."""
    from scrapy_rep.policy.config import Config
    from scrapy_rep.storage.redis_store import RedisStorage

    store = RedisStorage.from_url(redis_url, Config())
    try:
        counts: dict[int, int] = {}
        for owner, alive in store.owners(spider).items():
            if alive:
                pid = int(owner.rsplit("-", 2)[1])
                counts[pid] = counts.get(pid, 0) + len(store.parked(spider, owner))
        return {pid: n for pid, n in counts.items() if n}
    finally:
        store.close()
