"""A bad setting at crawl start: one ERROR line naming it, first; storage places.

``REP_STORAGE`` may be a bare file path (a SQLite file). A place where the store cannot
live (a missing directory, a file in the way, ``/proc``) stops the crawl before any
request, with a message that names the setting and the problem.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from scrapy_rep.policy.config import SettingError
from scrapy_rep.storage.sqlite_store import SqliteStorage

REP = {"ADDONS": {"scrapy_rep.Addon": 0}}

SPIDER = """
import scrapy

class OneSpider(scrapy.Spider):
    name = "one"
    start_urls = ["http://127.0.0.1:9/never"]
    custom_settings = {"ADDONS": {"scrapy_rep.Addon": 0}, "ROBOTSTXT_OBEY": True,
                       "TELNETCONSOLE_ENABLED": False}
"""


@pytest.mark.slow
def test_bad_setting_logs_one_error_line_before_the_traceback(
    subprocess_env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "one.py").write_text(SPIDER)
    result = subprocess.run(
        [sys.executable, "-m", "scrapy", "runspider", "one.py", "-s", "REP_MAX_SIZE=big"],
        cwd=tmp_path,
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = result.stderr.splitlines()
    errors = [n for n, line in enumerate(lines) if " ERROR: " in line]
    assert errors, result.stderr
    first = lines[errors[0]]
    assert "[scrapy_rep.middleware] ERROR: the crawl cannot start: REP_MAX_SIZE" in first
    assert "'big'" in first
    tracebacks = [n for n, line in enumerate(lines) if line.startswith("Traceback")]
    assert all(n > errors[0] for n in tracebacks)
    assert sum("the crawl cannot start" in line for line in lines) == 1


@pytest.mark.parametrize(
    ("name", "value"), [("REP_CLOCK", "no_such_module_x.now"), ("REP_STORAGE", "mem")]
)
@pytest_twisted.ensureDeferred
async def test_bad_setting_is_one_error_line_in_a_crawl(
    mockserver: Any, run_crawl: Any, host: str, name: str, value: str
) -> None:
    with pytest.raises(SettingError, match=name):
        await run_crawl([mockserver.url(host, "/a")], settings={**REP, name: value})
    assert mockserver.paths(host) == []


@pytest_twisted.ensureDeferred
async def test_bare_path_is_a_sqlite_store(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Path
) -> None:
    mockserver.configure(host, {"robots": {"body": "User-agent: *\nDisallow: /no\n"}})
    db = tmp_path / "cache.sqlite"
    urls = [mockserver.url(host, "/yes"), mockserver.url(host, "/no")]
    crawler = await run_crawl(urls, settings={**REP, "REP_STORAGE": str(db)})
    assert crawler.logged(f"store: sqlite {db}")
    assert crawler.stat("robotstxt/forbidden") == 1
    store = SqliteStorage(db)
    record = store.get(mockserver.origin(host))
    store.close()
    assert record is not None and record.kind == "rules"


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda tmp: tmp / "missing" / "dir" / "x.sqlite", "does not exist; create it first"),
        (lambda tmp: tmp / "a-file" / "x.sqlite", "is a file, not a directory"),
        (lambda tmp: tmp, "is a directory; name a file inside it"),
        (lambda tmp: Path("/proc/scrapy-rep-test.sqlite"), "cannot create a file in /proc"),
    ],
    ids=["missing-directory", "file-in-the-way", "a-directory", "proc"],
)
@pytest_twisted.ensureDeferred
async def test_storage_place_problems_stop_the_start(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Path, make: Any, problem: str
) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    place = make(tmp_path)
    with pytest.raises(SettingError, match="REP_STORAGE") as caught:
        await run_crawl([mockserver.url(host, "/a")], settings={**REP, "REP_STORAGE": str(place)})
    assert problem in str(caught.value)
    assert mockserver.paths(host) == []
    assert not (tmp_path / "missing").exists()  # nothing was created on the way
