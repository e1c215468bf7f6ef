"""``scrapy robots URL [URL ...]``: what a crawl would do with URLs, and why.

Without ``--file`` each origin's robots.txt is fetched by a one-shot Scrapy crawl through
``RobotsFetcher``, so settings, proxies, download handlers and the status, redirect and
size rules give a crawl's outcome. The store is only read (SQLite read-only, never
created; other stores only asked ``get``) except by ``--refresh`` and ``--forget``.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy import Request, Spider
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet.defer import DeferredList

from scrapy_rep.commands.evaluate import (
    evaluate_origin,
    fresh_verdict,
    page_result,
    parse_copy,
    url_problem,
    url_result,
)
from scrapy_rep.commands.output import (
    COPY_FILE,
    EXIT_ALLOWED,
    EXIT_USAGE,
    EXIT_WAITING,
    SOURCE_FILE,
    OriginReport,
    Report,
    StoredState,
    UrlResult,
    render_json,
    render_page_json,
    render_page_text,
    render_text,
)
from scrapy_rep.commands.record_tools import RECORD_TOOLS, run_record_tool
from scrapy_rep.crawl.compat import CommandHelpFormatter
from scrapy_rep.crawl.product_token import BROWSER_TOKENS
from scrapy_rep.policy.config import Config, SettingError, unknown_settings
from scrapy_rep.policy.origin import origin_of
from scrapy_rep.policy.records import RULES, UNREACHABLE
from scrapy_rep.policy.robots_policy import FetchOutcome, RobotsPolicy
from scrapy_rep.robotstxt import product_token

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from scrapy.http import Response
    from scrapy.settings import BaseSettings
    from twisted.python.failure import Failure

    from scrapy_rep.policy.records import OriginRecord
    from scrapy_rep.robotstxt._robotstxt import RobotsTxt
    from scrapy_rep.storage.base import RobotsStorage

DESCRIPTION = """\
Check URLs against robots.txt as a crawl with scrapy-rep would now.

Each origin's robots.txt is fetched through Scrapy (settings, proxies and
download handlers apply). With a store (REP_STORAGE, or the default SQLite
store inside a project) the verdict is what a crawl using that store would
do now: a stored copy still fresh applies until it expires. When the fetched
copy says otherwise, its verdict is shown beside it.

Exit status
  0  every URL is allowed
  1  some URL is disallowed
  2  usage error (a bad URL, option or setting)
  3  some robots.txt is unreachable: a crawl would hold those URLs
     (with --page: some page could not be downloaded)

With --page, each URL is downloaded (redirects followed) and its page-level
directives for the product token are shown: robots meta tags, X-Robots-Tag
lines and the links it marks rel="nofollow". robots.txt is not read.

Compliance records (REP_RECORD, see docs/record.md)
  scrapy robots verify FILE...
      re-decide every recorded decision; exit 0 only when all are reproduced
  scrapy robots report FILE... -o report.html
      write one self-contained HTML report
"""


# Above every named Scrapy priority ("cmdline" is 40): the internal crawl must not run
# a robots.txt middleware whatever the project or -s says, or it would fetch robots.txt
# itself and could hold the command's own requests.
_FORCED_PRIORITY = 100


class OneShotSpider(Spider):
    """The internal spider of a ``scrapy robots`` check: it fetches each of ``targets``
    once and keeps what came back for each in ``found``."""

    def __init__(self, targets: list[str], found: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.targets = targets
        self.found = found

    @classmethod
    def update_settings(cls, settings: BaseSettings) -> None:
        super().update_settings(settings)
        settings.set("ROBOTSTXT_OBEY", False, priority=_FORCED_PRIORITY)
        # A one-shot check should not open ports; at spider priority, so -s still wins.
        settings.set("TELNETCONSOLE_ENABLED", False, priority="spider")
        settings.set("REMOTE_CONTROL_ENABLED", False, priority="spider")
        # ignored anyway; the command has warned of them, the middleware would say it again
        for name, _ in unknown_settings(settings):
            settings.delete(name, priority=_FORCED_PRIORITY)


class PageFetchSpider(OneShotSpider):
    """Downloads the given URLs once each; every answer (any status) is kept."""

    name = "scrapy_rep_page"

    async def start(self) -> AsyncIterator[Any]:
        for url in self.targets:
            yield Request(
                url,
                callback=self.keep,
                errback=self.failed,
                dont_filter=True,
                # error pages too (a 404 may carry a header), while redirects are
                # still followed (handle_httpstatus_all would stop them)
                meta={"handle_httpstatus_list": list(range(400, 600)), "page_url": url},
            )

    def keep(self, response: Response) -> None:
        self.found[response.meta["page_url"]] = response

    def failed(self, failure: Failure) -> None:
        request = getattr(failure, "request", None)
        if request is not None:
            self.found[request.meta["page_url"]] = failure


class _RobotsFetchSpider(OneShotSpider):
    """Fetches robots.txt of the given origins and records the outcomes; yields nothing."""

    name = "scrapy_rep_robots"

    async def start(self) -> AsyncIterator[Any]:
        from scrapy_rep.crawl.fetcher import RobotsFetcher

        config = Config.from_settings(self.crawler.settings)
        fetcher = RobotsFetcher(self.crawler, config, time.time)
        # Deferreds, not asyncio tasks: this works under any reactor a project picks.
        pending = [deferred_from_coro(self._fetch(fetcher, origin)) for origin in self.targets]
        await maybe_deferred_to_future(DeferredList(pending, consumeErrors=True))
        return
        yield  # an async generator that yields no request

    async def _fetch(self, fetcher: Any, origin: str) -> None:
        try:
            self.found[origin] = await fetcher.fetch(origin)
        except Exception as exc:  # the fetcher classifies errors; this is a bug guard
            self.logger.exception("fetching robots.txt of %s failed", origin)
            self.found[origin] = FetchOutcome(UNREACHABLE, type(exc).__name__)


class RobotsCommand(ScrapyCommand):
    requires_project = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_LEVEL": "WARNING"}

    def syntax(self) -> str:
        return "[options] URL [URL ...]"

    def short_desc(self) -> str:
        return "Check URLs against robots.txt (scrapy-rep)"

    def long_desc(self) -> str:
        return DESCRIPTION

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.formatter_class = CommandHelpFormatter
        parser.add_argument(
            "--user-agent",
            metavar="TOKEN",
            help="product token to check for; defaults to ROBOTSTXT_USER_AGENT, "
            "else USER_AGENT (a full User-Agent string is cut to its leading token)",
        )
        parser.add_argument(
            "--file",
            metavar="ROBOTS_TXT",
            help="parse this local robots.txt instead of fetching (no network, no "
            "store); URLs may then also be bare paths such as /private/x",
        )
        switches = {
            "--refresh": "store the fetched copy, as a crawl's refetch would (it then applies "
            "at once instead of the stored one)",
            "--forget": "remove what the store holds for the origins of the URLs given (a "
            "crawl then fetches their robots.txt first); fetches nothing",
            "--page": "download each URL through Scrapy and show its page-level directives "
            "(robots meta tags, X-Robots-Tag, rel=nofollow links) for the product token, "
            "with their sources, instead of robots.txt",
            "--json": "print one JSON document for scripts",
        }
        for switch, text in switches.items():
            parser.add_argument(switch, action="store_true", help=text)
        parser.add_argument(
            "-o",
            "--output",
            metavar="FILE",
            help="with `report`: the HTML file to write (docs/record.md)",
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        for name, close in unknown_settings(self.settings):  # typos, most of them
            hint = f"; did you mean {close}?" if close else ""
            print(f"warning: unknown setting {name} is ignored{hint}", file=sys.stderr)
        if args and args[0] in RECORD_TOOLS:  # verify / report FILE...: compliance records
            self.exitcode = run_record_tool(args[0], args[1:], opts.output)
            return
        if not args:
            raise UsageError("give at least one URL")
        if opts.file is not None and (opts.refresh or opts.forget):
            raise UsageError(
                "--file uses no store: it cannot be combined with --refresh or --forget"
            )
        if opts.refresh and opts.forget:
            raise UsageError("give --refresh or --forget, not both")
        if opts.page and (opts.file is not None or opts.refresh or opts.forget):
            raise UsageError("--page reads pages, not robots.txt: no --file, --refresh, --forget")
        try:  # a bad setting or store place is a usage error (exit status 2), as in a crawl
            self._check(args, opts, Config.from_settings(self.settings))
        except SettingError as exc:
            raise UsageError(str(exc), print_help=False) from None

    def _check(self, args: list[str], opts: argparse.Namespace, config: Config) -> None:
        if opts.forget:
            self._forget(args, config, as_json=opts.json)
            return
        token = self._token(opts.user_agent, config)
        if opts.page:
            self._check_pages(args, token, as_json=opts.json)
            return
        if opts.file is None:
            report = self._check_online(args, token, config, refresh=opts.refresh)
        else:
            report = self._check_file(Path(opts.file), args, token, config)
        if report is not None:
            print(render_json(report) if opts.json else render_text(report))
            self.exitcode = report.exit_status

    @staticmethod
    def _token(option: str | None, config: Config) -> str:
        raw = option or config.robotstxt_user_agent or config.user_agent
        token = product_token(raw)
        if not token:
            raise UsageError(
                f"no product token in {raw!r} (it must start with a letter, a digit, - or _)"
            )
        if token.lower() in BROWSER_TOKENS:
            print(
                f"warning: the product token is {token!r}, from a browser-like User-Agent; "
                "robots.txt groups name crawlers, so only '*' groups will apply",
                file=sys.stderr,
            )
        return token

    @staticmethod
    def _origins(urls: list[str], *, paths_too: bool = False) -> list[str]:
        """The origin of each URL, or a UsageError that says what is wrong with one
        (``paths_too``: bare paths such as /private/x pass, for --file)."""
        for url in urls:
            problem = None if paths_too and url.startswith("/") else url_problem(url)
            if problem is not None:
                raise UsageError(problem, print_help=False)
        return [origin for url in urls if (origin := origin_of(url)) is not None]

    def _check_file(self, path: Path, urls: list[str], token: str, config: Config) -> Report:
        self._origins(urls, paths_too=True)
        try:
            body = path.read_bytes()
        except OSError as exc:
            raise UsageError(
                f"cannot read {path}: {exc.strerror or exc}", print_help=False
            ) from None
        report = OriginReport(
            origin=str(path), robots_url=None, copy=COPY_FILE, kind=RULES, source=SOURCE_FILE
        )
        robots = parse_copy(report, body, token, config)
        report.urls = [url_result(url, report, robots, token, None) for url in urls]
        return Report(token, "file", [report], report.urls)

    def _check_online(
        self, urls: list[str], token: str, config: Config, *, refresh: bool
    ) -> Report | None:
        assert self.settings is not None
        by_url = self._origins(urls)
        origins = list(dict.fromkeys(by_url))
        # Read the store before fetching, so the state shown is what a crawl starting
        # now would find; a store place the crawl would refuse is refused here too.
        store = open_for_writing(self.settings, config, "--refresh") if refresh else None
        try:
            stored = read_store(self.settings, config, origins)
            outcomes: dict[str, FetchOutcome] = {}
            if not self._one_shot("robots.txt fetch", _RobotsFetchSpider, origins, outcomes):
                return None
            now = time.time()
            policy = RobotsPolicy(config)
            found: dict[str, tuple[OriginReport, RobotsTxt | None, OriginRecord]] = {}
            for origin in origins:
                outcome = outcomes.get(origin) or FetchOutcome(UNREACHABLE, "not fetched")
                state = None if stored is None else stored[origin]
                report, evaluation, refreshed = evaluate_origin(
                    origin, outcome, state, policy, config, now, refresh=refresh
                )
                if store is not None:
                    store.put(origin, refreshed)
                    report.stored = StoredState(store.describe(), refreshed)
                robots: RobotsTxt | None = None
                if evaluation.kind == RULES:
                    robots = parse_copy(report, evaluation.body, token, config)
                found[origin] = (report, robots, refreshed)
        finally:
            if store is not None:
                store.close()
        results: list[UrlResult] = []
        for url, origin in zip(urls, by_url, strict=True):  # in command-line order
            report, robots, refreshed = found[origin]
            fresh = fresh_verdict(url, token, report, refreshed, policy, now)
            result = url_result(url, report, robots, token, fresh)
            report.urls.append(result)
            results.append(result)
        return Report(token, "fetch", [entry[0] for entry in found.values()], results, now=now)

    def _one_shot(self, what: str, spider: type[OneShotSpider], *args: Any) -> bool:
        """Run one internal crawl; False (exit status 2) when it did not start."""
        assert self.crawler_process is not None
        self.crawler_process.crawl(spider, *args)
        self.crawler_process.start()
        if self.crawler_process.bootstrap_failed:
            print(f"error: the {what} crawl did not start (see the log)", file=sys.stderr)
            self.exitcode = EXIT_USAGE
            return False
        return True

    def _check_pages(self, urls: list[str], token: str, *, as_json: bool) -> None:
        self._origins(urls)  # a URL that is not one: a usage error, before any download
        answers: dict[str, Any] = {}
        if not self._one_shot("page download", PageFetchSpider, urls, answers):
            return
        results = [page_result(url, answers.get(url), token) for url in urls]
        print(render_page_json(token, results) if as_json else render_page_text(token, results))
        self.exitcode = EXIT_WAITING if any(r.error for r in results) else EXIT_ALLOWED

    def _forget(self, args: list[str], config: Config, *, as_json: bool) -> None:
        assert self.settings is not None
        origins = list(dict.fromkeys(self._origins(args)))
        store = open_for_writing(self.settings, config, "--forget")
        now = time.time()
        try:
            description = store.describe()
            had: dict[str, str] = {}
            for origin in origins:
                # what it held; RobotsStorage.forget leaves an empty record by default,
                # which a crawl reads as unknown (it fetches robots.txt first)
                had[origin] = StoredState(description, store.get(origin)).state(now)
                store.forget(origin)
        finally:
            store.close()
        if as_json:
            forgotten = [{"origin": origin, "had": state} for origin, state in had.items()]
            doc = {"version": 1, "store": description, "forgotten": forgotten}
            print(json.dumps(doc, indent=2))
            return
        for origin, state in had.items():
            what = "nothing stored" if state == "none" else f"removed its {state} state"
            print(f"{origin}: {what} ({description})")


# -- the configured store, as the command sees it ------------------------------------------


def store_configured(settings: BaseSettings) -> bool:
    """REP_STORAGE is set (project settings or -s), or we are inside a project, where
    crawls use the default SQLite store."""
    from scrapy.utils.project import inside_project

    return settings.getpriority("REP_STORAGE") is not None or inside_project()


def read_store(
    settings: BaseSettings, config: Config, origins: list[str]
) -> dict[str, StoredState] | None:
    """What the configured store holds per origin; None when no store is configured."""
    if not store_configured(settings):
        return None
    kind = config.store_place.kind
    if kind == "sqlite":
        found = _read_sqlite(config, origins)
    elif kind == "memory":
        found = StoredState("memory", note="a memory store keeps nothing between runs")
    else:
        found = _read_other(settings, config, origins)
    # one StoredState: the same note for every origin
    return dict.fromkeys(origins, found) if isinstance(found, StoredState) else found


def _read_sqlite(config: Config, origins: list[str]) -> dict[str, StoredState] | StoredState:
    from scrapy_rep.storage.base import record_limit
    from scrapy_rep.storage.factory import check_sqlite_place
    from scrapy_rep.storage.sqlite_store import SqliteStorage, read_records_read_only

    spec, place = config.storage, config.store_place
    path = SqliteStorage.path_of(place, create=False)
    if path is None:
        return StoredState("sqlite", note="no project data directory")
    if place.location or path.parent.exists():
        # As the crawl would refuse it; only the default's data dir is made by Scrapy.
        check_sqlite_place(path, spec)
    description = f"sqlite {path}"
    if not path.exists():
        # Opening it with SqliteStorage would create it: the command must not.
        return StoredState(description, note=f"{path} does not exist")
    try:
        records = read_records_read_only(path, origins, record_limit(config.max_size))
    except (sqlite3.Error, ValueError, OverflowError) as exc:
        return StoredState(description, note=f"cannot read the store: {exc}")
    # an origin without a row has no record; one whose row does not decode maps to None
    notes = {origin: "unreadable entry" for origin, record in records.items() if record is None}
    return {
        origin: StoredState(description, records.get(origin), notes.get(origin, ""))
        for origin in origins
    }


def _read_other(
    settings: BaseSettings, config: Config, origins: list[str]
) -> dict[str, StoredState] | StoredState:
    """Redis or a custom class: through the store interface, calling only ``get``."""
    from scrapy_rep.storage.factory import create_storage

    try:
        store = create_storage(config, settings)
    except Exception as exc:  # a broken store must not hide the robots.txt verdicts
        # Never the raw setting: a redis URL holds a password (masked whatever it holds).
        from scrapy_rep.storage.redis_store import mask_url, scrub, secrets_of

        secret_free = scrub(str(exc), secrets_of(config.storage))
        shown = mask_url(config.storage) if config.store_place.kind == "redis" else config.storage
        return StoredState(shown, note=f"cannot open the store: {secret_free}")
    try:
        found = {origin: store.get(origin) for origin in origins}
        description = store.describe()
        if store.degraded:
            # Redis answers from an empty process-local fallback during an outage: say
            # so, rather than report that the store holds nothing.
            return StoredState(description, note="the store is unreachable")
        return {origin: StoredState(description, found[origin]) for origin in origins}
    finally:
        store.close()


def open_for_writing(settings: BaseSettings, config: Config, option: str) -> RobotsStorage:
    """The store a crawl would use, opened as the crawl opens it (--refresh, --forget)."""
    from scrapy_rep.storage.factory import create_storage

    if not store_configured(settings):
        raise SettingError(
            f"{option} needs a store: set REP_STORAGE (-s REP_STORAGE=...) or run it "
            "inside the Scrapy project whose store it is"
        )
    if config.store_place.kind == "memory":
        raise SettingError(f"{option}: a memory store keeps nothing between runs")
    return create_storage(config, settings)


__all__ = ["RobotsCommand"]
