"""``scrapy robots`` and the persistent store: shown as stored, never created or changed.

Run as a real subprocess against the mock server, like test_command.py; also covers the
command's listing in ``scrapy -h`` and the default store inside a project.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scrapy_rep.policy.records import RULES, OriginRecord
from scrapy_rep.storage.sqlite_store import SqliteStorage
from tests.support.commands import as_json, robots, workdir
from tests.support.mockserver import MockServer

__all__ = ["workdir"]  # a fixture used below


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow
def test_stored_state_shown_and_store_untouched(
    mockserver: MockServer, subprocess_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    down = mockserver.unique_host("stored-down")
    fresh = mockserver.unique_host("stored-fresh")
    mockserver.configure_many(
        {
            down: {"robots": {"status": 503}},
            fresh: {"robots": {"body": "User-agent: *\nAllow: /\n"}},
        }
    )
    now = time.time()
    db = tmp_path / "store" / "rep.sqlite3"
    store = SqliteStorage(db)
    store.put(
        mockserver.origin(down),
        OriginRecord(
            kind=RULES,
            body=b"User-agent: *\nDisallow: /old\n",
            fetched_at=now - 2 * 86_400,
            expires_at=now - 86_400,
            unreachable_since=now - 3_600,
            next_retry_at=now - 60,
            failures=2,
            last_outcome="503",
        ),
    )
    store.put(
        mockserver.origin(fresh),
        OriginRecord(
            kind=RULES,
            body=b"User-agent: *\nDisallow: /\n",
            fetched_at=now - 60,
            expires_at=now + 3_600,
            last_outcome="200",
        ),
    )
    store.close()
    before = _digest(db)
    files_before = sorted(p.name for p in db.parent.iterdir())

    result = robots(
        [
            mockserver.url(down, "/old/page"),
            mockserver.url(fresh, "/page"),
            "-s",
            f"REP_STORAGE=sqlite:{db}",
        ],
        subprocess_env,
        workdir,
    )
    # The stored copy of `fresh` is still fresh: a crawl applies it (Disallow: /) and
    # does not fetch; the fetched copy (Allow: /) stands beside it.
    assert result.returncode == 1, result.stderr
    out = result.stdout
    assert f"stored (sqlite {db}): unreachable since" in out
    assert "2 failed fetch(es)" in out
    assert "last good copy (rules) fetched" in out
    # The third failure in a row: the backoff has doubled twice (10 s -> 40 s).
    assert "robots.txt: unreachable: 503; next try in 40 s" in out
    assert "the last good copy (stored, fetched" in out
    assert "robots.txt unreachable; after the wait: disallowed (line 2: Disallow: /old)" in out
    assert "group (last good copy): *" in out
    assert "fresh (rules); fetched" in out
    assert "; last outcome 200" in out
    assert "a crawl with this store applies the stored copy (fetched" in out
    assert (
        f"DISALLOWED  {mockserver.url(fresh, '/page')}  line 2: Disallow: /; "
        "fresh copy: ALLOWED (line 2: Allow: /)"
    ) in out
    assert "the fetched copy differs from the stored one, which a crawl applies" in out
    assert _digest(db) == before
    assert sorted(p.name for p in db.parent.iterdir()) == files_before

    result = robots(
        [mockserver.url(fresh, "/page"), "--json", "-s", f"REP_STORAGE=sqlite:{db}"],
        subprocess_env,
        workdir,
    )
    assert result.returncode == 1, result.stderr
    doc = as_json(result)
    stored = doc["origins"][0]["stored"]
    assert doc["origins"][0]["crawl"]["copy"] == "stored"
    assert doc["origins"][0]["crawl"]["uses_stored"] is True
    assert doc["origins"][0]["stored_differs"] is True
    [url] = doc["urls"]
    assert (url["verdict"], url["source"], url["rule"]) == ("disallowed", "fresh", "Disallow: /")
    assert (url["fresh"]["verdict"], url["fresh"]["rule"]) == ("allowed", "Allow: /")
    assert stored["state"] == "fresh"
    assert stored["kind"] == "rules"
    assert stored["last_outcome"] == "200"
    assert stored["store"] == f"sqlite {db}"
    assert _digest(db) == before


def test_a_503_stored_and_fetched_is_not_said_to_differ(
    mockserver: MockServer, subprocess_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    """The store holds a 503 still in its backoff (no good copy) and the origin answers
    503 again: the fetch brought no copy, so there is nothing that differs."""
    down = mockserver.unique_host("both-503")
    mockserver.configure(down, {"robots": {"status": 503}})
    now = time.time()
    db = tmp_path / "store" / "rep.sqlite3"
    store = SqliteStorage(db)
    store.put(
        mockserver.origin(down),
        OriginRecord(
            unreachable_since=now - 60,
            next_retry_at=now + 600,
            failures=1,
            last_outcome="503",
        ),
    )
    store.close()
    result = robots(
        [mockserver.url(down, "/a"), "-s", f"REP_STORAGE=sqlite:{db}"], subprocess_env, workdir
    )
    assert result.returncode == 3, result.stdout + result.stderr  # a crawl would wait
    assert f"stored (sqlite {db}): unreachable since" in result.stdout
    assert "differs" not in result.stdout
    doc = as_json(
        robots(
            [mockserver.url(down, "/a"), "--json", "-s", f"REP_STORAGE=sqlite:{db}"],
            subprocess_env,
            workdir,
        )
    )
    assert doc["origins"][0]["stored_differs"] is False


def _scrapy_help(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``scrapy -h`` run in *cwd*: its listing of commands."""
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "-h"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def test_absent_store_is_not_created(
    mockserver: MockServer, host: str, subprocess_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    db = tmp_path / "empty" / "rep.sqlite3"
    result = robots(
        [mockserver.url(host, "/a"), "-s", f"REP_STORAGE=sqlite:{db}"], subprocess_env, workdir
    )
    assert result.returncode == 0, result.stderr
    assert f"stored (sqlite {db}): no stored state ({db} does not exist)" in result.stdout
    assert list(db.parent.iterdir()) == []
    # A missing directory: refused as the crawl refuses it (a bare path is SQLite too).
    missing = tmp_path / "nothing-here" / "rep.sqlite3"
    result = robots(
        [mockserver.url(host, "/a"), "-s", f"REP_STORAGE={missing}"], subprocess_env, workdir
    )
    assert result.returncode == 2
    assert f"the directory {missing.parent} does not exist; create it first" in result.stderr
    assert not missing.parent.exists()


@pytest.mark.slow
def test_listed_in_help_and_project_default_store(
    mockserver: MockServer, host: str, subprocess_env: dict[str, str], tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    result = robots(["-h"], subprocess_env, outside, online=False)
    assert result.returncode == 0, result.stderr
    assert "  3  some robots.txt is unreachable: a crawl would hold those URLs" in result.stdout
    listing = _scrapy_help(subprocess_env, outside)
    assert "  robots " in listing.stdout

    project = tmp_path / "proj"
    (project / "myproj").mkdir(parents=True)
    (project / "scrapy.cfg").write_text("[settings]\ndefault = myproj.settings\n")
    (project / "myproj" / "__init__.py").write_text("")
    (project / "myproj" / "settings.py").write_text('BOT_NAME = "myproj"\n')
    env = {**subprocess_env, "PYTHONPATH": f"{project}:{subprocess_env['PYTHONPATH']}"}
    listing = _scrapy_help(env, project)
    assert "active project: myproj" in listing.stdout
    assert "  robots " in listing.stdout

    # Inside a project the default SQLite store applies; absent, it is reported, not made.
    result = robots([mockserver.url(host, "/a")], env, project)
    assert result.returncode == 0, result.stderr
    expected = project / ".scrapy" / "scrapy_rep.sqlite3"
    assert f"stored (sqlite {expected}): no stored state" in result.stdout
    assert not (project / ".scrapy").exists()


def test_unreachable_redis_store_is_reported(
    mockserver: MockServer,
    host: str,
    subprocess_env: dict[str, str],
    workdir: Path,
    refused_port: int,
) -> None:
    url = f"redis://127.0.0.1:{refused_port}/0"  # bound, nothing listens there
    result = robots(
        [mockserver.url(host, "/a"), "-s", f"REP_STORAGE={url}", "--json"], subprocess_env, workdir
    )
    assert result.returncode in (0, 1), result.stderr
    stored = as_json(result)["origins"][0]["stored"]
    assert "unreachable" in stored["store"]
    assert stored["note"] == "the store is unreachable"
