"""Start and stop a throw-away ``redis-server`` for the storage tests.

``redis-server --port 0`` does not pick a free port (it disables TCP), so a free port
is found by binding a socket first. The server runs without persistence in a temporary
directory. ``stop()`` and ``start()`` can be called again to simulate an outage: the
server comes back on the same port.

Locally a missing ``redis-server`` skips the Redis tests; in CI (``CI=true``) it fails
them, because CI installs it and a silent skip would hide a broken job.
"""

from __future__ import annotations

import os
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


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RedisServer:
    """One ``redis-server`` process on 127.0.0.1, optionally with ``requirepass``."""

    def __init__(self, executable: str, *, password: str | None = None) -> None:
        self.executable = executable
        self.password = password
        self.port = free_port()
        self._dir = Path(tempfile.mkdtemp(prefix="scrapy-rep-redis-"))
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> None:
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
        while not self._answers_ping():
            if self._proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self._proc.returncode}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not answer on port {self.port}")
            time.sleep(0.02)

    def _answers_ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                reply = sock.recv(64)
        except OSError:
            return False
        # +PONG, or -NOAUTH when a password is set: either way the server is up.
        return reply.startswith((b"+PONG", b"-NOAUTH"))

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
