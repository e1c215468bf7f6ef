"""What a crawl would do with each URL now (from a fetch outcome and the stored record),
and the page-level directives of a downloaded page (``--page``, docs/page.md).

The verdict shown is the crawl's: a crawl whose store holds a copy still fresh (or an
unreachable spell whose next try is not due) applies it without fetching (RFC 9309 2.4
caching, docs/behaviour.md); the fetched copy's verdict is shown beside it when it differs.
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy.http import HtmlResponse, Response
from scrapy.utils.response import get_base_url

from scrapy_rep.commands.output import (
    ALLOWED,
    COPY_FALLBACK,
    COPY_STORED,
    DISALLOWED,
    HOLD,
    WAIT,
    OriginReport,
    PageResult,
    UrlResult,
    Verdict,
)
from scrapy_rep.crawl.decide import (
    REASON_ALLOW_ALL,
    REASON_FALLBACK_ALLOW,
    REASON_FALLBACK_DISALLOW,
    REASON_UNREACHABLE,
    SOURCE_UNREACHABLE,
)
from scrapy_rep.policy.origin import origin_of, robots_url
from scrapy_rep.policy.records import ALLOW_ALL, RULES, UNREACHABLE
from scrapy_rep.policy.robots_policy import DISALLOW_ALL, FALLBACK, FRESH, STALE
from scrapy_rep.robotstxt._page import NofollowLinks, page_directives
from scrapy_rep.robotstxt._robotstxt import RobotsTxt

if TYPE_CHECKING:
    from scrapy_rep.commands.output import StoredState
    from scrapy_rep.policy.config import Config
    from scrapy_rep.policy.records import OriginRecord
    from scrapy_rep.policy.robots_policy import Evaluation, FetchOutcome, RobotsPolicy


def url_problem(url: str) -> str | None:
    """Why ``url`` is not an http(s) URL robots.txt can be checked for, or None."""
    if not url.strip():
        return "an empty URL"
    if url.startswith("/") and not url.startswith("//"):
        return (
            f"{url!r} is a path, not a URL: give the whole URL (http://HOST{url}), "
            "or check paths against a local file with --file"
        )
    split = urlsplit(url.strip())
    scheme = split.scheme.lower()
    if "://" not in url:
        if scheme in ("http", "https"):
            return f"{url!r} is not a URL: write {scheme}://HOST/PATH"
        return f"{url!r} has no scheme: did you mean 'http://{url.lstrip('/')}'?"
    if scheme not in ("http", "https"):
        return f"{url!r}: robots.txt applies to http and https URLs, not {scheme}"
    if not split.hostname:
        return f"{url!r} has no host name"
    try:
        split.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        port = split.netloc.rpartition(":")[2]
        return f"{url!r}: the port {port!r} is not a number from 0 to 65535"
    if origin_of(url) is None:
        return f"{url!r} is not a valid http(s) URL"
    return None


def evaluate_origin(
    origin: str,
    outcome: FetchOutcome,
    stored: StoredState | None,
    policy: RobotsPolicy,
    config: Config,
    now: float,
    *,
    refresh: bool = False,
) -> tuple[OriginReport, Evaluation, OriginRecord]:
    """The report of what a crawl would do; what applies now (or once the origin's wait
    ends); the refreshed record (the fetch on top of what is stored: what --refresh writes)."""
    previous = None if stored is None else stored.record
    refreshed = policy.after_fetch(previous, outcome, now)
    # a crawl starting now acts on the stored record without fetching
    uses_stored = (
        previous is not None and not refresh and not policy.evaluate(previous, now).fetch_due
    )
    record = previous if uses_stored and previous is not None else refreshed
    report = OriginReport(
        origin=origin,
        robots_url=robots_url(origin),
        fetch=outcome,
        stored=stored,
        truncated=outcome.truncated,
        max_size=config.max_size,
        unreachable_wait=config.unreachable_wait,
        uses_stored=uses_stored,
        refreshed=refresh,
    )
    if record.unreachable and record.next_retry_at is not None:
        report.retry_in = max(0.0, record.next_retry_at - now)
    if uses_stored and previous is not None:
        report.copy_fetched_at = previous.fetched_at
        # Only a fetch that brought a copy can differ from the stored copy: a failed
        # fetch (503 now, 503 stored) has no copy to compare, and --refresh would
        # store no rules from it.
        report.stored_differs = outcome.kind != UNREACHABLE and (
            (previous.kind, previous.body) != (outcome.kind, outcome.body)
        )
    evaluation = policy.evaluate(record, now)
    if not evaluation.ready:
        # Unreachable and still within REP_UNREACHABLE_WAIT: what applies once it ends.
        assert record.unreachable_since is not None
        report.action = HOLD
        report.wait_until = record.unreachable_since + config.unreachable_wait
        later = policy.evaluate(record, report.wait_until)
        assert later.ready
        report.after_wait_copy = COPY_STORED if later.source == STALE else COPY_FALLBACK
        report.after_wait_kind = later.kind
        report.after_wait_source = later.source
        if later.source == STALE:
            report.copy_fetched_at = record.fetched_at
        return report, later, refreshed
    report.source = evaluation.source
    report.kind = evaluation.kind
    if evaluation.source == FALLBACK:
        report.copy = COPY_FALLBACK
    elif evaluation.source == STALE or uses_stored:
        report.copy = COPY_STORED
        report.copy_fetched_at = record.fetched_at
        report.copy_expires_at = record.expires_at if evaluation.source == FRESH else None
    return report, evaluation, refreshed


def parse_copy(report: OriginReport, body: bytes, token: str, config: Config) -> RobotsTxt:
    """Parse the copy that decides and note what the report shows about it."""
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
    report.issues = [issue.as_dict() for issue in robots.issues]
    report.issue_counts = dict(robots.issue_counts)
    return robots


def verdict(
    url: str, token: str, kind: str | None, robots: RobotsTxt | None, source: str
) -> Verdict:
    """The verdict of one copy (rules, allow-all or disallow-all) for ``url``."""
    if kind == RULES and robots is not None:
        decision = robots.explain(url, token)
        return Verdict(
            ALLOWED if decision.allowed else DISALLOWED,
            decision.line,
            decision.rule,
            next(iter(decision.groups), None),
            decision.reason,
            source,
        )
    if kind == ALLOW_ALL:
        reason = REASON_FALLBACK_ALLOW if source == FALLBACK else REASON_ALLOW_ALL
        return Verdict(ALLOWED, reason=reason, source=source)
    assert kind == DISALLOW_ALL
    return Verdict(DISALLOWED, reason=REASON_FALLBACK_DISALLOW, source=source)


def url_result(
    url: str, report: OriginReport, robots: RobotsTxt | None, token: str, fresh: Verdict | None
) -> UrlResult:
    origin = origin_of(url)  # None for a bare path (--file)
    if report.action == HOLD:
        later = verdict(
            url, token, report.after_wait_kind, robots, report.after_wait_source or FALLBACK
        )
        now = Verdict(WAIT, reason=REASON_UNREACHABLE, source=SOURCE_UNREACHABLE)
        return UrlResult(url, origin, now, later, _if_differs(fresh, now))
    now = verdict(url, token, report.kind, robots, report.source)
    # robots.txt usage preferences (docs/usage.md) apply only where its rules decide
    usage = None
    if report.kind == RULES and robots is not None:
        usage = robots.usage(url, token).to_json()
    return UrlResult(url, origin, now, fresh=_if_differs(fresh, now), usage=usage)


_COMPARED = attrgetter("verdict", "reason", "line", "rule")


def _if_differs(fresh: Verdict | None, now: Verdict) -> Verdict | None:
    return None if fresh is None or _COMPARED(fresh) == _COMPARED(now) else fresh


def fresh_verdict(
    url: str,
    token: str,
    report: OriginReport,
    refreshed: OriginRecord,
    policy: RobotsPolicy,
    now: float,
) -> Verdict | None:
    """What the freshly fetched copy says about ``url`` (what --refresh would apply), when
    a crawl would act on the stored copy instead (None otherwise)."""
    outcome = report.fetch
    if not report.uses_stored or outcome is None:
        return None
    if outcome.kind == UNREACHABLE:
        evaluation = policy.evaluate(refreshed, now)
        if not evaluation.ready:
            return Verdict(WAIT, reason=REASON_UNREACHABLE, source=SOURCE_UNREACHABLE)
        kind, body, source = evaluation.kind, evaluation.body, evaluation.source
    else:
        kind, body, source = outcome.kind, outcome.body, FRESH
    robots = RobotsTxt.parse(body, max_size=report.max_size) if kind == RULES else None
    return verdict(url, token, kind, robots, source)


def page_result(url: str, answer: Any, token: str) -> PageResult:
    """The directives of *answer* (a Response, a Failure or None) for *token*."""
    if not isinstance(answer, Response):
        error = "not downloaded" if answer is None else answer.getErrorMessage()
        return PageResult(url, error=error)
    html = answer if isinstance(answer, HtmlResponse) else None
    found = page_directives(
        answer.headers.getlist(b"X-Robots-Tag"), None if html is None else html.body, token
    )
    result = PageResult(
        url,
        final_url=answer.url,
        status=answer.status,
        content_type=(answer.headers.get(b"Content-Type") or b"").decode("latin-1"),
        directives=found,
    )
    if html is not None:
        links = NofollowLinks(html.body, get_base_url(html)).scan()
        result.rel_counts = dict(links.rel_counts)
        result.nofollow_only = sorted(u for u in links.nofollow if links.nofollow_only(u))
    return result
