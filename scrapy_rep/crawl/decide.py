"""Per-request decisions: the verdict of the origin's rules for the request's product
token, recorded in its meta; the parsed copies it comes from (a large one prepared in
steps); and Crawl-delay, kept on Scrapy's download slots."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from scrapy_rep.crawl import compat
from scrapy_rep.crawl.origins import WAITED_META_KEY, ParsedCopy
from scrapy_rep.crawl.product_token import ProductTokens
from scrapy_rep.crawl.record import NullRecorder
from scrapy_rep.crawl.stepping import run_steps
from scrapy_rep.policy.records import ALLOW_ALL, RULES
from scrapy_rep.policy.robots_policy import DISALLOW_ALL, FALLBACK
from scrapy_rep.robotstxt._robotstxt import Decision, RobotsTxt

if TYPE_CHECKING:
    from collections.abc import Callable, Generator

    from scrapy import Request
    from scrapy.crawler import Crawler

    from scrapy_rep.crawl.origins import OriginRuntime, Origins
    from scrapy_rep.policy.config import Config
    from scrapy_rep.policy.robots_policy import Evaluation

logger = logging.getLogger(__name__)

DECISION_META_KEY = "robotstxt_decision"

# The ``reason`` and ``source`` slugs of a decision, shared with ``scrapy robots --json``
# (docs/reference.md lists each). The rule-set reasons come from RobotsTxt.explain():
# "rule", "no-matching-rule", "no-matching-group", "robots.txt-always-allowed".
REASON_ALLOW_ALL = "allow-all"  # 4xx or too many redirects: no rules (RFC 9309 2.3.1.3)
REASON_FALLBACK_ALLOW = "fallback-allow"  # unreachable too long, REP_UNREACHABLE_FALLBACK
REASON_FALLBACK_DISALLOW = "fallback-disallow"
REASON_UNREACHABLE = "unreachable"  # no copy applies yet (audit mode records would-delay)
SOURCE_UNREACHABLE = "unreachable"  # beside fresh, expired, stale, fallback (policy)
# A file from this size is parsed, and a group of this many rules compiled, in bounded
# steps (crawl/stepping.py, docs/rfc.md "cost"; bench_adversarial.py: the worst shapes
# cost ~7 ms per 64 KiB, ~3 ms per 2,048 rules). 49 of the 4,231 corpus files are this large.
STEPPED_OCTETS = 65_536
STEPPED_RULES = 2_048


def stat_counter(stats: Any) -> Callable[..., None]:
    """``stats.inc_value``, as one dict update when it is Scrapy's own: Scrapy 2.19 wraps
    every access of the collector (about 2 µs a call, more than deciding a request)."""
    return compat.counter_on_stats_dict(stats) or stats.inc_value


class Decider:
    def __init__(
        self,
        crawler: Crawler,
        config: Config,
        origins: Origins,
        recorder: NullRecorder | None = None,
    ) -> None:
        self.recorder = recorder or NullRecorder()
        self.config = config
        self._count = stat_counter(crawler.stats)  # (per request: see stat_counter)
        self.origins = origins  # the parsed copies live on their runtimes
        # origin -> requests waiting for the steps preparing its copy (run by another)
        self._working: dict[str, list[Deferred[None]]] = {}
        # (its bound method, not a wrapper: it runs on every request)
        self.tokens = ProductTokens(config, crawler)
        self.token_for = self.tokens.token_for
        self.slot_delays = SlotDelays(crawler, config.max_crawl_delay)

    def parsed(self, rt: OriginRuntime, body: bytes) -> RobotsTxt:
        """The parsed copy of *body*: the origin's (made by decide()), else parsed here (small)."""
        copy = rt.parsed
        if copy is None or copy.body is not body:
            copy = self._made(rt, body, RobotsTxt.parse(body, max_size=self.config.max_size))
        return copy.robots

    def _made(self, rt: OriginRuntime, body: bytes, robots: RobotsTxt) -> ParsedCopy:
        # (the level is asked first: the issue counts are made on demand)
        if logger.isEnabledFor(logging.DEBUG) and robots.issue_counts:
            kinds = ", ".join(f"{kind} {n}" for kind, n in robots.issue_counts.items())
            logger.debug(
                "robots.txt of %s: %d line(s) not taken as written (%s)",
                rt.origin,
                sum(robots.issue_counts.values()),
                kinds,
            )
        copy = ParsedCopy(body, robots)
        self.origins.note_parsed(rt, copy)
        return copy

    def _ready(self, rt: OriginRuntime, body: bytes, token: str) -> RobotsTxt | None:
        """The parsed copy, if it can answer for *token* without costly work on the
        reactor: at hand and used by *token* before (the common case), or small."""
        copy = rt.parsed
        if copy is None or copy.body is not body:
            if len(body) >= STEPPED_OCTETS:
                return None
            copy = self._made(rt, body, RobotsTxt.parse(body, max_size=self.config.max_size))
        if token not in copy.ready:
            if copy.robots.first_use_rules(token) >= STEPPED_RULES:
                return None
            copy.ready.add(token)
        return copy.robots

    async def robots_for(self, rt: OriginRuntime, body: bytes, token: str) -> RobotsTxt:
        """The parsed copy of *body* ready to answer for *token*, a large file or group
        prepared in bounded steps (crawl/stepping.py); one preparation per origin at a
        time, its other requests await it."""
        origin = rt.origin
        while (robots := self._ready(rt, body, token)) is None:
            waiters = self._working.get(origin)
            if waiters is not None:  # another request of this origin is doing it
                waiter: Deferred[None] = Deferred()
                waiters.append(waiter)
                await maybe_deferred_to_future(waiter)
                continue  # (its copy may be of another body, or for another token)
            self._working[origin] = []
            copy = rt.parsed if rt.parsed is not None and rt.parsed.body is body else None
            try:
                known = None if copy is None else copy.robots
                robots = await run_steps(_prepared(known, body, self.config.max_size, token))
                if copy is None:
                    copy = self._made(rt, body, robots)
                elif rt.parsed is not copy:
                    self.origins.note_parsed(rt, copy)  # (unloaded during the steps)
                copy.ready.add(token)
            finally:
                # (after the copy is kept: a waiter resumed at once finds it ready)
                for waiter in self._working.pop(origin):
                    waiter.callback(None)
            return robots
        return robots

    async def parsed_for(self, origin: str, body: bytes, request: Request) -> RobotsTxt:
        """The parsed copy of *body* ready for *request*'s crawler, as decide() gets it:
        what ``robots_parsed`` receivers get, so their queries cost the reactor nothing."""
        return await self.robots_for(self.origins.get(origin), body, self.token_for(request))

    async def decide(self, request: Request, evaluation: Evaluation, rt: OriginRuntime) -> None:
        """Record the decision on the request; raise IgnoreRequest to drop it. Awaits
        only when the origin's robots.txt needs work in steps first (robots_for)."""
        if self.decide_now(request, evaluation, rt):
            return
        token = self.token_for(request)
        robots = await self.robots_for(rt, evaluation.body, token)
        self._decide_rules(request, evaluation, rt, robots, token)

    def decide_now(self, request: Request, evaluation: Evaluation, rt: OriginRuntime) -> bool:
        """``decide`` without awaiting: False (and nothing done) when the origin's
        rules need work in steps first (robots_for). The per-request path."""
        token = self.token_for(request)
        if evaluation.kind == RULES and evaluation.ready:
            # (the common case inline: the kept copy, its group ready for this token)
            copy = rt.parsed
            if copy is not None and copy.body is evaluation.body and token in copy.ready:
                self._decide_rules(request, evaluation, rt, copy.robots, token)
                return True
            robots = self._ready(rt, evaluation.body, token)
            if robots is None:
                return False
            self._decide_rules(request, evaluation, rt, robots, token)
            return True
        # Every decision has the same keys (docs: "Meta and stats"); no rule decided here.
        decision = self._decision(request, evaluation, rt, token)
        if not evaluation.ready:  # audit mode only: an enforcing crawl would wait
            self._count("robotstxt/audit/would_delay")
            request.meta[DECISION_META_KEY] = decision
            self.recorder.decided(request, decision, evaluation, rt.record)
            return True
        if evaluation.kind == ALLOW_ALL:
            decision["reason"] = (
                REASON_FALLBACK_ALLOW if evaluation.source == FALLBACK else REASON_ALLOW_ALL
            )
        else:
            assert evaluation.kind == DISALLOW_ALL
            decision["allowed"] = False
            decision["reason"] = REASON_FALLBACK_DISALLOW
        self._record(request, evaluation, rt, decision)
        return True

    def _decision(
        self,
        request: Request,
        evaluation: Evaluation,
        rt: OriginRuntime,
        token: str,
        explained: Decision | None = None,
    ) -> dict[str, Any]:
        """The decision meta; the rule set's verdict when ``explained`` is given."""
        waited = request.meta.get(WAITED_META_KEY, 0.0)
        record = rt.record
        if explained is None:
            allowed, reason, line, rule, groups = True, REASON_UNREACHABLE, None, None, []
        else:
            allowed, reason = explained.allowed, explained.reason
            line, rule, groups = explained.line, explained.rule, list(explained.groups)
        return {
            "allowed": allowed,
            "reason": reason,
            "source": evaluation.source or SOURCE_UNREACHABLE,
            "line": line,
            "rule": rule,
            "groups": groups,
            "origin": rt.origin,
            "product_token": token,
            "robots": record.last_outcome if record is not None else "",
            # Microseconds, so that a request held even briefly shows a wait above 0.
            "waited": round(waited, 6) if waited else 0.0,
        }

    def _decide_rules(
        self,
        request: Request,
        evaluation: Evaluation,
        rt: OriginRuntime,
        robots: RobotsTxt,
        token: str,
    ) -> None:
        explained = robots.explain(request.url, token)
        decision = self._decision(request, evaluation, rt, token, explained)
        if self.config.crawl_delay:
            # asked once per copy and token, not per request
            delay = rt.crawl_delay
            if delay is None or delay[0] is not evaluation.body or delay[1] != token:
                delay = rt.crawl_delay = (evaluation.body, token, robots.crawl_delay(token))
            if delay[2]:
                self.slot_delays.apply(request, delay[2])
        if explained.allowed:  # (_record's common case)
            request.meta[DECISION_META_KEY] = decision
            self.recorder.decided(request, decision, evaluation, rt.record)
            self._count("robotstxt/allowed")
            return
        self._record(request, evaluation, rt, decision)

    def _record(
        self, request: Request, evaluation: Evaluation, rt: OriginRuntime, decision: dict[str, Any]
    ) -> None:
        request.meta[DECISION_META_KEY] = decision
        self.recorder.decided(request, decision, evaluation, rt.record)
        if decision["allowed"]:
            self._count("robotstxt/allowed")
            return
        if not self.config.enforce:
            self._count("robotstxt/audit/would_forbid")
            logger.debug(
                "Would be forbidden by robots.txt (audit mode): %s %s", request, _describe(decision)
            )
            return
        rt.dropped += 1
        self._count("robotstxt/forbidden")
        if evaluation.source == FALLBACK:
            self._count("robotstxt/forbidden/unreachable_fallback")
        logger.debug(
            "Forbidden by robots.txt: %s %s",
            request,
            _describe(decision),
            extra={"spider": self.tokens.crawler.spider},
        )
        raise IgnoreRequest("Forbidden by robots.txt")


def _prepared(
    robots: RobotsTxt | None, body: bytes, max_size: int, token: str
) -> Generator[None, None, RobotsTxt]:
    """Steps: *body* parsed (unless *robots* is its copy), then *token*'s group ready.
    The reactor may query *robots* between steps: RobotsTxt swaps what it builds whole."""
    if robots is None:
        robots = yield from RobotsTxt.parse_steps(body, max_size=max_size)
    yield from robots.prepare_steps(token)
    return robots


def _describe(decision: dict[str, Any]) -> str:
    if decision.get("line") is not None:
        groups = ", ".join(decision.get("groups") or []) or "-"
        return f"(line {decision['line']}: {decision['rule']}; group: {groups})"
    return f"({decision.get('reason')})"


class SlotDelays:
    """Crawl-delay kept on Scrapy's download slots (docs/behaviour.md, "Crawl-delay": a
    minimum spacing): the delay raised and the jitter narrowed, kept for the slots
    Scrapy makes for that key later, and re-asserted before each download (AutoThrottle
    rewrites the slot's delay on every response)."""

    def __init__(self, crawler: Crawler, max_delay: float) -> None:
        self.crawler = crawler
        self.max_delay = max_delay
        # slot key -> crawl-delay we must keep on it (see on_reached_downloader)
        self._delays: dict[str, float] = {}

    def apply(self, request: Request, delay: float) -> None:
        """Keep *request*'s download slot at least *delay* (<= REP_MAX_CRAWL_DELAY) apart."""
        if delay <= 0:
            return
        delay = min(delay, self.max_delay)
        downloader = compat.downloader_of(self.crawler)
        if downloader is None:
            return
        key = downloader.get_slot_key(request)
        if self._delays.get(key, 0.0) >= delay:
            return
        if not self._delays:
            # Connected at the first Crawl-delay: a receiver costs every request a dispatch.
            self.crawler.signals.connect(
                self.on_reached_downloader, signal=signals.request_reached_downloader
            )
        self._delays[key] = delay
        # (also for the slots Scrapy makes later: a slot is collected after 60 s idle)
        slot_delay, jitter = compat.new_slot_timing(downloader, key)
        slot_delay = max(slot_delay, delay)
        compat.keep_new_slot_timing(
            downloader, key, slot_delay, _bounded_jitter(slot_delay, jitter, delay)
        )
        _hold_slot_to(compat.download_slot(downloader, key), delay)
        self.crawler.stats.set_value(f"robotstxt/crawl_delay/{key}", delay)

    def on_reached_downloader(self, request: Request, spider: Any = None) -> None:
        """Re-assert Crawl-delay before each download: AutoThrottle rewrites slot.delay
        on every response and floors it only at DOWNLOAD_DELAY (connected by the first)."""
        key = request.meta.get("download_slot")
        delay = None if key is None else self._delays.get(key)
        downloader = compat.downloader_of(self.crawler)
        if delay is not None and downloader is not None:
            _hold_slot_to(compat.download_slot(downloader, key), delay)


def _bounded_jitter(slot_delay: float, jitter: float, crawl_delay: float) -> float:
    """The largest jitter <= ``jitter`` whose shortest gap is still ``crawl_delay``:
    Scrapy varies each slot delay by +/- ``jitter``, and Crawl-delay is a minimum, so
    ``slot_delay * (1 - jitter) >= crawl_delay``."""
    if jitter <= 0 or slot_delay <= 0:
        return max(jitter, 0.0)
    return max(0.0, min(jitter, 1.0 - crawl_delay / slot_delay))


def _hold_slot_to(slot: Any, crawl_delay: float) -> None:
    if slot is None:  # never made, or collected idle
        return
    slot_delay = compat.raise_slot_delay(slot, crawl_delay)
    jitter = compat.slot_jitter(slot)
    if jitter:
        compat.set_slot_jitter(slot, _bounded_jitter(slot_delay, jitter, crawl_delay))
