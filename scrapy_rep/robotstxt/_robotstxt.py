"""The public ``RobotsTxt`` object: a parsed robots.txt and the questions it answers."""

from __future__ import annotations

import gc
from bisect import bisect_right
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeAlias, TypeVar

from scrapy_rep.robotstxt._compile import compile_steps
from scrapy_rep.robotstxt._extensions import SIGNAL_KEYS, ExtensionLine, Extensions
from scrapy_rep.robotstxt._issues import Issue, Pending, count_issues, materialise
from scrapy_rep.robotstxt._lines import token_key
from scrapy_rep.robotstxt._matcher import EMPTY_GROUP, Group, best_rule, pattern_at, wild_rule
from scrapy_rep.robotstxt._normalise import SIMPLE_URL, path_and_text, plain_path
from scrapy_rep.robotstxt._normalise import as_text as _text
from scrapy_rep.robotstxt._parser import (
    DEFAULT_MAX_SIZE,
    LINES_STEP,
    ParseResult,
    Run,
    parse,
    parse_steps,
    run_rules,
)
from scrapy_rep.robotstxt._usage import Usage, UsageIndex

__all__ = ["DEFAULT_MAX_SIZE", "Decision", "RobotsTxt"]


_Text: TypeAlias = str | bytes | bytearray | memoryview
_R = TypeVar("_R", bound="RobotsTxt")

# a file (octets) or group (16 octets a rule) from which the collector is paused
_LARGE = 32_768
_MARK = (1 << 33) - 1  # the line mark part of a rule's code (see _matcher)


@contextmanager
def paused_gc(pause: bool = True) -> Iterator[None]:
    """The cyclic garbage collector paused while a large file is parsed or a large
    group compiled: its tens of thousands of surviving containers would start
    collection after collection of a crawl's large heap (a file of 18,285 user-agent
    lines parses 2-3x faster without). The engine makes no reference cycles."""
    if not (pause and gc.isenabled()):
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@dataclass(frozen=True, slots=True)
class Decision:
    """Why a URL is allowed or not, for logs and debugging."""

    allowed: bool
    line: int | None
    rule: str | None
    groups: tuple[str, ...]
    reason: str


_NO_VALUES = Extensions()  # (read only: a group without extension values)
_ROBOTS_TXT = Decision(True, None, None, (), "robots.txt-always-allowed")
_NO_GROUP = Decision(True, None, None, (), "no-matching-group")


@dataclass(frozen=True, slots=True)
class _Explained:
    """explain()'s memo: the last user agent asked about, its token, its compiled
    group and the group's decisions so far by deciding rule (-1: none matches); one
    object swapped whole, so threads sharing a RobotsTxt never mix two agents'."""

    agent: object
    token: str
    group: Group
    decisions: dict[int, Decision]


def _agent(user_agent: _Text) -> str | bytes:
    # (a bytearray or memoryview is kept as bytes: it compares equal to those)
    return user_agent if isinstance(user_agent, (str, bytes)) else bytes(user_agent)


class RobotsTxt:
    """A parsed robots.txt.  Build with :meth:`parse` (or :meth:`parse_steps`).

    No group is compiled by the parse: a crawler uses one token, and most files name
    many crawlers it will never be (Protego builds its index lazily alike). A group
    is compiled at its first check (or by :meth:`prepare`). Queries change no answer;
    the state they build is swapped whole, so one object can be shared by threads.
    """

    __slots__ = (
        "_decisions",
        "_explained",
        "_extension_lines",
        "_extensions",
        "_groups",
        "_issue_counts",
        "_issues",
        "_memo",
        "_originals",
        "_preamble",
        "_preamble_summary",
        "_usage",
        "rule_count",
        "sitemaps",
        "truncated",
    )

    def __init__(self, parsed: ParseResult | None = None) -> None:
        """An empty robots.txt (everything allowed), or the parser's *parsed* result."""
        res = ParseResult() if parsed is None else parsed
        self._usage: UsageIndex | None = None  # usage preferences, built on first use
        # token -> its group: the parser's runs until compiled (see _compile)
        self._groups: dict[str, Group | list[Run]] = res.groups  # type: ignore[assignment]
        # (the last user agent asked about, its compiled group or None: allow all), one
        # tuple swapped whole: threads never see one agent paired with another's group
        self._memo: tuple[object, Group | None] = (None, None)
        self._explained: _Explained | None = None  # explain()'s own memo
        # token -> its compiled group's decisions so far, by deciding rule (see explain)
        self._decisions: dict[str, dict[int, Decision]] | None = None
        # token -> its extension values (Crawl-delay, ...); the preamble's (lines
        # before any user-agent line); the raw lines of each (see _extensions)
        self._extensions: dict[str, Extensions] | None = res.summaries or None
        self._preamble_summary: Extensions | None = res.preamble_summary
        self._extension_lines: dict[str, list[list[ExtensionLine]]] | None = res.extensions or None
        self._preamble: list[ExtensionLine] | None = res.preamble or None
        # line -> pattern as written, where explain() cannot rebuild it
        self._originals: dict[int, str] | None = res.originals or None
        self.sitemaps: list[str] = res.sitemaps
        self.truncated = res.truncated
        self.rule_count = res.rule_count
        # see the issues and issue_counts properties
        self._issues: tuple[Issue, ...] | Pending | None = res.issues
        self._issue_counts: dict[str, int] | None = res.issue_counts

    # -- parsing ---------------------------------------------------------------------

    @classmethod
    def parse(cls, content: _Text, max_size: int = DEFAULT_MAX_SIZE) -> RobotsTxt:
        """Parse *content* (bytes or str); never raises for any content."""
        if len(content) < _LARGE:
            return cls(parse(content, max_size))
        with paused_gc():  # (tens of thousands of containers: see paused_gc)
            return cls(parse(content, max_size))

    @classmethod
    def parse_steps(
        cls: type[_R], content: _Text, max_size: int = DEFAULT_MAX_SIZE, step: int = LINES_STEP
    ) -> Generator[None, None, _R]:
        """:meth:`parse` in bounded steps, for a caller that must not stop for long (an
        event loop, docs/rfc.md): each ``next()`` parses at most *step* lines or does
        one phase after them, and the generator returns what :meth:`parse` gives
        (``robots = yield from RobotsTxt.parse_steps(body)``). The garbage collector
        stays paused from the first step to the last for a large file."""
        with paused_gc(len(content) >= _LARGE):
            for res in parse_steps(content, max_size, step):
                if res is None:
                    yield
        return cls(res)  # (the last item is the ParseResult)

    # -- diagnostics -----------------------------------------------------------------

    @property
    def issue_counts(self) -> dict[str, int]:
        """The count of every kind of issue (see issues), in ISSUE_KINDS order."""
        found = self._issues
        if self._issue_counts is None and found and not isinstance(found[0], Issue):
            # (all the issues were kept: counted now, as most files are never asked)
            self._issue_counts = count_issues(found)
        return self._issue_counts or {}

    @property
    def issues(self) -> tuple[Issue, ...]:
        """What the parser did not take as written, in line order (the first
        _issues.MAX_ISSUES, and the size limit's cut); issue_counts counts them all."""
        found = self._issues
        if not found:
            return ()
        if not isinstance(found[0], Issue):  # still as parsed (see _issues.Pending)
            self._issue_counts = self.issue_counts  # (counted before the compact form goes)
            found = self._issues = materialise(found)
        return found

    # -- groups ----------------------------------------------------------------------

    def _token(self, user_agent: _Text) -> str | None:
        """The group key this crawler obeys (RFC 9309 §2.2.1), or None for none."""
        token: str | None = token_key(_text(user_agent))
        if not token or token not in self._groups:
            # only when no group names the crawler does it obey "*" (never both)
            token = "*" if "*" in self._groups else None
        return token

    def _group(self, token: str) -> Group:
        """*token*'s group, compiled now if it is not yet."""
        group = self._groups[token]
        if isinstance(group, list):
            for _ in self._compile_steps(token):  # (run to its end at once)
                pass
            group = self._groups[token]
        return group  # type: ignore[return-value]  # (compiled now)

    def _compile_steps(self, token: str) -> Generator[None, None, None]:
        """Compile *token*'s group and keep it, yielding between the compile's passes
        (for a first check, run to its end at once, and for :meth:`prepare_steps`)."""
        runs = self._groups[token]
        if not isinstance(runs, list):
            return  # (compiled meanwhile, by a query between steps)
        # (an originals dict is kept only once it holds something)
        originals = {} if self._originals is None else self._originals
        with paused_gc(sum(len(run.marks) for run in runs) >= _LARGE // 16):
            for group in compile_steps(list(map(run_rules, runs)), {}, originals):
                if group is None:
                    yield
        if isinstance(self._groups[token], list):  # (else compiled meanwhile)
            self._groups[token] = group  # type: ignore[assignment]  # (the last item)
            if originals and self._originals is None:
                self._originals = originals

    def first_use_rules(self, user_agent: _Text) -> int:
        """Rules of the group *user_agent* obeys that its first check would still
        compile (0 once :meth:`prepare` or a check did that work): what that first
        check costs, for a caller that would rather do it off its event loop."""
        token = self._token(user_agent)
        runs = None if token is None else self._groups[token]
        return sum(len(run.marks) for run in runs) if isinstance(runs, list) else 0

    def prepare(self, user_agent: _Text) -> None:
        """Do the work of *user_agent*'s first check now: compile its group (safe in
        another thread while others query the object)."""
        token = self._token(user_agent)
        if token is not None:
            self._group(token)

    def prepare_steps(self, user_agent: _Text) -> Generator[None, None, None]:
        """:meth:`prepare` in bounded steps: each ``next()`` does one pass of the compile
        (a few ms for 30,000 rules). A query between steps that needs the group builds
        it itself, and the steps then keep that."""
        token = self._token(user_agent)
        if token is None or not isinstance(self._groups[token], list):
            return  # no group, or compiled already
        yield
        yield from self._compile_steps(token)

    # -- checks ----------------------------------------------------------------------

    def _first_use(self, user_agent: _Text) -> Group | None:
        """The compiled group of a user agent other than the remembered one (None: all
        allowed), remembered, as a crawler asks with the same user agent again and again."""
        token = self._token(user_agent)
        group = None if token is None else self._group(token)
        self._memo = (_agent(user_agent), group)
        return group

    def allowed(self, url: _Text, user_agent: _Text) -> bool:
        """Whether *user_agent* may fetch *url*."""
        # The hot path of a crawl: kept to a handful of C calls for the common
        # case, a plain ASCII http(s) or path-only URL and a group of few rules.
        agent, group = self._memo
        if user_agent != agent:
            group = self._first_use(user_agent)
        if group is None:
            return True  # no group applies
        # path_and_text() (_normalise), inlined: the common URL, plain ASCII http(s) or
        # path-only, in one regex call
        m = SIMPLE_URL.match(url) if url.__class__ is str else None
        if m is not None:
            text = m[1]
            path = text.encode()
        else:
            path = plain_path(_text(url))
            text = None
        # best_rule() (_matcher), inlined: the hot path
        lits = group.literals
        best = bisect_right(lits, path) - 1
        if best >= 0:
            parents = group.literal_parents
            while not path.startswith(lits[best]):
                best = parents[best]
                if best < 0:
                    break
            else:
                winners = group.literal_winners
                if winners is not None:
                    best = winners[best]
        wild = group.wild_guards
        if wild and path.startswith(wild):
            quick = group.quick_probes
            if quick is None:
                best = wild_rule(group, path, best, text)
            else:
                if text is None:
                    text = path.decode("ascii")  # normalised paths are ASCII
                # no probe in the path: no wildcard rule can match (see _matcher.Group)
                if any(map(text.__contains__, quick)):
                    best = wild_rule(group, path, best, text)
        if best < 0 or not group.codes[best] & 1:  # the low bit is set for disallow rules
            return True
        # /robots.txt is always allowed, with any query (RFC 9309 §2.2.2)
        return path[:11] == b"/robots.txt" and (len(path) == 11 or path[11] == 0x3F)

    def explain(self, url: _Text, user_agent: _Text) -> Decision:
        """Like :meth:`allowed`, with the deciding line, rule and group."""
        # A crawl explains every request (scrapy_rep/crawl/decide.py): allowed()'s check
        # plus a dict look-up, as each deciding rule's Decision is built once (frozen).
        memo = self._explained
        if memo is None or user_agent != memo.agent:
            memo = self._explain_first(user_agent)
        path, text = path_and_text(url)
        # /robots.txt is always allowed, with any query (RFC 9309 §2.2.2)
        if path[:11] == b"/robots.txt" and (len(path) == 11 or path[11] == 0x3F):
            return _ROBOTS_TXT
        best = best_rule(memo.group, path, text)
        known = memo.decisions
        found = known.get(best)
        if found is None:
            found = known[best] = self._rule_decision(memo.token, memo.group, best)
        return found

    def _explain_first(self, user_agent: _Text) -> _Explained:
        """explain()'s memo for a user agent other than the remembered one."""
        token = self._token(user_agent)
        if token is None:
            # remembered as a group of no rules, whose one decision is this
            memo = _Explained(_agent(user_agent), "", EMPTY_GROUP, {-1: _NO_GROUP})
        else:
            if self._decisions is None:
                self._decisions = {}
            known = self._decisions.setdefault(token, {})
            memo = _Explained(_agent(user_agent), token, self._group(token), known)
        self._explained = memo
        return memo

    def _rule_decision(self, token: str, group: Group, n: int) -> Decision:
        """The Decision of compiled rule *n* of *token*'s group (-1: none matches),
        named as written in the file."""
        if n < 0:
            return Decision(True, None, None, (token,), "no-matching-rule")
        mark = group.codes[n] & _MARK
        allow = not mark & 1
        line = mark >> 1
        text = (self._originals or {}).get(line)
        if text is None:
            text = pattern_at(group, n).decode("ascii")
        rule = ("Allow: " if allow else "Disallow: ") + text
        return Decision(allow, line, rule, (token,), "rule")

    # -- extension fields and usage preferences --------------------------------------

    def _values(self, user_agent: _Text) -> Extensions:
        token = self._token(user_agent)
        if token is None or self._extensions is None:
            return _NO_VALUES
        return self._extensions.get(token, _NO_VALUES)

    def crawl_delay(self, user_agent: _Text) -> float | None:
        """Crawl-delay of the obeyed group in seconds, if it gives a valid one."""
        return self._values(user_agent).delay

    def request_rate(self, user_agent: _Text) -> tuple[int, float] | None:
        """Request-rate of the obeyed group as (requests, seconds)."""
        return self._values(user_agent).rate

    def content_signals(self, user_agent: _Text) -> dict[str, bool]:
        """Content-Signal values (``search``, ``ai-input``, ``ai-train``) that apply.

        Signals in the obeyed group win; signals given before any user-agent line
        apply to every crawler as a file-wide default.
        """
        everyone = self._preamble_summary or _NO_VALUES
        found = {**everyone.signals, **self._values(user_agent).signals}
        return {key: found[key] for key in SIGNAL_KEYS if key in found}

    def extension_lines(self, user_agent: _Text | None, field: str) -> list[ExtensionLine]:
        """The *field* lines (a key of _extensions.EXTENSION_FIELDS) of the group
        *user_agent* obeys, in file order (merged same-name groups included); with
        None, those before the first user-agent line."""
        if user_agent is None:
            lines = self._preamble or []
            return [e for e in lines if e.field == field]
        token = self._token(user_agent)
        if token is None or self._extension_lines is None:
            return []
        runs = self._extension_lines.get(token, [])
        return [e for lines in runs for e in lines if e.field == field]

    @property
    def declares_usage(self) -> bool:
        """False when no line of the file can state a usage preference, so ``usage()``
        is all unknown for every URL (a crawl then skips asking, per request)."""
        return not (self._extension_lines is None and self._preamble is None)

    def usage(self, url: _Text, user_agent: _Text) -> Usage:
        """Usage preferences (Content-Usage, Content-Signal) of *url*, see _usage; none
        apply to a URL the crawler may not fetch (draft-ietf-aipref-attach §3.1)."""
        if not self.declares_usage or not self.allowed(url, user_agent):
            return Usage()
        index = self._usage
        if index is None:
            lines = dict(self._extension_lines or {})
            lines[""] = [self._preamble or []]
            index = self._usage = UsageIndex(lines)
        return index.usage(self._token(user_agent), plain_path(_text(url)))
