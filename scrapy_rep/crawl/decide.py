"""Per-request decisions: the verdict of the origin's rules for the request's product
token (crawl/product_token.py), recorded in its meta, and the crawl-delay; the parsed
copies of robots.txt the verdicts come from (a large one prepared in steps)."""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from scrapy_rep.crawl.product_token import ProductTokens
from scrapy_rep.crawl.record import NullRecorder
from scrapy_rep.crawl.runtime import WAITED_META_KEY
from scrapy_rep.crawl.slot_delay import SlotDelays
from scrapy_rep.crawl.stat_counter import stat_counter
from scrapy_rep.crawl.stepping import run_steps
from scrapy_rep.policy.records import ALLOW_ALL, RULES
from scrapy_rep.policy.robots_policy import DISALLOW_ALL, FALLBACK
from scrapy_rep.robotstxt._robotstxt import Decision, RobotsTxt

if TYPE_CHECKING:
    from collections.abc import Callable, Generator

    from scrapy import Request
    from scrapy.crawler import Crawler

    from scrapy_rep.crawl.runtime import OriginRuntime
    from scrapy_rep.policy.config import Config
    from scrapy_rep.policy.robots_policy import Evaluation

logger = logging.getLogger("scrapy_rep")

DECISION_META_KEY = "robotstxt_decision"

# The ``reason`` and ``source`` slugs of a decision, shared with ``scrapy robots --json``
# (docs/reference.md lists each). The rule-set reasons come from RobotsTxt.explain():
# "rule", "no-matching-rule", "no-matching-group", "robots.txt-always-allowed".
REASON_ALLOW_ALL = "allow-all"  # 4xx or too many redirects: no rules (RFC 9309 2.3.1.3)
REASON_FALLBACK_ALLOW = "fallback-allow"  # unreachable too long, REP_UNREACHABLE_FALLBACK
REASON_FALLBACK_DISALLOW = "fallback-disallow"
REASON_UNREACHABLE = "unreachable"  # no copy applies yet (audit mode records would-delay)
SOURCE_UNREACHABLE = "unreachable"  # beside fresh, expired, stale, fallback (policy)
_PARSED_CACHE_SIZE = 4096
# A parsed copy: (the robots.txt body, its RobotsTxt, the tokens whose group is ready)
_Copy = tuple[bytes, RobotsTxt, set[str]]
# docs/rfc.md, "cost": the reactor never waits more than 25 ms on robots.txt work. Pure Python
# parses the worst 500 KiB shapes (18,285 user-agent lines with signals, 17,680
# one-rule groups) in 30-90 ms and compiles the worst groups of tens of thousands of
# rules in as long, so a file from this size is parsed, and a group of this many
# rules compiled for its first check, in bounded steps with
# the reactor running other work between them (crawl/stepping.py; bench_adversarial.py:
# the worst shapes cost ~7 ms per 64 KiB, ~3 ms per 2,048 rules). Real files are
# parsed at once: 49 of the 4,231 corpus files are this large.
STEPPED_OCTETS = 65_536
STEPPED_RULES = 2_048


class Decider:
    def __init__(
        self, crawler: Crawler, config: Config, recorder: NullRecorder | None = None
    ) -> None:
        self.crawler = crawler
        self.recorder = recorder or NullRecorder()  # the compliance record (crawl/record.py)
        self.config = config
        assert crawler.stats is not None
        self.stats = crawler.stats
        self._count = stat_counter(crawler.stats)  # (per request: crawl/stat_counter.py)
        # origin -> its parsed copy: (body, RobotsTxt, tokens whose group is ready)
        self._parsed: OrderedDict[str, _Copy] = OrderedDict()
        # origin -> requests waiting for the steps preparing its copy (run by another)
        self._working: dict[str, list[Deferred[None]]] = {}
        # (origin, copy): the copy the last steps prepared, or the last one the cache
        # could not keep (on_kept said no). parsed() and the next decisions use it, so
        # a copy made is never made again at once (a large file parsed twice in steps,
        # the copy robots_parsed got parsed again for the first request).
        self._last: tuple[str, _Copy] | None = None
        # which product token a request's crawler obeys (crawl/product_token.py); its
        # bound method, not a wrapper: it runs on every request
        self.tokens = ProductTokens(config)
        self.token_for = self.tokens.token_for
        # Crawl-delay kept on Scrapy's download slots (crawl/slot_delay.py)
        self.slot_delays = SlotDelays(crawler, config.max_crawl_delay)
        # origin -> (robots.txt body, token, the Crawl-delay its rules give the token):
        # asked once per copy and token, not per request. (The body, not the parsed
        # copy: a record in the registry holds the body anyway; forget() drops it.)
        self._delays: dict[str, tuple[bytes, str, float | None]] = {}
        # Asked before each parsed copy is kept, so RAM per origin is bounded in bytes
        # (crawl/registry.py): False when the origin holds no copy to count it with,
        # and the copy is then not kept. The registry calls forget() when it drops an
        # origin's copy.
        self.on_kept: Callable[[str, bytes], bool] | None = None

    def forget(self, origin: str) -> None:
        """Drop the parsed copy of ``origin`` (an idle origin unloaded from RAM)."""
        self._parsed.pop(origin, None)
        if self._last is not None and self._last[0] == origin:
            self._last = None
        self._delays.pop(origin, None)

    # -- verdicts ----------------------------------------------------------------------

    def parsed(self, origin: str, body: bytes) -> RobotsTxt:
        """The parsed copy of *body*: the one kept, or the one robots_for's steps made
        last or the cache could not keep (a large file: this is called right after
        decide(), which awaited those steps), else parsed here, on the reactor (a small
        file)."""
        copy = self._copy(origin, body)
        if copy is None:
            copy = self._made(origin, body, RobotsTxt.parse(body, max_size=self.config.max_size))
        return copy[1]

    def _copy(self, origin: str, body: bytes) -> _Copy | None:
        """The copy of *body* at hand, kept or the last one made, without parsing."""
        cached = self._parsed.get(origin)
        if cached is not None and cached[0] is body:
            self._parsed.move_to_end(origin)
            return cached
        last = self._last
        if last is not None and last[0] == origin and last[1][0] is body:
            # Not kept when it was made (e.g. for robots_parsed, before the origin's
            # record landed): kept now if the origin holds its copy by now.
            return self._keep(origin, last[1])
        return None

    def _made(self, origin: str, body: bytes, robots: RobotsTxt) -> _Copy:
        """A copy just parsed: kept if it may be (see _keep)."""
        # one line per parsed copy (`scrapy robots` lists the issues), built only if
        # shown: the level is asked first, as the counts are made on demand
        if logger.isEnabledFor(logging.DEBUG) and robots.issue_counts:
            kinds = ", ".join(f"{kind} {n}" for kind, n in robots.issue_counts.items())
            logger.debug(
                "scrapy-rep: robots.txt of %s: %d line(s) not taken as written (%s)",
                origin,
                sum(robots.issue_counts.values()),
                kinds,
            )
        return self._keep(origin, (body, robots, set()))

    def _keep(self, origin: str, copy: _Copy) -> _Copy:
        """Keep *copy* in the cache when the registry counts it (REP_MEMORY_MAX_BYTES);
        else it is only the last copy at hand (``_last``): neither kept nor counted."""
        if self.on_kept is not None and not self.on_kept(origin, copy[0]):
            self._parsed.pop(origin, None)  # (a copy of an older body: not counted either)
            self._last = (origin, copy)
            return copy
        self._parsed[origin] = copy
        self._parsed.move_to_end(origin)
        if len(self._parsed) > _PARSED_CACHE_SIZE:
            self._parsed.popitem(last=False)
        return copy

    def _ready(self, origin: str, body: bytes, token: str) -> RobotsTxt | None:
        """The parsed copy, if it can answer for *token* without costly work on the
        reactor: at hand and used by *token* before (the common case), or small."""
        copy = self._copy(origin, body)
        if copy is None:
            if len(body) >= STEPPED_OCTETS:
                return None
            copy = self._made(origin, body, RobotsTxt.parse(body, max_size=self.config.max_size))
        robots, ready = copy[1], copy[2]
        if token not in ready:
            if robots.first_use_rules(token) >= STEPPED_RULES:
                return None
            ready.add(token)
        return robots

    async def robots_for(self, origin: str, body: bytes, token: str) -> RobotsTxt:
        """The parsed copy of *body*, ready to answer for *token*; a large file is
        parsed, and a large group prepared, in bounded steps on the reactor, other
        work running between them (crawl/stepping.py, docs/rfc.md "cost"). One preparation
        per origin at a time: its other requests await it."""
        while (robots := self._ready(origin, body, token)) is None:
            waiters = self._working.get(origin)
            if waiters is not None:  # another request of this origin is doing it
                waiter: Deferred[None] = Deferred()
                waiters.append(waiter)
                await maybe_deferred_to_future(waiter)
                continue  # (its copy may be of another body, or for another token)
            self._working[origin] = []
            copy = self._copy(origin, body)
            known = None if copy is None else copy[1]
            try:
                robots = await run_steps(_prepared(known, body, self.config.max_size, token))
                # (kept again: the origin may have been unloaded during the steps)
                if copy is None:
                    copy = self._made(origin, body, robots)
                else:
                    copy = self._keep(origin, copy)
                copy[2].add(token)
                self._last = (origin, copy)
            finally:
                # (after the copy is kept: a waiter resumed at once finds it ready)
                for waiter in self._working.pop(origin):
                    waiter.callback(None)
            return robots
        return robots

    async def parsed_for(self, origin: str, body: bytes, request: Request) -> RobotsTxt:
        """The parsed copy of *body* ready to answer for *request*'s crawler, the way
        decide() gets it (a large file or group prepared in steps): what
        ``robots_parsed`` receivers get, so that their queries neither parse the file
        again nor prepare the crawler's group in one piece on the reactor."""
        token = self.token_for(request)
        robots = self._ready(origin, body, token)
        if robots is None:
            robots = await self.robots_for(origin, body, token)
        return robots

    async def decide(
        self, request: Request, origin: str, evaluation: Evaluation, rt: OriginRuntime
    ) -> None:
        """Record the decision on the request; raise IgnoreRequest to drop it.

        Awaits only when the origin's robots.txt needs costly work first (see
        robots_for); otherwise it runs to the end without yielding to the reactor.
        """
        if self.decide_now(request, origin, evaluation, rt):
            return
        # a large file or group: prepared in steps, then decided as above
        token = self.token_for(request)
        robots = await self.robots_for(origin, evaluation.body, token)
        self._decide_rules(request, origin, evaluation, rt, robots, token)

    def decide_now(
        self, request: Request, origin: str, evaluation: Evaluation, rt: OriginRuntime
    ) -> bool:
        """``decide`` without awaiting: False (and nothing done) when the origin's
        rules need work in steps first (robots_for). The per-request path."""
        token = self.token_for(request)
        if evaluation.kind == RULES and evaluation.ready:
            # (the common case inline: the kept copy, its group ready for this token)
            cached = self._parsed.get(origin)
            if cached is not None and cached[0] is evaluation.body and token in cached[2]:
                self._parsed.move_to_end(origin)
                self._decide_rules(request, origin, evaluation, rt, cached[1], token)
                return True
            robots = self._ready(origin, evaluation.body, token)
            if robots is None:
                return False
            self._decide_rules(request, origin, evaluation, rt, robots, token)
            return True
        # Every decision has the same keys (docs: "Meta and stats"); line, rule and
        # groups are filled only when a rule set decided.
        decision = self._decision(request, origin, evaluation, rt, token)
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
        origin: str,
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
            "origin": origin,
            "product_token": token,
            "robots": record.last_outcome if record is not None else "",
            # Microseconds, so that a request held even briefly shows a wait above 0.
            "waited": round(waited, 6) if waited else 0.0,
        }

    def _decide_rules(
        self,
        request: Request,
        origin: str,
        evaluation: Evaluation,
        rt: OriginRuntime,
        robots: RobotsTxt,
        token: str,
    ) -> None:
        explained = robots.explain(request.url, token)
        decision = self._decision(request, origin, evaluation, rt, token, explained)
        if self.config.crawl_delay:
            delay = self._delays.get(origin)
            if delay is None or delay[0] is not evaluation.body or delay[1] != token:
                if len(self._delays) >= _PARSED_CACHE_SIZE:
                    self._delays.clear()  # (a memo: asked again)
                delay = (evaluation.body, token, robots.crawl_delay(token))
                self._delays[origin] = delay
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
            extra={"spider": self.tokens.spider},
        )
        raise IgnoreRequest("Forbidden by robots.txt")


def _prepared(
    robots: RobotsTxt | None, body: bytes, max_size: int, token: str
) -> Generator[None, None, RobotsTxt]:
    """Steps (see crawl/stepping.py): *body* parsed (unless *robots* is its copy
    already), then *token*'s group ready for its first check. The reactor may query
    *robots* between steps: RobotsTxt swaps what it builds whole."""
    if robots is None:
        robots = yield from RobotsTxt.parse_steps(body, max_size=max_size)
    yield from robots.prepare_steps(token)
    return robots


def _describe(decision: dict[str, Any]) -> str:
    if decision.get("line") is not None:
        groups = ", ".join(decision.get("groups") or []) or "-"
        return f"(line {decision['line']}: {decision['rule']}; group: {groups})"
    return f"({decision.get('reason')})"
