"""Start and stop a throw-away ``redis-server`` for the storage tests.

``redis-server --port 0`` does not pick a free port (it disables TCP), so a port is
chosen here: a random free one *below* the kernel's ephemeral range, which ``bind(0)``
and outgoing connections never take, so a server stopped to simulate an outage gets its
port back even while other tests (pytest-xdist workers) open connections meanwhile; a
port another worker's server took first is retried with another. The server runs
without persistence in a temporary directory. ``stop()`` and ``start()`` can be called
again to simulate an outage: the server comes back on the same port.

Locally a missing ``redis-server`` skips the Redis tests; in CI (``CI=true``) it fails
them, because CI installs it and a silent skip would hide a broken job.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REDIS_SERVER = "redis-server"


def require_redis_server() -> str:
    """The ``redis-server`` path, or skip (locally) / fail (CI) the calling test."""
    found = shutil.which(REDIS_SERVER)
    if found is not None:
        return found
    message = f"{REDIS_SERVER} is not on PATH; install Redis to run the Redis storage tests"
    if os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}:
        pytest.fail(f"{message} (CI=true: Redis is required in CI)")
    pytest.skip(message)


#: Where servers' ports are drawn from: below Linux's default ephemeral range
#: (32768-60999, ``net.ipv4.ip_local_port_range``).
PORT_RANGE = (20_000, 32_000)


def free_port() -> int:
    """A random port in ``PORT_RANGE`` that nothing listens on right now."""
    for _ in range(100):
        port = random.randint(*PORT_RANGE)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port in {PORT_RANGE}")


class PortTaken(RuntimeError):
    """redis-server exited while starting; most likely its port was taken meanwhile."""


class RedisServer:
    """One ``redis-server`` process on 127.0.0.1, optionally with ``requirepass``."""

    def __init__(self, executable: str, *, password: str | None = None) -> None:
        self.executable = executable
        self.password = password
        self.port = free_port()
        self._dir = Path(tempfile.mkdtemp(prefix="scrapy-rep-redis-"))
        self._proc: subprocess.Popen[bytes] | None = None
        self._started = False  # once up, a restart keeps the port (the URL tests hold)

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> None:
        for attempt in range(5):
            try:
                self._start_once(timeout)
            except PortTaken:
                if self._started or attempt == 4:
                    raise
                self.port = free_port()
            else:
                self._started = True
                return

    def _start_once(self, timeout: float) -> None:
        args = [
            self.executable,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self._dir),
        ]  # fmt: skip
        if self.password:
            args += ["--requirepass", self.password]
        self._proc = subprocess.Popen(
            args, cwd=self._dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + timeout
        while not self._answers_as_ours():
            if self._proc.poll() is not None:
                # Between free_port() and this start another process (another xdist
                # worker's server) may have bound the port: redis-server exits at once.
                raise PortTaken(f"redis-server exited with {self._proc.returncode}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not answer on port {self.port}")
            time.sleep(0.02)

    def _answers_as_ours(self) -> bool:
        """Whether the server on the port is up and is the process started here: another
        worker's server on the same port must not pass for this one."""
        import redis

        client = redis.Redis(
            host="127.0.0.1",
            port=self.port,
            password=self.password,
            socket_timeout=0.5,
            socket_connect_timeout=0.5,
        )
        try:
            pid = client.info("server")["process_id"]
        except (redis.RedisError, OSError):
            return False
        finally:
            client.close()
        if self._proc is not None and pid != self._proc.pid:
            self.stop()
            raise PortTaken(f"port {self.port} answers as redis-server pid {pid}, not ours")
        return True

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)


def run_redis_server(password: str | None = None) -> Iterator[RedisServer]:
    """Generator body for fixtures: a started server, stopped and removed afterwards."""
    server = RedisServer(require_redis_server(), password=password)
    try:
        server.start()
        yield server
    finally:
        server.cleanup()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One server for the whole session; tests flush their keys through the store."""
    yield from run_redis_server()


@pytest.fixture
def private_redis_server() -> Iterator[RedisServer]:
    """A server of the test's own, with a password, that the test may stop and restart."""
    yield from run_redis_server(password="s3cret-pw")
