"""``scrapy robots`` tells what a crawl with the store would do now; ``--refresh`` and
``--forget`` change the store on purpose; the help reads well at 80 columns.

Real subprocesses against the mock server and a real SQLite store.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from scrapy_rep.policy.records import RULES, OriginRecord
from scrapy_rep.storage.sqlite_store import SqliteStorage
from tests.support import redis_server as redis_helper
from tests.support.commands import as_json, robots, workdir
from tests.support.mockserver import MockServer
from tests.support.redis_server import RedisServer

redis_server = redis_helper.redis_server
__all__ = ["redis_server", "workdir"]  # fixtures used below


def _store(db: Path, origin: str, record: OriginRecord) -> None:
    store = SqliteStorage(db)
    store.put(origin, record)
    store.close()


def _stored(db: Path, origin: str) -> OriginRecord | None:
    store = SqliteStorage(db)
    try:
        return store.get(origin)
    finally:
        store.close()


@pytest.mark.slow
def test_refresh_then_forget(
    mockserver: MockServer, host: str, subprocess_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    mockserver.configure(host, {"robots": {"body": "User-agent: *\nAllow: /\n"}})
    origin, url = mockserver.origin(host), mockserver.url(host, "/page")
    db = tmp_path / "rep.sqlite3"
    now = time.time()
    old = b"User-agent: *\nDisallow: /\n"
    _store(db, origin, OriginRecord(RULES, old, now - 60, now + 3_600, last_outcome="200"))
    store_option = ["-s", f"REP_STORAGE={db}"]  # a bare path: the SQLite file

    # The crawl's verdict (stored copy, still fresh) first, the fetched one beside it.
    result = robots([url, *store_option], subprocess_env, workdir)
    assert result.returncode == 1, result.stderr
    assert "fresh copy: ALLOWED (line 2: Allow: /)" in result.stdout
    assert _stored(db, origin) == OriginRecord(
        RULES, old, now - 60, now + 3_600, last_outcome="200"
    )

    result = robots([url, "--refresh", "--json", *store_option], subprocess_env, workdir)
    assert result.returncode == 0, result.stderr
    doc = as_json(result)
    assert doc["origins"][0]["refreshed"] is True
    assert doc["origins"][0]["crawl"]["copy"] == "fetched"
    assert doc["urls"][0]["verdict"] == "allowed" and doc["urls"][0]["fresh"] is None
    record = _stored(db, origin)
    assert record is not None and record.body == b"User-agent: *\nAllow: /\n"

    # Stored and fetched now agree: the crawl's verdict stands alone.
    result = robots([url, *store_option], subprocess_env, workdir)
    assert result.returncode == 0, result.stderr
    assert "fresh copy" not in result.stdout
    assert "a crawl with this store applies the stored copy" in result.stdout
    fetches = mockserver.count(host, "/robots.txt")

    result = robots([origin, "--forget", *store_option], subprocess_env, workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{origin}: removed its fresh state (sqlite {db})"
    assert mockserver.count(host, "/robots.txt") == fetches  # --forget fetches nothing
    record = _stored(db, origin)
    assert record is None or (record.kind is None and not record.unreachable)

    result = robots([url, "--json", *store_option], subprocess_env, workdir)
    doc = as_json(result)
    assert doc["origins"][0]["stored"]["state"] == "none"
    assert doc["origins"][0]["crawl"]["uses_stored"] is False

    result = robots([origin, "--forget", "--json", *store_option], subprocess_env, workdir)
    assert as_json(result)["forgotten"] == [{"origin": origin, "had": "none"}]


def test_unreachable_spell_not_due_holds_despite_a_good_fetch(
    mockserver: MockServer, host: str, subprocess_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    mockserver.configure(host, {"robots": {"body": "User-agent: *\nDisallow: /x\n"}})
    origin, url = mockserver.origin(host), mockserver.url(host, "/x")
    db = tmp_path / "rep.sqlite3"
    now = time.time()
    spell = OriginRecord(
        unreachable_since=now - 60, next_retry_at=now + 600, failures=3, last_outcome="503"
    )
    _store(db, origin, spell)
    result = robots([url, "--json", "-s", f"REP_STORAGE=sqlite:{db}"], subprocess_env, workdir)
    assert result.returncode == 3, result.stderr  # a crawl would hold it: next try in 10 min
    doc = as_json(result)
    assert doc["origins"][0]["crawl"]["action"] == "wait"
    assert doc["origins"][0]["crawl"]["uses_stored"] is True
    # Counted from the stored next_retry_at: whatever the command took is already gone.
    elapsed = time.time() - now
    assert 600 - elapsed - 1 <= doc["origins"][0]["fetch"]["retry_in"] <= 600
    [entry] = doc["urls"]
    assert (entry["verdict"], entry["reason"], entry["source"]) == (
        "wait",
        "unreachable",
        "unreachable",
    )
    assert (entry["fresh"]["verdict"], entry["fresh"]["rule"]) == ("disallowed", "Disallow: /x")


@pytest_twisted.ensureDeferred
async def test_the_verdict_is_what_a_crawl_with_the_store_does(
    mockserver: MockServer,
    run_crawl: Any,
    host: str,
    subprocess_env: dict[str, str],
    workdir: Path,
    tmp_path: Path,
) -> None:
    """A real crawl on the same store does what the command said, before and after
    --forget."""
    mockserver.configure(host, {"robots": {"body": "User-agent: *\nAllow: /\n"}})
    origin, url = mockserver.origin(host), mockserver.url(host, "/page")
    db = tmp_path / "rep.sqlite3"
    now = time.time()
    stale_rules = b"User-agent: *\nDisallow: /page\n"
    _store(db, origin, OriginRecord(RULES, stale_rules, now - 60, now + 3_600, last_outcome="200"))
    settings = {"ADDONS": {"scrapy_rep.Addon": 0}, "REP_STORAGE": str(db)}

    said = as_json(robots([url, "--json", "-s", f"REP_STORAGE={db}"], subprocess_env, workdir))
    assert said["urls"][0]["verdict"] == "disallowed"
    assert said["urls"][0]["fresh"]["verdict"] == "allowed"
    fetched_by_command = mockserver.count(host, "/robots.txt")

    crawler = await run_crawl([url], settings=settings)
    assert crawler.stat("robotstxt/forbidden") == 1
    assert "/page" not in mockserver.paths(host)
    assert mockserver.count(host, "/robots.txt") == fetched_by_command  # the stored copy

    forgot = robots([origin, "--forget", "-s", f"REP_STORAGE={db}"], subprocess_env, workdir)
    assert forgot.returncode == 0, forgot.stderr
    crawler = await run_crawl([url], settings=settings)
    assert crawler.stat("robotstxt/forbidden") is None
    assert mockserver.count(host, "/robots.txt") == fetched_by_command + 1
    assert "/page" in mockserver.paths(host)


@pytest.mark.parametrize("columns", [60, 80, 100])
def test_help_reads_well(subprocess_env: dict[str, str], workdir: Path, columns: int) -> None:
    env = {**subprocess_env, "COLUMNS": str(columns)}
    result = robots(["-h"], env, workdir, online=False)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= max(columns, 80)
    # Scrapy underlines a heading; only the real sections may have one.
    headings = [
        lines[n - 1]
        for n, line in enumerate(lines)
        if n and line and set(line) <= {"=", "-"} and len(line) == len(lines[n - 1])
    ]
    assert headings == ["Usage", "Options", "Global Options"], headings
    assert "  3  some robots.txt is unreachable: a crawl would hold those URLs" in lines
    assert os.linesep.join(lines).count("--refresh") == 1


@pytest.mark.slow
def test_refresh_and_forget_on_redis(
    mockserver: MockServer,
    host: str,
    subprocess_env: dict[str, str],
    workdir: Path,
    redis_server: RedisServer,
) -> None:
    """The same options on a real redis-server, the cluster's store."""
    from scrapy_rep.policy.config import Config
    from scrapy_rep.storage.redis_store import RedisStorage

    mockserver.configure(host, {"robots": {"body": "User-agent: *\nDisallow: /x\n"}})
    origin, url = mockserver.origin(host), mockserver.url(host, "/x")
    store_option = ["-s", f"REP_STORAGE={redis_server.url}"]
    config = Config(storage=redis_server.url)

    result = robots([url, "--refresh", *store_option], subprocess_env, workdir)
    assert result.returncode == 1, result.stderr
    assert "refreshed: the fetched copy is now in the store" in result.stdout
    store = RedisStorage.from_url(redis_server.url, config)
    record = store.get(origin)
    store.close()
    assert record is not None and record.body == b"User-agent: *\nDisallow: /x\n"

    result = robots([origin, "--forget", "--json", *store_option], subprocess_env, workdir)
    assert result.returncode == 0, result.stderr
    assert as_json(result)["forgotten"] == [{"origin": origin, "had": "fresh"}]
    store = RedisStorage.from_url(redis_server.url, config)
    record = store.get(origin)
    store.close()
    assert record is None or (record.kind is None and not record.unreachable)
