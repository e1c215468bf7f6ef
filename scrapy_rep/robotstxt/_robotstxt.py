"""The public ``RobotsTxt`` object: a parsed robots.txt and the questions it answers."""

from __future__ import annotations

from bisect import bisect_right
from operator import attrgetter
from typing import TypeAlias

from scrapy_rep.robotstxt._explain import Decision, Explained, Explaining, _agent
from scrapy_rep.robotstxt._extension_queries import ExtensionQueries
from scrapy_rep.robotstxt._extensions import ExtensionLine, Extensions
from scrapy_rep.robotstxt._gc import paused_gc
from scrapy_rep.robotstxt._interpreted import (
    SCAN_MAX_OCTETS,
    SCAN_MAX_RULES,
    Scan,
    compile_cost,
    plain_scan,
    prepare_scan,
    scan_allows,
    windowed,
)
from scrapy_rep.robotstxt._issues import Issue, Pending, count_issues, materialise
from scrapy_rep.robotstxt._matcher import (
    Group,
    wild_rule,
)
from scrapy_rep.robotstxt._parser import DEFAULT_MAX_SIZE, ParseResult, Run, parse, run_rules
from scrapy_rep.robotstxt._steps import ScanState, SteppedWork
from scrapy_rep.robotstxt._urls import _SIMPLE, plain_path
from scrapy_rep.robotstxt._urls import as_text as _text
from scrapy_rep.robotstxt._usage import UsageIndex
from scrapy_rep.robotstxt._useragent import token_key

__all__ = ["DEFAULT_MAX_SIZE", "Decision", "RobotsTxt"]


_Text: TypeAlias = str | bytes | bytearray | memoryview


_NO_MEMO: tuple[object, None] = (None, None)


# a file (octets) or group (16 octets a rule) from which the collector is paused
_LARGE = 32_768
_MARKS = attrgetter("marks")  # a run's line marks, one per rule (see _runs.Run)


class RobotsTxt(Explaining, ExtensionQueries, SteppedWork):
    """A parsed robots.txt.  Build with :meth:`parse`.

    Queries change no answer, but they do build indexes as they go (see _interpreted):
    the state they touch is swapped whole or rebuilt when lost, so one object can be
    shared by threads.
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
        "_scans",
        "rule_count",
        "sitemaps",
        "truncated",
    )

    def __init__(self) -> None:
        self._usage: UsageIndex | None = None  # usage preferences, built on first use
        self._groups: dict[str, Group | list[Run]] = {}
        # (the last user agent asked about, its compiled group, None: allow all, or
        # the token of its group while that is scanned),
        # one tuple swapped whole, so that threads sharing the object never see one
        # agent paired with another's group
        self._memo: tuple[object, Group | str | None] = _NO_MEMO
        # explain()'s own memo, set once the agent's group is compiled (see explain)
        self._explained: Explained | None = None
        # token -> its compiled group's decisions so far, by deciding rule (see explain)
        self._decisions: dict[str, dict[int, Decision]] | None = None
        # token -> its extension values (Crawl-delay, ...); the preamble's (lines
        # before any user-agent line); the raw lines of each (see _extensions)
        self._extensions: dict[str, Extensions] | None = None
        self._preamble_summary: Extensions | None = None
        self._extension_lines: dict[str, list[list[ExtensionLine]]] | None = None
        self._preamble: list[ExtensionLine] | None = None
        self._originals: dict[int, str] | None = None
        # token -> (what scans may still cost before compiling, the scan) of groups
        # not compiled yet (see _interpreted)
        self._scans: dict[str, ScanState] | None = None
        self.sitemaps: list[str] = []
        self.truncated = False
        self.rule_count = 0
        #: what the parser did not take as written, in line order (the first
        #: _issues.MAX_ISSUES), and the count of every kind (all of them)
        self._issues: tuple[Issue, ...] | Pending | None = None
        # None: not counted yet (or no issue): counted on demand from _issues
        self._issue_counts: dict[str, int] | None = None

    @classmethod
    def parse(cls, content: _Text, max_size: int = DEFAULT_MAX_SIZE) -> RobotsTxt:
        """Parse *content* (bytes or str); never raises for any content."""
        if len(content) < _LARGE:
            res = parse(content, max_size)
        else:
            with paused_gc():  # (see _gc: tens of thousands of containers)
                res = parse(content, max_size)
        return cls._parsed(res)

    @classmethod
    def _parsed(cls, res: ParseResult) -> RobotsTxt:
        self = cls.__new__(cls)  # every slot is set here: no defaults to throw away
        self._usage = None
        self._memo = _NO_MEMO
        self._explained = None
        self._decisions = None
        self._scans = None
        # No group is compiled now: a crawler uses one token, and most files name
        # many crawlers it will never be (Protego builds its index lazily alike).
        # A group's first checks scan its rules; it is compiled when used more (see
        # _first_use and _interpreted).
        self._groups = res.groups  # type: ignore[assignment]  # (runs only, so far)
        self._originals = res.originals or None
        self._extensions = res.summaries or None
        self._preamble_summary = res.preamble_summary
        self._extension_lines = res.extensions or None
        self._preamble = res.preamble or None
        self._issues = res.issues
        self._issue_counts = res.issue_counts
        self.sitemaps = res.sitemaps
        self.truncated = res.truncated
        self.rule_count = res.rule_count
        return self

    @property
    def issue_counts(self) -> dict[str, int]:
        """The count of every kind of issue (see issues), in ISSUE_KINDS order."""
        counts = self._issue_counts
        if counts is None:
            found = self._issues
            if not found:
                return {}
            # (all the issues were kept: counted now, as most files are never asked)
            counts = self._issue_counts = count_issues(found)
        return counts

    @property
    def issues(self) -> tuple[Issue, ...]:
        """What the parser did not take as written, in line order (the first
        _issues.MAX_ISSUES, and the size limit's cut); issue_counts counts them all."""
        found = self._issues
        if not found:
            return ()
        if not isinstance(found[0], Issue):  # still as parsed (see _issues.Pending)
            found = self._issues = materialise(found)
        return found

    def _scan(self, token: str) -> Scan | None:
        """The scan of *token*'s group while scanning still costs less than compiling
        it would have; None once the group is, or is due to be, compiled."""
        runs = self._groups[token]
        if not isinstance(runs, list):
            return None
        scans = self._scans
        if scans is None:
            scans = self._scans = {}
        found = scans.get(token)
        if found is None:
            count = len(runs[0].marks) if len(runs) == 1 else sum(map(len, map(_MARKS, runs)))
            if count > SCAN_MAX_RULES or sum(len(run.patterns) for run in runs) > SCAN_MAX_OCTETS:
                return None  # compiled at once (compile_cost): no scan to prepare
            plain = plain_scan(runs[0].patterns, runs[0].marks) if len(runs) == 1 else None
            if plain is not None:
                scan, cost = plain
                rules = [(scan[0], runs[0].marks)]
            else:
                originals = {} if self._originals is None else self._originals
                rules = list(map(run_rules, runs))
                scan = prepare_scan(rules, originals)
                cost = compile_cost(scan)
                if originals and self._originals is None:
                    self._originals = originals
            if cost > 0:
                # a large group's window now, for its first scan too: the first
                # check sorted the guards after a pass over all of them anyway
                # (see windowed); it now sorts first and scans the window only
                scan = windowed(scan)
            found = scans[token] = (cost, scan, rules)
        return found[1] if found[0] > 0 else None

    def _spend(self, token: str, cost: int) -> None:
        """Count a scan of *token*'s group against what compiling it would cost."""
        scans = self._scans
        if scans is not None and (found := scans.get(token)) is not None:
            # (else compiled meanwhile)
            scans[token] = (found[0] - cost, found[1], found[2])

    def _group(self, token: str) -> Group:
        group = self._groups[token]
        if isinstance(group, list):
            for _ in self._compile_steps(token):  # (see _steps: run to its end at once)
                pass
            group = self._groups[token]
        return group  # type: ignore[return-value]  # (compiled now)

    def _compiled(self, token: str, group: Group, originals: dict[int, str]) -> None:
        """Keep *token*'s compiled group (its scan, if any, is no longer needed)."""
        self._groups[token] = group
        if originals and self._originals is None:
            self._originals = originals
        scans = self._scans
        if scans is not None:
            scans.pop(token, None)
            if not scans:
                self._scans = None  # an emptied dict keeps its table: free it

    def _remember(self, explained: Explained) -> None:
        """Remember explain()'s agent (see _explain), one tuple swapped whole."""
        self._explained = explained

    def _known(self, token: str) -> dict[int, Decision]:
        decisions = self._decisions
        if decisions is None:
            decisions = self._decisions = {}
        return decisions.setdefault(token, {})

    def _token(self, user_agent: _Text) -> str | None:
        """The group key this crawler obeys (RFC 9309 §2.2.1), or None for none."""
        token: str | None = token_key(_text(user_agent))
        if not token or token not in self._groups:
            # only when no group names the crawler does it obey "*" (never both)
            token = "*" if "*" in self._groups else None
        return token

    def _first_use(self, url: _Text, user_agent: _Text) -> bool | Group | None:
        """allowed() for a user agent other than the remembered one.

        While its group is being scanned (see _interpreted), answers by scanning.
        Otherwise remembers the agent and its compiled group, as a crawler asks with
        the same user agent again and again, and returns the group for allowed() to
        use (None: no group applies, everything is allowed).
        """
        token = self._token(user_agent)
        group = None
        if token is not None:
            found = self._groups[token]
            if found.__class__ is Group:  # compiled already: the common case
                group = found
            else:
                scan = self._scan(token)
                if scan is not None:
                    # remembered as scanning: allowed() comes straight to _scanned
                    self._memo = (_agent(user_agent), token)
                    return self._scanned(url, user_agent, token)
                group = self._group(token)
        self._memo = (_agent(user_agent), group)
        return group

    def first_use_rules(self, user_agent: _Text) -> int:
        """Rules of the group *user_agent* obeys that its first check would still
        scan or compile (0 once :meth:`prepare` or a check did that work): what that
        first check costs, for a caller that would rather do it off its event loop."""
        token = self._token(user_agent)
        runs = None if token is None else self._groups[token]
        if not isinstance(runs, list) or (self._scans and token in self._scans):
            return 0
        return sum(map(len, map(_MARKS, runs)))

    def prepare(self, user_agent: _Text) -> None:
        """Do the work of *user_agent*'s first check now: prepare its group's scan, or
        compile it when that is what a first check would do. Safe in another thread
        while this thread or others query the object (see the class docstring)."""
        token = self._token(user_agent)
        if token is not None and self._scan(token) is None:
            self._group(token)

    def _scanned(self, url: _Text, user_agent: _Text, token: str) -> bool:
        """allowed() while *token*'s group is scanned (see _interpreted)."""
        scans = self._scans
        found = None if scans is None else scans.get(token)
        if found is None or found[0] <= 0:
            # due to be compiled, or compiled meanwhile (by explain()): look again
            self._memo = _NO_MEMO
            return self.allowed(url, user_agent)
        scan = found[1]
        m = _SIMPLE.match(url) if url.__class__ is str else None
        path = m[1].encode() if m is not None else plain_path(_text(url))
        # is_robots_txt(path), inlined: /robots.txt is always allowed (RFC 9309 2.2.2)
        if path[:11] == b"/robots.txt" and (len(path) == 11 or path[11] == 0x3F):
            return True
        allowed, cost = scan_allows(scan, path)
        scans[token] = (found[0] - cost, scan, found[2])  # type: ignore[index]
        return allowed

    def allowed(self, url: _Text, user_agent: _Text) -> bool:
        """Whether *user_agent* may fetch *url*."""
        # The hot path of a crawl: kept to a handful of C calls for the common
        # case, a plain ASCII http(s) or path-only URL and a group of few rules.
        agent, group = self._memo
        if user_agent != agent:
            found = self._first_use(url, user_agent)
            if found.__class__ is not Group:
                return found is not False  # a scan's verdict, or None: no group applies
            group = found
        elif group.__class__ is not Group:
            # None: no group applies; a token: its group is being scanned
            return group is None or self._scanned(url, user_agent, group)  # type: ignore[arg-type]
        # path_and_text() (_urls), inlined: the common URL, plain ASCII http(s) or
        # path-only, in one regex call
        m = _SIMPLE.match(url) if url.__class__ is str else None
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
        # is_robots_txt(path), inlined: /robots.txt is always allowed (RFC 9309 2.2.2)
        return path[:11] == b"/robots.txt" and (len(path) == 11 or path[11] == 0x3F)
