"""Bounded waits for a condition, on the reactor or blocking, and the reactor they use.

Each wait is a guard against a hang, never a timing assertion: its timeout is generous
for a loaded machine, and it raises ``AssertionError`` naming what did not happen.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from twisted.internet import task


def installed_reactor() -> Any:
    """The installed reactor (pytest-twisted installed it before collection)."""
    from twisted.internet import reactor

    return reactor


async def sleep(seconds: float) -> None:
    """Let the reactor run for ``seconds``."""
    await task.deferLater(installed_reactor(), seconds, lambda: None)


async def wait_until(
    predicate: Callable[[], bool], what: str, timeout: float = 20.0, poll: float = 0.05
) -> None:
    """Let the reactor run until ``predicate()`` holds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await sleep(poll)


def wait_for(
    predicate: Callable[[], bool], what: str, timeout: float = 60.0, poll: float = 0.05
) -> None:
    """Block (no reactor turns) until ``predicate()`` holds: for tests of subprocesses."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(poll)


def wait_for_files(paths: Sequence[Path], procs: Sequence[subprocess.Popen[bytes]]) -> None:
    """Block until every file of ``paths`` exists (each process's "ready" file); fails
    at once if one of ``procs`` exits first."""

    def ready() -> bool:
        if all(path.exists() for path in paths):
            return True
        if any(proc.poll() is not None for proc in procs):
            raise AssertionError("a crawler process exited before it was ready")
        return False

    wait_for(ready, "the crawler processes to start", poll=0.02)
