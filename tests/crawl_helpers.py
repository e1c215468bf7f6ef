"""What the real-crawl test modules share: scrapy-rep settings and server-log helpers."""

from __future__ import annotations

from typing import Any

#: scrapy-rep enabled, a process-local store, and budgets small enough for fast tests.
REP: dict[str, Any] = {
    "ADDONS": {"scrapy_rep.Addon": 0},
    "REP_STORAGE": "memory",
    "RETRY_ENABLED": False,
    "REP_RETRY_BACKOFF": 0.2,
    "REP_FETCH_TIMEOUT": 1,
}
DISALLOW_PRIVATE = "User-agent: *\nDisallow: /private\n"


def pages_of(mockserver: Any, host: str) -> list[str]:
    """Paths the server received for ``host``, robots.txt fetches left out."""
    return [p for p in mockserver.paths(host) if p != "/robots.txt"]


def times_of(mockserver: Any, host: str, path: str) -> list[float]:
    """Server-side arrival times of ``path`` on ``host``."""
    return [e["t"] for e in mockserver.log(host) if e["path"] == path]
