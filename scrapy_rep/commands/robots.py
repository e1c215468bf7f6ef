"""``scrapy robots URL [URL ...]``: what robots.txt says about URLs, and why.

Without ``--file`` each distinct origin's robots.txt is fetched by a real, tiny Scrapy
crawl, through ``RobotsFetcher`` like the middleware does, so proxies, TLS, headers,
download handlers and settings (``-s DOWNLOAD_TIMEOUT=...``) apply, and the same
status, redirect and size rules give the same outcome a crawl would get. The result is
then put through ``RobotsPolicy`` together with what the configured store already holds
(read-only: the command never writes to a store), so an unreachable robots.txt is
reported as what a crawl would do now: hold the requests, and what applies later.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy import Spider
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet.defer import DeferredList

from scrapy_rep.commands.output import (
    ALLOWED,
    COPY_FALLBACK,
    COPY_FETCHED,
    COPY_FILE,
    COPY_STORED,
    DISALLOWED,
    EXIT_ERROR,
    HOLD,
    WAIT,
    OriginReport,
    Report,
    StoredState,
    UrlResult,
    Verdict,
    render_json,
    render_text,
)
from scrapy_rep.commands.store_view import read_store
from scrapy_rep.policy.config import Config, SettingError
from scrapy_rep.policy.origin import origin_of, robots_url
from scrapy_rep.policy.records import ALLOW_ALL, RULES, UNREACHABLE
from scrapy_rep.policy.robots_policy import (
    DISALLOW_ALL,
    FALLBACK,
    STALE,
    FetchOutcome,
    RobotsPolicy,
)
from scrapy_rep.robotstxt._robotstxt import RobotsTxt
from scrapy_rep.robotstxt._useragent import product_token

if TYPE_CHECKING:
    import argparse
    from collections.abc import AsyncIterator

    from scrapy.settings import BaseSettings

# Above every named Scrapy priority ("cmdline" is 40): the internal crawl must not run
# a robots.txt middleware whatever the project or -s says, or it would fetch robots.txt
# itself and could hold the command's own requests.
_FORCED_PRIORITY = 100
_BROWSER_TOKENS = frozenset({"mozilla", "opera", "safari", "chrome", "applewebkit"})


class _RobotsFetchSpider(Spider):
    """Fetches robots.txt of the given origins and records the outcomes; yields nothing."""

    name = "scrapy_rep_robots"

    def __init__(
        self, origins: list[str], outcomes: dict[str, FetchOutcome], **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.origins = origins
        self.outcomes = outcomes

    @classmethod
    def update_settings(cls, settings: BaseSettings) -> None:
        super().update_settings(settings)
        settings.set("ROBOTSTXT_OBEY", False, priority=_FORCED_PRIORITY)
        # A one-shot check should not open ports; at spider priority, so -s still wins.
        settings.set("TELNETCONSOLE_ENABLED", False, priority="spider")
        settings.set("REMOTE_CONTROL_ENABLED", False, priority="spider")

    async def start(self) -> AsyncIterator[Any]:
        from scrapy_rep.crawl.fetcher import RobotsFetcher

        fetcher = RobotsFetcher(
            self.crawler, Config.from_settings(self.crawler.settings), time.time
        )
        # Deferreds, not asyncio tasks: this works under any reactor a project picks.
        pending = [deferred_from_coro(self._fetch(fetcher, origin)) for origin in self.origins]
        await maybe_deferred_to_future(DeferredList(pending, consumeErrors=True))
        return
        yield  # an async generator that yields no request

    async def _fetch(self, fetcher: Any, origin: str) -> None:
        try:
            self.outcomes[origin] = await fetcher.fetch(origin)
        except Exception as exc:  # the fetcher classifies errors; this is a bug guard
            self.logger.exception("fetching robots.txt of %s failed", origin)
            self.outcomes[origin] = FetchOutcome(UNREACHABLE, type(exc).__name__)


class RobotsCommand(ScrapyCommand):
    requires_project = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_LEVEL": "WARNING"}

    def syntax(self) -> str:
        return "[options] URL [URL ...]"

    def short_desc(self) -> str:
        return "Check URLs against robots.txt (scrapy-rep)"

    def long_desc(self) -> str:
        return (
            "Check URLs against their origin's robots.txt as scrapy-rep would: the verdict, "
            "the deciding line and rule, the group used, crawl-delay, request-rate, content "
            "signals and sitemaps. robots.txt is fetched through Scrapy (settings, proxies "
            "and download handlers apply) and the fetch outcome is shown; with a store "
            "configured (REP_STORAGE, or the default SQLite store inside a project) the "
            "origin's stored state is shown too, read-only. Exit status: 0 if every URL is "
            "allowed; 1 if any URL is disallowed; 2 on a usage error, or when some robots.txt "
            "is unreachable (a crawl would hold those requests) and no URL is disallowed."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--user-agent",
            metavar="TOKEN",
            help="product token to check for (default: ROBOTSTXT_USER_AGENT, else USER_AGENT; "
            "a full User-Agent string is reduced to its leading token)",
        )
        parser.add_argument(
            "--file",
            metavar="ROBOTS_TXT",
            help="parse this local robots.txt instead of fetching (no network); URLs may "
            "then also be bare paths such as /private/x",
        )
        parser.add_argument(
            "--json", action="store_true", help="print one JSON document for scripts"
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        if not args:
            raise UsageError("give at least one URL")
        try:
            config = Config.from_settings(self.settings)
        except SettingError as exc:
            raise UsageError(str(exc), print_help=False) from None
        token = self._token(opts.user_agent, config)
        report: Report | None
        if opts.file is not None:
            report = self._check_file(Path(opts.file), args, token, config)
        else:
            report = self._check_online(args, token, config)
        if report is None:
            return
        print(render_json(report) if opts.json else render_text(report))
        self.exitcode = report.exit_status

    # -- inputs ----------------------------------------------------------------------

    @staticmethod
    def _token(option: str | None, config: Config) -> str:
        raw = option or config.robotstxt_user_agent or config.user_agent
        token = product_token(raw)
        if not token:
            raise UsageError(f"no product token in {raw!r} (it must start with [A-Za-z_-])")
        if token.lower() in _BROWSER_TOKENS:
            print(
                f"warning: the product token is {token!r}, from a browser-like User-Agent; "
                "robots.txt groups name crawlers, so only '*' groups will apply",
                file=sys.stderr,
            )
        return token

    # -- --file ----------------------------------------------------------------------

    def _check_file(self, path: Path, urls: list[str], token: str, config: Config) -> Report:
        for url in urls:
            if not url.startswith("/") and origin_of(url) is None:
                raise UsageError(f"not an http(s) URL or a path: {url!r}")
        try:
            body = path.read_bytes()
        except OSError as exc:
            raise UsageError(
                f"cannot read {path}: {exc.strerror or exc}", print_help=False
            ) from None
        report = OriginReport(origin=str(path), robots_url=None, copy=COPY_FILE, kind=RULES)
        robots = _describe_copy(report, body, token, config)
        results = [
            UrlResult(url, origin_of(url), _verdict(url, token, RULES, robots)) for url in urls
        ]
        report.urls = results
        return Report(token, "file", [report], results)

    # -- fetching --------------------------------------------------------------------

    def _check_online(self, urls: list[str], token: str, config: Config) -> Report | None:
        assert self.settings is not None
        origins: list[str] = []
        by_url: list[tuple[str, str]] = []
        for url in urls:
            origin = origin_of(url)
            if origin is None:
                raise UsageError(f"not an http(s) URL: {url!r}")
            if origin not in origins:
                origins.append(origin)
            by_url.append((url, origin))
        # Read the store before fetching, so the state shown is what a crawl starting
        # now would find.
        stored = read_store(self.settings, config, origins)
        outcomes = self._fetch_all(origins)
        if outcomes is None:
            return None
        now = time.time()
        policy = RobotsPolicy(config)
        reports: dict[str, OriginReport] = {}
        parsed: dict[str, RobotsTxt | None] = {}
        for origin in origins:
            outcome = outcomes.get(origin) or FetchOutcome(UNREACHABLE, "not fetched")
            state = None if stored is None else stored[origin]
            report, robots = _evaluate(origin, outcome, state, policy, token, config, now)
            reports[origin], parsed[origin] = report, robots
        results: list[UrlResult] = []
        for url, origin in by_url:
            report = reports[origin]
            result = _url_result(url, origin, report, parsed[origin], token)
            report.urls.append(result)
            results.append(result)
        return Report(token, "fetch", list(reports.values()), results, now=now)

    def _fetch_all(self, origins: list[str]) -> dict[str, FetchOutcome] | None:
        assert self.crawler_process is not None
        outcomes: dict[str, FetchOutcome] = {}
        self.crawler_process.crawl(_RobotsFetchSpider, origins=origins, outcomes=outcomes)
        self.crawler_process.start()
        if self.crawler_process.bootstrap_failed:
            print("error: the robots.txt fetch crawl did not start (see the log)", file=sys.stderr)
            self.exitcode = EXIT_ERROR
            return None
        return outcomes


# -- evaluation ------------------------------------------------------------------------


def _evaluate(
    origin: str,
    outcome: FetchOutcome,
    stored: StoredState | None,
    policy: RobotsPolicy,
    token: str,
    config: Config,
    now: float,
) -> tuple[OriginReport, RobotsTxt | None]:
    """Put the fetch outcome through the policy, on top of the stored record."""
    previous = None if stored is None else stored.record
    record = policy.after_fetch(previous, outcome, now)
    report = OriginReport(
        origin=origin,
        robots_url=robots_url(origin),
        fetch=outcome,
        stored=stored,
        truncated=outcome.truncated,
        max_size=config.max_size,
        unreachable_wait=config.unreachable_wait,
    )
    if outcome.kind == UNREACHABLE and record.next_retry_at is not None:
        report.retry_in = max(0.0, record.next_retry_at - now)
    if (
        previous is not None
        and not previous.unreachable
        and previous.kind is not None
        and now < previous.expires_at
        and (previous.kind, previous.body) != (outcome.kind, outcome.body)
    ):
        # A crawl sharing the store would not fetch at all before the stored copy
        # expires, so the fetched result (even an unreachable one) does not apply yet.
        report.stored_differs = True
    evaluation = policy.evaluate(record, now)
    if not evaluation.ready:
        # Unreachable and still within REP_UNREACHABLE_WAIT: what applies once it ends.
        assert record.unreachable_since is not None
        report.action = HOLD
        report.wait_until = record.unreachable_since + config.unreachable_wait
        evaluation = policy.evaluate(record, report.wait_until)
        assert evaluation.ready
        report.after_wait_copy = COPY_STORED if evaluation.source == STALE else COPY_FALLBACK
        report.after_wait_kind = evaluation.kind
    else:
        report.copy = {STALE: COPY_STORED, FALLBACK: COPY_FALLBACK}.get(
            evaluation.source, COPY_FETCHED
        )
        report.kind = evaluation.kind
    if evaluation.source == STALE:
        report.copy_fetched_at = record.fetched_at
    robots = None
    if evaluation.kind == RULES:
        robots = _describe_copy(report, evaluation.body, token, config)
    return report, robots


def _describe_copy(report: OriginReport, body: bytes, token: str, config: Config) -> RobotsTxt:
    robots = RobotsTxt.parse(body, max_size=config.max_size)
    report.parsed_bytes = min(len(body), config.max_size)
    report.max_size = config.max_size
    report.truncated = report.truncated or len(body) > config.max_size
    # The group a URL's decision names is the one the token obeys; any path that is
    # not /robots.txt shows it.
    report.group = next(iter(robots.explain("/", token).groups), None)
    report.crawl_delay = robots.crawl_delay(token)
    report.request_rate = robots.request_rate(token)
    report.content_signals = robots.content_signals(token)
    report.sitemaps = list(robots.sitemaps)
    return robots


def _verdict(url: str, token: str, kind: str | None, robots: RobotsTxt | None) -> Verdict:
    if kind == RULES and robots is not None:
        decision = robots.explain(url, token)
        return Verdict(
            ALLOWED if decision.allowed else DISALLOWED,
            decision.line,
            decision.rule,
            next(iter(decision.groups), None),
            decision.reason,
        )
    if kind == ALLOW_ALL:
        return Verdict(ALLOWED, reason="allow-all")
    assert kind == DISALLOW_ALL
    return Verdict(DISALLOWED, reason="fallback-disallow")


def _url_result(
    url: str, origin: str, report: OriginReport, robots: RobotsTxt | None, token: str
) -> UrlResult:
    if report.action == HOLD:
        later = _verdict(url, token, report.after_wait_kind, robots)
        if report.after_wait_copy == COPY_FALLBACK:
            later = _fallback_reason(later)
        return UrlResult(url, origin, Verdict(WAIT, reason="unreachable"), later)
    verdict = _verdict(url, token, report.kind, robots)
    if report.copy == COPY_FALLBACK:
        verdict = _fallback_reason(verdict)
    return UrlResult(url, origin, verdict)


def _fallback_reason(verdict: Verdict) -> Verdict:
    reason = "fallback-allow" if verdict.verdict == ALLOWED else "fallback-disallow"
    return Verdict(verdict.verdict, reason=reason)


__all__ = ["RobotsCommand"]
