"""The compliance record (``REP_RECORD``, docs/record.md) written by real crawls.

Every page the server received has an ``allowed`` record, every forbidden request a
``forbidden`` record naming the deciding line; a robots.txt that changes mid-crawl
gives two copies, each decision pointing at the one that decided it; ``kill -9``
leaves a file readable up to its last whole batch; two processes sharing a store
each write their own file, verified together; the page-directives spider middleware
writes one page line per page with directives, with what enforce dropped. ``verify``
is run on each.
"""

from __future__ import annotations

import fcntl
import gzip
import io
import json
import logging
import os
import re
import resource
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from scrapy import Request

from scrapy_rep.commands.record_tools import read_records, render_report, run_verify
from scrapy_rep.crawl.record import ALLOWED, FORBIDDEN, PAGE, RELEASED, recorder_for
from scrapy_rep.policy.config import Config, SettingError
from tests.crawl import test_page_directives as page_site
from tests.crawl.test_crawl_storage import ShiftedClock
from tests.crawl.test_crawl_storage_shared import start_process
from tests.support.crawl import REP, ListSpider, pages_of
from tests.support.resolver import RESOLVER_SETTING
from tests.support.scrapy_compat import RESOLVER_SETTING_NAME
from tests.support.waits import wait_for_files

V1 = "User-agent: *\nDisallow: /b\n"
V2 = "User-agent: *\nDisallow: /c\n"


def _verify(paths: list[Path]) -> tuple[int, str]:
    out = io.StringIO()
    status = run_verify(paths, out)
    return status, out.getvalue()


def _by_url(paths: list[Path], verdicts: str = ALLOWED + FORBIDDEN) -> dict[str, list[Any]]:
    """Records by URL; by default the robots.txt decisions only (not releases)."""
    found: dict[str, list[Any]] = {}
    for decision in read_records(paths).decisions:
        if decision.verdict in verdicts:
            found.setdefault(decision.url, []).append(decision)
    return found


@pytest_twisted.ensureDeferred
async def test_every_request_has_its_record(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Path
) -> None:
    mockserver.configure(
        host, {"robots": {"body": "User-agent: *\nAllow: /\nDisallow: /private\n"}}
    )
    paths = ["/", "/a", "/b?q=1", "/private/x", "/private"]
    template = str(tmp_path / "rec-%(name)s-%(pid)s.jsonl.gz")
    crawler = await run_crawl(
        [mockserver.url(host, p) for p in paths], settings={**REP, "REP_RECORD": template}
    )
    files = list(tmp_path.glob("rec-list-*.jsonl.gz"))
    assert len(files) == 1
    received = pages_of(mockserver, host)
    assert sorted(received) == ["/", "/a", "/b?q=1"]
    decisions = _by_url(files)
    for path in received:
        [decision] = decisions[mockserver.url(host, path)]
        assert decision.verdict == ALLOWED
        assert decision.copy is not None and decision.copy["state"] == "rules"
        assert decision.copy["status"] == 200
        assert decision.copy["url"] == mockserver.url(host, "/robots.txt")
    for path in ("/private/x", "/private"):
        [decision] = decisions[mockserver.url(host, path)]
        assert decision.verdict == FORBIDDEN
        assert (decision.context["l"], decision.context["r"]) == (3, "Disallow: /private")
        assert decision.context["g"] == ["*"]
        assert decision.context["k"] == "Scrapy"
    # (and a release line for each request that waited for robots.txt)
    assert crawler.stat("rep/record/decisions") >= 5
    assert crawler.stat("rep/record/bytes") > 0
    assert crawler.stat("rep/record/lost") is None
    status, out = _verify(files)
    assert status == 0, out
    assert "5 reproduced, 0 mismatched" in out
    # the file closed cleanly: a whole gzip stream of JSON lines, the header first
    lines = gzip.decompress(files[0].read_bytes()).decode().splitlines()
    header = json.loads(lines[0])
    assert header["h"] == 1 and header["spider"] == "list" and header["pid"] == os.getpid()


@pytest_twisted.ensureDeferred
async def test_record_bytes_stat_is_the_file_size(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Path
) -> None:
    # rep/record/bytes counts the gzip trailer written at close too: the whole file
    mockserver.configure(host, {"robots": {"body": "User-agent: *\nDisallow: /x\n"}})
    template = str(tmp_path / "rec.jsonl.gz")
    crawler = await run_crawl(
        [mockserver.url(host, "/"), mockserver.url(host, "/x")],
        settings={**REP, "REP_RECORD": template},
    )
    assert crawler.stat("rep/record/bytes") == (tmp_path / "rec.jsonl.gz").stat().st_size


class _ChangingRobotsSpider(ListSpider):
    """Requests /a and /b; then moves the crawl's clock past the copy's expiry and
    requests /poll until the second robots.txt has been fetched and stored, then /b2
    and /c2 (decided by the new copy)."""

    name = "changing"

    def __init__(self, base: str, clock: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base = base
        self.clock = clock
        self.polls = 0

    async def start(self) -> AsyncIterator[Any]:
        yield Request(self.base + "/a", callback=self.after_first, errback=self.on_error)
        yield Request(self.base + "/b", errback=self.on_error)

    def after_first(self, response: Any) -> Iterator[Request]:
        self.responses.append(response)
        self.clock.offset += 3 * 86400.0  # past REP_MAX_TTL: the copy is expired
        yield Request(self.base + "/poll?n=0", callback=self.poll, dont_filter=True)

    def poll(self, response: Any) -> Iterator[Request]:
        self.responses.append(response)
        self.polls += 1
        fetched = self.crawler.stats.get_value("robotstxt/response_count", 0)
        # (one more round after the second fetch's response: by then it is stored)
        if fetched < 2 or self.polls < 3:
            yield Request(f"{self.base}/poll?n={self.polls}", callback=self.poll, dont_filter=True)
            return
        yield Request(self.base + "/b2", errback=self.on_error)
        yield Request(self.base + "/c2", errback=self.on_error)


@pytest_twisted.ensureDeferred
async def test_changed_robots_gives_two_copies(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Path
) -> None:
    mockserver.configure(host, {"robots": [{"body": V1}, {"body": V2}]})
    record = tmp_path / "changed.jsonl.gz"
    # (a ShiftedClock survives Scrapy 2.14's deep copy of the settings as itself)
    settings = {**REP, "REP_RECORD": str(record), "REP_CLOCK": ShiftedClock()}
    await run_crawl(
        spider_cls=_ChangingRobotsSpider,
        settings=settings,
        spider_kwargs={"base": mockserver.origin(host), "clock": settings["REP_CLOCK"]},
    )
    assert mockserver.count(host, "/robots.txt") == 2
    records = read_records([record])
    bodies = {copy["sha256"]: copy.get("body") for copy in records.copies}
    assert sorted(b for b in bodies.values() if b) == [V1, V2]
    decisions = _by_url([record])
    first = decisions[mockserver.url(host, "/b")][0]
    assert first.verdict == FORBIDDEN and first.context["r"] == "Disallow: /b"
    assert records.bodies[first.copy["sha256"]].decode() == V1
    allowed_b2 = decisions[mockserver.url(host, "/b2")][0]
    forbidden_c2 = decisions[mockserver.url(host, "/c2")][0]
    assert allowed_b2.verdict == ALLOWED
    assert forbidden_c2.verdict == FORBIDDEN and forbidden_c2.context["r"] == "Disallow: /c"
    for later in (allowed_b2, forbidden_c2):
        assert records.bodies[later.copy["sha256"]].decode() == V2
    status, out = _verify([record])
    assert status == 0, out


@pytest_twisted.ensureDeferred
async def test_waited_requests_are_recorded(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Path
) -> None:
    """A request held while robots.txt was pending: a release line with its wait, then
    its decision, which carries the wait too."""
    mockserver.configure(host, {"robots": {"body": V1, "delay": 0.5}})
    record = tmp_path / "waited.jsonl.gz"
    await run_crawl(
        [mockserver.url(host, "/a"), mockserver.url(host, "/b")],
        settings={**REP, "REP_RECORD": str(record)},
    )
    decisions = _by_url([record], ALLOWED + RELEASED)
    verdicts = sorted(d.verdict for d in decisions[mockserver.url(host, "/a")])
    assert verdicts == [ALLOWED, RELEASED]
    released = next(d for d in decisions[mockserver.url(host, "/a")] if d.verdict == RELEASED)
    assert released.doc["w"] > 0
    assert _verify([record])[0] == 0


@pytest_twisted.ensureDeferred
async def test_an_unwritable_record_stops_the_start(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Path, caplog: Any
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a directory should be")
    mockserver.configure(host, {"robots": {"body": V1}})
    with pytest.raises(SettingError, match="REP_RECORD"):
        await run_crawl(
            [mockserver.url(host, "/a")],
            settings={**REP, "REP_RECORD": str(blocker / "rec.jsonl.gz")},
        )
    errors = [
        r for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("scrapy_rep")
    ]
    assert len(errors) == 1 and "REP_RECORD" in errors[0].getMessage()
    assert mockserver.paths(host) == []


_FULL_DISK_SPIDER = """
import json, sys
import scrapy

class FullDiskSpider(scrapy.Spider):
    name = "full_disk"

    async def start(self):
        for url in json.loads(sys.argv[-1].split("=", 1)[1]):
            yield scrapy.Request(url)

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        # After every spider_closed receiver: the record is written last at close, so
        # its stats are complete only then (a short crawl writes nothing before).
        crawler.signals.connect(spider.print_stats, signal=scrapy.signals.engine_stopped)
        return spider

    def parse(self, response):
        pass

    def print_stats(self):
        stats = self.crawler.stats.get_stats()
        keep = {k: v for k, v in stats.items() if k.startswith(("rep/record", "robotstxt/"))}
        keep["pages"] = stats.get("response_received_count", 0)
        print(json.dumps(keep, default=str), flush=True)
"""


@pytest.mark.slow
def test_a_disk_that_fills_is_one_warning_and_a_stat(
    mockserver: Any, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    """A crawl in a process whose files may not grow past 4 KiB (RLIMIT_FSIZE: the
    kernel refuses the record's writes as it would on a full disk): the crawl goes on
    and downloads every page; one WARNING and rep/record/write_failed say so."""
    host = mockserver.unique_host("record-full")
    mockserver.configure(host, {"robots": {"body": "User-agent: *\nDisallow: /private\n"}})
    # long, random paths: a record that cannot compress below the limit
    urls = [mockserver.url(host, f"/{os.urandom(48).hex()}") for _ in range(300)]
    spider = tmp_path / "full_disk_spider.py"
    spider.write_text(_FULL_DISK_SPIDER)
    limit = 4096

    def limit_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    command = [
        sys.executable, "-m", "scrapy", "runspider", str(spider),
        "-s", f"{RESOLVER_SETTING_NAME}={RESOLVER_SETTING}",
        "-s", "REP_STORAGE=memory", "-s", "ADDONS={\"scrapy_rep.Addon\": 0}",
        "-s", "ROBOTSTXT_OBEY=True", "-s", "TELNETCONSOLE_ENABLED=False",
        "-s", "LOG_LEVEL=INFO", "-s", f"REP_RECORD={tmp_path / 'full.jsonl.gz'}",
        "-a", f"urls={json.dumps(urls)}",
    ]  # fmt: skip
    done = subprocess.run(
        command,
        env=subprocess_env,
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
        preexec_fn=limit_files,  # (before the child starts any thread)
        check=False,
    )
    log = done.stderr.decode()
    assert done.returncode == 0, log[-3000:]
    stats = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert stats["pages"] == 301  # every page, and robots.txt
    assert stats["rep/record/write_failed"] == 1
    assert stats["rep/record/lost"] > 0
    warnings = [line for line in log.splitlines() if "cannot be written any more" in line]
    assert len(warnings) == 1 and "REP_RECORD" in warnings[0], warnings
    assert "Traceback" not in log
    assert (tmp_path / "full.jsonl.gz").stat().st_size <= limit


def _slow_site(mockserver: Any, host: str, pages: int) -> list[str]:
    mockserver.configure(
        host, {"robots": {"body": V1}, "default": {"body": "<html>x</html>", "delay": 0.1}}
    )
    return [mockserver.url(host, f"/p{n}") for n in range(pages)]


@pytest.mark.slow
def test_kill_9_leaves_a_file_verify_accepts(
    mockserver: Any, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    host = mockserver.unique_host("record-kill")
    urls = _slow_site(mockserver, host, 400)
    record = tmp_path / "killed.jsonl.gz"
    proc, _, log = start_process(
        tmp_path, subprocess_env, "memory", "k", urls, ("-s", f"REP_RECORD={record}")
    )
    try:
        wait_for_files([tmp_path / "ready-k"], [proc])
        (tmp_path / "go").write_text("go")
        deadline = time.monotonic() + 60
        while len(_by_url([record])) < 20:  # 20 URLs decided (batches of each second)
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "no decisions recorded"
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    records = read_records([record])
    assert len(pages_of(mockserver, host)) < 400, "the kill landed after the crawl"
    assert [p.fatal for p in records.problems] == [False], records.problems
    assert "killed?" in str(records.problems[0]) or "cut short" in str(records.problems[0])
    assert len(_by_url([record])) >= 20
    status, out = _verify([record])
    assert status == 0, out
    assert "0 mismatched" in out and "note:" in out


@pytest.mark.slow
def test_two_processes_sharing_a_store_verify_together(
    mockserver: Any, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    host = mockserver.unique_host("record-two")
    mockserver.configure(host, {"robots": {"body": V1}})
    urls = [mockserver.url(host, p) for p in ("/a", "/b", "/c")]
    store = f"sqlite:{tmp_path / 'shared.sqlite'}"
    template = str(tmp_path / "rec-%(pid)s.jsonl.gz")
    procs = [
        start_process(tmp_path, subprocess_env, store, tag, urls, ("-s", f"REP_RECORD={template}"))
        for tag in ("one", "two")
    ]
    wait_for_files([tmp_path / "ready-one", tmp_path / "ready-two"], [p for p, _, _ in procs])
    (tmp_path / "go").write_text("go")
    for proc, _, log in procs:
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
    files = sorted(tmp_path.glob("rec-*.jsonl.gz"))
    assert len(files) == 2
    records = read_records(files)
    assert len(records.headers) == 2
    allowed = sorted(d.url for d in records.decisions if d.verdict == ALLOWED)
    forbidden = sorted(d.url for d in records.decisions if d.verdict == FORBIDDEN)
    received = sorted(mockserver.url(host, p) for p in pages_of(mockserver, host))
    assert allowed == received and len(received) == 4  # /a and /c, twice
    assert forbidden == [mockserver.url(host, "/b?p=one"), mockserver.url(host, "/b?p=two")]
    status, out = _verify(files)
    assert status == 0, out
    # the files merge by concatenation, and the merged file verifies alike
    merged = tmp_path / "merged.jsonl.gz"
    merged.write_bytes(b"".join(f.read_bytes() for f in files))
    assert _verify([merged])[0] == 0


@pytest_twisted.ensureDeferred
async def test_one_writer_per_file(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Path
) -> None:
    """A file another process is writing (its lock held) stops the start, naming
    REP_RECORD: two writers would interleave their gzip streams."""
    record = tmp_path / "shared-name.jsonl.gz"
    mockserver.configure(host, {"robots": {"body": V1}})
    with record.open("ab") as other_writer:
        fcntl.flock(other_writer.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(SettingError, match=r"REP_RECORD.*another process.*%\(pid\)s"):
            await run_crawl(
                [mockserver.url(host, "/a")], settings={**REP, "REP_RECORD": str(record)}
            )
    assert mockserver.paths(host) == []


# The pages of the page-directives site (tests/crawl/test_page_directives.py) that
# give PageBot a directive: each has exactly one P line, and no other page has one.
PAGES_WITH_DIRECTIVES = {
    "/meta-nofollow",
    "/meta-noindex",
    "/header-nofollow",
    "/header-none",
    "/redirected",
    "/doc.pdf",
    "/expired",
}


def _page_lines(path: Path) -> dict[str, list[Any]]:
    """P lines by the path of their page."""
    found: dict[str, list[Any]] = {}
    for decision in read_records([path]).decisions:
        if decision.verdict == PAGE:
            found.setdefault(page_site._path(decision.url), []).append(decision)
    return found


async def _page_crawl(
    mockserver: Any, run_crawl: Any, tmp_path: Path, mode: str, spider_cls: Any = None
) -> tuple[Any, str, Path]:
    host = page_site._site(mockserver, f"record-page-{mode}")
    record = tmp_path / f"pages-{mode}.jsonl.gz"
    crawler = await run_crawl(
        page_site._start(mockserver, host),
        settings={**page_site.REP, "REP_PAGE_MODE": mode, "REP_RECORD": str(record)},
        spider_cls=spider_cls or page_site.PageSpider,
    )
    return crawler, host, record


def _header(path: Path) -> dict[str, Any]:
    [header] = read_records([path]).headers
    return header


@pytest_twisted.ensureDeferred
async def test_page_directives_are_recorded_in_record_mode(
    mockserver: Any, run_crawl: Any, tmp_path: Path
) -> None:
    """The add-on's own spider middleware writes one P line per page with directives
    for the token, with their sources, into the robots.txt middleware's file."""
    crawler, host, record = await _page_crawl(mockserver, run_crawl, tmp_path, "record")
    assert page_site._received(mockserver, host) == page_site.EVERY_PATH  # nothing dropped
    lines = _page_lines(record)
    assert set(lines) == PAGES_WITH_DIRECTIVES
    assert all(len(found) == 1 for found in lines.values()), lines
    pages = {path: found[0].doc for path, found in lines.items()}
    assert pages["/meta-nofollow"]["d"] == {
        "nofollow": [
            {"from": "meta", "scope": "robots", "text": '<meta name="robots" content="nofollow">'}
        ]
    }
    assert pages["/header-nofollow"]["d"] == {
        "noarchive": [{"from": "header", "scope": "*", "text": "noarchive"}],
        "nofollow": [{"from": "header", "scope": "pagebot", "text": "pagebot: nofollow"}],
    }
    assert pages["/meta-noindex"]["d"]["noindex"][0]["scope"] == page_site.TOKEN
    assert list(pages["/header-none"]["d"]) == ["none"]
    assert list(pages["/redirected"]["d"]) == ["noindex"]  # the final page's, not the hop's
    assert list(pages["/doc.pdf"]["d"]) == ["noindex"]
    assert {p["k"] for p in pages.values()} == {page_site.TOKEN}
    assert not [p for p in pages.values() if "dr" in p or "di" in p]  # record drops nothing
    # every page's line is as its response's meta["rep_page"] held it
    for response in crawler.spider.responses:
        path = page_site._path(response.url)
        if path in pages:
            assert pages[path]["d"] == response.meta["rep_page"]["sources"]
    assert _header(record)["page_mode"] == "record"
    # the robots.txt decisions are in the same file: one recorder for both middlewares
    assert len(_by_url([record], ALLOWED)) == len(page_site.EVERY_PATH) - 1  # (not /exempt)
    # closed by the robots.txt middleware: a late page call is a no-op, counted nowhere
    recorder = recorder_for(crawler, Config.from_settings(crawler.settings), time.time)
    assert recorder.enabled and recorder.closed
    size = record.stat().st_size
    recorder.page(mockserver.url(host, "/late"), page_site.TOKEN, {"noindex": []}, 0, 1)
    recorder.close()
    assert record.stat().st_size == size
    assert crawler.stat("rep/record/lost") is None
    status, out = _verify([record])
    assert status == 0, out
    assert f"not re-decidable: {len(PAGES_WITH_DIRECTIVES)} page directives" in out
    assert "0 mismatched" in out


@pytest.mark.parametrize("mode", ["enforce", "audit"])
@pytest_twisted.ensureDeferred
async def test_page_lines_carry_what_was_dropped(
    mockserver: Any, run_crawl: Any, tmp_path: Path, mode: str
) -> None:
    """In enforce, each page's one line carries the requests and items its output lost
    (in audit, what would be lost; the header says which); a page whose only drop is a
    rel=nofollow link has a line too."""
    crawler, host, record = await _page_crawl(mockserver, run_crawl, tmp_path, mode)
    received = page_site._received(mockserver, host)
    if mode == "enforce":
        assert received == page_site.EVERY_PATH - page_site.NOT_FOLLOWED
    else:
        assert received == page_site.EVERY_PATH
    lines = _page_lines(record)
    assert set(lines) == PAGES_WITH_DIRECTIVES | {"/rel"}
    assert all(len(found) == 1 for found in lines.values()), lines
    drops = {
        path: (found[0].doc.get("dr", 0), found[0].doc.get("di", 0))
        for path, found in lines.items()
    }
    assert drops == {
        "/meta-nofollow": (1, 0),
        "/meta-noindex": (0, 1),
        "/header-nofollow": (1, 0),
        "/header-none": (1, 1),
        "/redirected": (0, 1),
        "/doc.pdf": (0, 1),
        "/expired": (0, 1),
        "/rel": (1, 0),  # /rel-only, linked only with rel="nofollow"
    }
    assert lines["/rel"][0].doc["d"] == {}
    # the lines add up to the stats
    prefix = "rep/page/dropped/" if mode == "enforce" else "rep/page/audit/would_drop/"
    requests = crawler.stat(prefix + "request_nofollow") + crawler.stat(
        prefix + "request_rel_nofollow"
    )
    assert sum(dr for dr, _ in drops.values()) == requests == 4
    assert sum(di for _, di in drops.values()) == crawler.stat(prefix + "item_noindex") == 5
    assert _header(record)["page_mode"] == mode
    status, out = _verify([record])
    assert status == 0, out
    assert "not re-decidable: 8 page directives" in out
    # the report's origin table: the page directives column (the last) counts them
    page = render_report(read_records([record]), [str(record)])
    row = re.search(rf"<tr><td>{re.escape(mockserver.origin(host))}</td>.*?</tr>", page)
    assert row is not None
    assert re.findall(r"<td class='n'>(\d+)</td>", row.group(0))[-1] == "8"


class _FailingCallbackSpider(page_site.PageSpider):
    """Its callback raises (before yielding anything) on the noindex page."""

    def parse(self, response: Any, **kwargs: Any) -> Any:
        if response.url.endswith("/meta-noindex"):
            self.responses.append(response)
            raise ValueError("a spider bug")
        return super().parse(response, **kwargs)


@pytest_twisted.ensureDeferred
async def test_a_page_whose_callback_fails_still_has_its_line(
    mockserver: Any, run_crawl: Any, tmp_path: Path
) -> None:
    """Enforce writes a page's line when its output ends; a callback that raises has no
    output, and its page's line is written then, once, with nothing dropped."""
    crawler, _, record = await _page_crawl(
        mockserver, run_crawl, tmp_path, "enforce", _FailingCallbackSpider
    )
    assert crawler.stat("spider_exceptions/ValueError") == 1
    lines = _page_lines(record)
    [line] = lines["/meta-noindex"]
    assert list(line.doc["d"]) == ["noindex"]
    assert "dr" not in line.doc and "di" not in line.doc
    assert set(lines) == PAGES_WITH_DIRECTIVES | {"/rel"}
    assert _verify([record])[0] == 0


@pytest.mark.parametrize("bad", ["rec-%(user)s.gz", "rec-%d.gz", 42, ["a"]])
def test_a_bad_rep_record_is_a_setting_error(bad: Any) -> None:
    from scrapy_rep.policy.config import Config

    with pytest.raises(SettingError, match="REP_RECORD"):
        Config.from_settings({"REP_RECORD": bad})


def test_rep_record_placeholders() -> None:
    from scrapy_rep.policy.config import Config

    assert Config.from_settings({}).record is None
    template = "r/%(name)s-%(time)s-%(pid)s-100%%.jsonl.gz"
    assert Config.from_settings({"REP_RECORD": template}).record == template


async def _page_middleware_alone_crawl(
    mockserver: Any, run_crawl: Any, tmp_path: Path
) -> tuple[Any, Path]:
    """A crawl with the page-directives spider middleware enabled by hand and the
    robots.txt middleware not at all; (crawler, record)."""
    host = page_site._site(mockserver, "record-page-alone")
    record = tmp_path / "page-alone.jsonl.gz"
    settings = {key: value for key, value in page_site.REP.items() if key != "ADDONS"} | {
        "SPIDER_MIDDLEWARES": {"scrapy_rep.page_directives.PageDirectivesMiddleware": 543},
        "REP_RECORD": str(record),
    }
    crawler = await run_crawl(
        page_site._start(mockserver, host), settings=settings, spider_cls=page_site.PageSpider
    )
    return crawler, record


@pytest_twisted.ensureDeferred
async def test_record_of_the_page_middleware_alone_is_closed(
    mockserver: Any, run_crawl: Any, tmp_path: Path
) -> None:
    """With the page-directives spider middleware enabled by hand and the robots.txt
    middleware not at all, the record is still closed when the crawl ends: a whole file
    with the page lines and a summary line in the log."""
    crawler, record = await _page_middleware_alone_crawl(mockserver, run_crawl, tmp_path)
    assert set(_page_lines(record)) == PAGES_WITH_DIRECTIVES
    with gzip.open(record, "rb") as whole:
        whole.read()  # a truncated gzip stream raises EOFError here
    assert [
        m for m in crawler.messages(logging.INFO) if "compliance record" in m and "decision" in m
    ]
    status, out = _verify([record])
    assert status == 0, out


@pytest_twisted.ensureDeferred
async def test_record_of_the_page_middleware_alone_is_closed_at_spider_closed(
    mockserver: Any, run_crawl: Any, tmp_path: Path
) -> None:
    """Without the robots.txt middleware the record is still closed when the spider
    closes, not later: its summary comes before Scrapy's "Spider closed" line and its
    final totals are in the stats Scrapy dumps then (which extensions export)."""
    crawler, record = await _page_middleware_alone_crawl(mockserver, run_crawl, tmp_path)
    messages = crawler.messages(logging.INFO)
    [summary] = [n for n, m in enumerate(messages) if m.startswith("compliance record ")]
    [spider_closed] = [n for n, m in enumerate(messages) if m.startswith("Spider closed")]
    assert summary < spider_closed, messages[summary:]
    [dump] = [m for m in messages if m.startswith("Dumping Scrapy stats")]
    written = len(read_records([record]).decisions)
    assert written == len(PAGES_WITH_DIRECTIVES)
    assert f"'rep/record/decisions': {written}," in dump, dump
    assert f"'rep/record/bytes': {crawler.stat('rep/record/bytes')}," in dump, dump


@pytest_twisted.ensureDeferred
async def test_the_report_breaks_page_lines_down(
    mockserver: Any, run_crawl: Any, tmp_path: Path
) -> None:
    """The report's page directives table says, per origin, how many pages had each
    directive and what enforcing them dropped, by cause: the requests of nofollow pages,
    the rel=nofollow links of other pages (a page with only those has a line with no
    directive) and the items; the totals agree with the crawl's stats."""
    crawler, host, record = await _page_crawl(mockserver, run_crawl, tmp_path, "enforce")
    page = render_report(read_records([record]), [str(record)])
    section = page.split("<h2>Page directives</h2>")[1]
    assert "page_mode: enforce;" in section
    columns = re.findall(r"<th>(.*?)</th>", section.split("</thead>")[0])
    assert columns[0] == "origin"
    row = re.search(rf"<tr><td>{re.escape(mockserver.origin(host))}</td>.*?</tr>", section)
    assert row is not None
    cells = [int(n) for n in re.findall(r"<td class='n'>(\d+)</td>", row[0])]
    counts = dict(zip(columns[1:], cells, strict=True))
    assert counts == {
        "pages": len(PAGES_WITH_DIRECTIVES) + 1,  # (and /rel)
        "noarchive": 1,  # /header-nofollow
        "nofollow": 2,  # /meta-nofollow, /header-nofollow
        "noindex": 3,  # /meta-noindex, /redirected, /doc.pdf
        "none": 1,  # /header-none
        "unavailable_after": 1,  # /expired
        "rel=nofollow links only": 1,  # /rel
        "requests dropped: nofollow page": 3,
        "requests dropped: rel=nofollow links": 1,
        "items dropped": 5,
    }
    dropped = "rep/page/dropped/"
    assert counts["requests dropped: nofollow page"] == crawler.stat(dropped + "request_nofollow")
    assert counts["requests dropped: rel=nofollow links"] == crawler.stat(
        dropped + "request_rel_nofollow"
    )
    assert counts["items dropped"] == crawler.stat(dropped + "item_noindex")


@pytest_twisted.ensureDeferred
async def test_usage_preferences_are_declared_once_per_distinct_statement(
    mockserver: Any, run_crawl: Any, host: str, tmp_path: Path
) -> None:
    """Two origins whose robots.txt state usage preferences, one of them per path,
    crawled together: each allowed decision points at the preferences its request
    carried, and each distinct set of preferences is declared once however many
    requests it applies to."""
    other = mockserver.unique_host("usage-other")
    mockserver.configure_many(
        {
            host: {
                "robots": {
                    "body": "User-agent: *\nContent-Usage: train-ai=n\n"
                    "Content-Usage: /open/ train-ai=y\n"
                }
            },
            other: {"robots": {"body": "User-agent: *\nContent-Usage: train-ai=n, search=y\n"}},
        }
    )
    urls = [
        mockserver.url(name, path)
        for n in range(4)
        for name in (host, other)
        for path in (f"/p{n}", f"/open/{n}")
    ]
    record = tmp_path / "usage.jsonl.gz"
    settings = {**REP, "REP_RECORD": str(record), "REP_PURPOSES": ["search"]}
    crawler = await run_crawl(urls, settings=settings)
    assert len(crawler.spider.responses) == len(urls)
    decisions = _by_url([record], ALLOWED)
    for response in crawler.spider.responses:
        [decision] = decisions[response.url]
        carried = response.meta["rep_usage"]
        declared = decision.doc["usage"]
        assert declared["purposes"] == carried["purposes"] == ["search"]
        assert declared["usage"] == {key: carried[key] for key in ("preferences", "use", "sources")}
    refusals = {
        response.url: response.meta["rep_usage"]["preferences"]["train-ai"]
        for response in crawler.spider.responses
    }
    assert refusals[mockserver.url(host, "/open/0")] == "y"
    assert refusals[mockserver.url(host, "/p0")] == "n"
    # three distinct statements (two of the first origin's paths, one of the other's)
    lines = gzip.decompress(record.read_bytes()).decode().splitlines()
    assert len([line for line in lines if line.startswith('{"p":')]) == 3
    assert _verify([record])[0] == 0
