"""Real crawls for "waiting visibly" (docs/waiting.md): the INFO line when an origin
starts waiting, the periodic line while waiting is all that keeps the spider open,
REP_IDLE_WAIT, and one-shot commands that give up at once."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from tests.support.crawl import DISALLOW_PRIVATE, REP, pages_of
from tests.support.resolver import RESOLVER_SETTING
from tests.support.scrapy_compat import RESOLVER_SETTING_NAME


@pytest_twisted.ensureDeferred
async def test_waiting_is_visible_and_bounded_by_idle_wait(
    mockserver: Any, run_crawl: Any, host: str
) -> None:
    """An origin answers 503 for ever: INFO says so once with the count, the next try,
    the end of the wait and the settings; then, while nothing else is left, one line per
    LOGSTATS_INTERVAL lists it; after REP_IDLE_WAIT the spider closes and the waiting
    requests are dropped with ONE line and a stats key."""
    healthy = mockserver.unique_host("healthy")
    mockserver.configure(host, {"robots": {"status": 503}})
    mockserver.configure(healthy, {"robots": {"body": DISALLOW_PRIVATE}})
    urls = [mockserver.url(host, f"/w{i}") for i in range(3)]
    urls += [mockserver.url(healthy, p) for p in ("/a", "/b")]
    settings = {
        **REP,
        "REP_IDLE_WAIT": 3,
        "LOGSTATS_INTERVAL": 1.0,
        "REP_MAX_RETRY_BACKOFF": 0.5,
    }
    crawler = await run_crawl(urls, settings=settings, timeout=30)
    assert sorted(pages_of(mockserver, healthy)) == ["/a", "/b"]
    assert pages_of(mockserver, host) == []
    info = crawler.messages(logging.INFO, logger="scrapy_rep")
    origin = mockserver.origin(host)
    started = [m for m in info if m.startswith(f"robots.txt of {origin} is unreachable")]
    assert len(started) == 1
    for part in ("(503)", "3 request(s) wait for it", "next try in", "REP_RETRY_BACKOFF",
                 "REP_UNREACHABLE_WAIT = 12.0 h", "REP_UNREACHABLE_FALLBACK (allow)",
                 "REP_IDLE_WAIT = 3 s"):  # fmt: skip
        assert part in started[0], (part, started[0])
    periodic = [m for m in info if "nothing to do but wait on robots.txt" in m]
    assert periodic, info
    assert f"{origin} (3: unreachable: 503)" in periodic[0]
    closing = [m for m in info if "(REP_IDLE_WAIT): the spider closes" in m]
    assert len(closing) == 1 and "they are dropped" in closing[0]
    dropped = [m for m in info if m.startswith("dropped")]
    assert len(dropped) == 1 and "dropped 3 request(s)" in dropped[0]
    assert crawler.stat("robotstxt/dropped_at_close") == 3
    assert crawler.stat("robotstxt/idle_closed") == 1
    # The summary counts what still waited at close, in words and in the longest delay.
    summary = next(m for m in info if m.startswith("scrapy-rep summary"))
    assert "forbidden: 0, delayed: 5, dropped at close: 3, handed back: 0" in summary
    assert f"{origin}: unreachable (503)" in summary and "dropped at close 3" in summary
    assert crawler.stat("robotstxt/longest_delay") >= 3  # held through REP_IDLE_WAIT
    assert crawler.stats.get_value("finish_reason") == "finished"


@pytest.mark.slow
def test_scrapy_fetch_gives_up_on_an_unreachable_robots_txt(
    mockserver: Any, host: str, subprocess_env: dict[str, str], tmp_path: Path
) -> None:
    """`scrapy fetch` of a page whose robots.txt answers 503 does not wait 12 h: it
    says why, naming ROBOTSTXT_OBEY and REP_ENFORCE, and ends."""
    mockserver.configure(host, {"robots": {"status": 503}})
    middlewares = (
        '{"scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": null, '
        '"scrapy_rep.RobotsTxtMiddleware": 100}'
    )
    command = [
        sys.executable, "-m", "scrapy", "fetch", mockserver.url(host, "/page"),
        "-s", "ROBOTSTXT_OBEY=True", "-s", f"DOWNLOADER_MIDDLEWARES={middlewares}",
        "-s", "REP_STORAGE=memory", "-s", "REP_IDLE_WAIT=3600",
        "-s", f"{RESOLVER_SETTING_NAME}={RESOLVER_SETTING}",
    ]  # fmt: skip
    result = subprocess.run(
        command, env=subprocess_env, cwd=tmp_path, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert "ROBOTSTXT_OBEY" in result.stderr and "REP_ENFORCE" in result.stderr, result.stderr
    assert "`scrapy fetch` does not wait" in result.stderr
    assert mockserver.paths(host) == ["/robots.txt"]
