"""``scrapy robots verify`` and ``scrapy robots report`` on records of real crawls.

One crawl per test writes a record with every kind of line: allowed, forbidden, a
usage refusal (robots.txt's ``Content-Usage``), requests that waited, and requests
dropped at close (an origin whose robots.txt stays unreachable). The commands run as
real ``scrapy`` subprocesses. A hand-edited, damaged or cut file is reported with its
line, never with a traceback; the report opens in headless Chromium when installed.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from scrapy_rep.commands.record_tools import read_records
from tests.support.commands import robots
from tests.support.crawl import REP

ROBOTS = "User-agent: *\nDisallow: /private\nContent-Usage: /nouse train-ai=n\n"


async def _crawl(mockserver: Any, run_crawl: Any, tmp_path: Path) -> tuple[Path, str, str]:
    """A crawl of two origins that leaves a record; (record, origin, down origin)."""
    site, down = mockserver.unique_host("tools-site"), mockserver.unique_host("tools-down")
    mockserver.configure_many(
        {site: {"robots": {"body": ROBOTS}}, down: {"robots": {"status": 503}}}
    )
    paths = ["/", "/a", "/private/1", "/private/2", "/nouse/x"]
    urls = [mockserver.url(site, p) for p in paths] + [mockserver.url(down, "/held")]
    record = tmp_path / "crawl.jsonl.gz"
    settings = {
        **REP,
        "REP_RECORD": str(record),
        "REP_PURPOSES": ["train-ai"],
        "REP_USAGE_MODE": "enforce",
        "REP_IDLE_WAIT": 1.0,  # the held request is dropped when the spider closes
    }
    crawler = await run_crawl(urls, settings=settings)
    assert crawler.stat("robotstxt/dropped_at_close") == 1
    return record, mockserver.origin(site), mockserver.origin(down)


def _lines(record: Path) -> list[str]:
    return gzip.decompress(record.read_bytes()).decode().splitlines()


def _write(record: Path, lines: list[str]) -> None:
    record.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))


@pytest_twisted.ensureDeferred
async def test_verify_reproduces_every_decision(
    mockserver: Any, run_crawl: Any, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    record, site, down = await _crawl(mockserver, run_crawl, tmp_path)
    records = read_records([record])
    assert records.problems == []  # a file closed cleanly
    verdicts = "".join(sorted(d.verdict for d in records.decisions if d.verdict != "W"))
    # 3 allowed (robots.txt lets /nouse/x through; its usage is then refused), 2
    # forbidden, 1 usage refusal, 1 dropped at close; and a release line for each
    # request that waited for the first robots.txt (those scheduled before it came)
    assert verdicts == "".join(sorted("AAAFFUD")), verdicts
    waited = sum(d.verdict == "W" for d in records.decisions)
    [dropped] = [d for d in records.decisions if d.verdict == "D"]
    assert (dropped.url, dropped.origin) == (down + "/held", down)
    [refused] = [d for d in records.decisions if d.verdict == "U"]
    assert refused.url == site + "/nouse/x" and refused.doc["refused"] == ["train-ai"]
    done = robots(["verify", str(record)], subprocess_env, tmp_path, online=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "6 decision(s) re-decided: 6 reproduced, 0 mismatched" in done.stdout
    assert "1 dropped at close" in done.stdout
    assert f"{waited} releases after a wait" in done.stdout or not waited


@pytest_twisted.ensureDeferred
async def test_verify_names_the_line_of_a_hand_edited_record(
    mockserver: Any, run_crawl: Any, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    record, site, _ = await _crawl(mockserver, run_crawl, tmp_path)
    lines = _lines(record)
    # a forbidden decision turned into an allowed one
    edited = next(n for n, line in enumerate(lines) if line.startswith('{"v":"F"'))
    lines[edited] = lines[edited].replace('"v":"F"', '"v":"A"')
    url = site + json.loads(lines[edited])["u"]
    _write(record, lines)
    done = robots(["verify", str(record)], subprocess_env, tmp_path, online=False)
    assert done.returncode == 1
    assert (
        f"MISMATCH {record}:{edited + 1}: {url}: recorded allowed by line 2: Disallow: /private; "
        "re-decided forbidden by line 2: Disallow: /private"
    ) in done.stdout, done.stdout
    assert "5 reproduced, 1 mismatched" in done.stdout
    # the copy's body edited instead: each decision it made is re-decided otherwise
    lines = _lines(record)
    lines[edited] = lines[edited].replace('"v":"A"', '"v":"F"')
    body_line = next(n for n, line in enumerate(lines) if '"body":"User-agent' in line)
    lines[body_line] = lines[body_line].replace("Disallow: /private", "Allow: /private")
    _write(record, lines)
    done = robots(["verify", str(record)], subprocess_env, tmp_path, online=False)
    assert done.returncode == 1
    assert done.stdout.count("MISMATCH") == 2
    assert "re-decided allowed by line 2: Allow: /private" in done.stdout


@pytest.mark.slow
@pytest_twisted.ensureDeferred
async def test_damaged_and_cut_files_are_reported_with_their_line(
    mockserver: Any, run_crawl: Any, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    record, _, _ = await _crawl(mockserver, run_crawl, tmp_path)
    lines = _lines(record)
    # a line that is not JSON
    garbled = tmp_path / "garbled.jsonl.gz"
    _write(garbled, [*lines[:3], '{"v":"A","t":1.0,', *lines[3:]])
    done = robots(["verify", str(garbled)], subprocess_env, tmp_path, online=False)
    assert done.returncode == 1
    assert f"error: {garbled}:4: not a JSON line" in done.stdout
    # JSON that lacks what a decision needs (a context without its product token)
    tokenless = tmp_path / "tokenless.jsonl.gz"
    _write(tokenless, [re.sub(r'"k":"[^"]*",', "", line, count=1) for line in lines])
    done = robots(["verify", str(tokenless)], subprocess_env, tmp_path, online=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "cannot be re-decided: a field is missing or malformed (KeyError('k'))" in done.stdout
    # bytes overwritten in the middle of the compressed stream
    raw = bytearray(record.read_bytes())
    middle = len(raw) // 2
    raw[middle : middle + 16] = b"\xff" * 16
    damaged = tmp_path / "damaged.jsonl.gz"
    damaged.write_bytes(bytes(raw))
    done = robots(["verify", str(damaged)], subprocess_env, tmp_path, online=False)
    assert done.returncode == 1
    assert f"error: {damaged}:" in done.stdout and "damaged" in done.stdout
    # cut short, as a crash leaves it: what is whole is read and verified
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(record.read_bytes()[: len(raw) - 40])
    done = robots(["verify", str(cut)], subprocess_env, tmp_path, online=False)
    assert f"note: {cut}:" in done.stdout
    assert "0 mismatched" in done.stdout
    for output in (done.stdout, done.stderr):
        assert "Traceback" not in output
    # not a record at all
    other = tmp_path / "other.txt"
    other.write_text("hello\n")
    done = robots(["verify", str(other)], subprocess_env, tmp_path, online=False)
    assert done.returncode == 1 and "damaged" in done.stdout and "Traceback" not in done.stderr


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest_twisted.ensureDeferred
async def test_the_report_is_one_self_contained_page(
    mockserver: Any, run_crawl: Any, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    record, site, down = await _crawl(mockserver, run_crawl, tmp_path)
    report = tmp_path / "report.html"
    done = robots(
        ["report", str(record), "-o", str(report)], subprocess_env, tmp_path, online=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    page = report.read_text()
    for needed in (site, down, "Disallow: /private", "<svg", "usage refused", "dropped at close"):
        assert needed in page, needed
    assert f"{site}/private/1" in page and f"{site}/private/2" in page
    # nothing from the network: no script, stylesheet, image or font to fetch
    for banned in ("<script", "<link", "src=", "url(", "@import"):
        assert banned not in page, banned


@pytest.mark.slow
@pytest.mark.skipif(_chromium() is None, reason="headless Chromium is not installed")
@pytest_twisted.ensureDeferred
async def test_the_report_renders_in_headless_chromium(
    mockserver: Any, run_crawl: Any, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    record, _, _ = await _crawl(mockserver, run_crawl, tmp_path)
    report = tmp_path / "report.html"
    robots(["report", str(record), "-o", str(report)], subprocess_env, tmp_path, online=False)
    chromium = _chromium()
    assert chromium is not None
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
    # offline: every network request but the file itself fails
    offline = ["--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9"]
    dom = subprocess.run(
        [*common, *offline, "--dump-dom", report.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "Compliance report" in dom.stdout and "<svg" in dom.stdout
    png = tmp_path / "report.png"
    shot = subprocess.run(
        [*common, *offline, f"--screenshot={png}", "--window-size=1200,1400", report.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shot.returncode == 0, shot.stderr[-2000:]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
