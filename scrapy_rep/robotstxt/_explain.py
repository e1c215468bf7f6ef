"""explain(): a check that also names the deciding line, rule and group.

A crawl explains every request (crawl/decide.py), so once the crawler's group is
compiled explain() takes allowed()'s path and builds each deciding rule's Decision
once (a frozen value, shared by the calls it answers): a check plus a dict look-up.
A mixin: RobotsTxt holds the state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from scrapy_rep.robotstxt._interpreted import Scan, scan_best, scan_rule
from scrapy_rep.robotstxt._matcher import EMPTY_GROUP, Group, best_rule, pattern_at
from scrapy_rep.robotstxt._urls import as_text as _text
from scrapy_rep.robotstxt._urls import is_robots_txt, path_and_text, plain_path

__all__ = ["Decision", "Explaining"]

_Text: TypeAlias = str | bytes | bytearray | memoryview
_MARK = (1 << 33) - 1  # the line mark part of a rule's code (see _matcher)


@dataclass(frozen=True, slots=True)
class Decision:
    """Why a URL is allowed or not, for logs and debugging."""

    allowed: bool
    line: int | None
    rule: str | None
    groups: tuple[str, ...]
    reason: str


_ROBOTS_TXT = Decision(True, None, None, (), "robots.txt-always-allowed")
_NO_GROUP = Decision(True, None, None, (), "no-matching-group")
# explain()'s memo: (the last user agent asked about, its token, its compiled group,
# the group's decisions so far by deciding rule, -1 for none)
Explained: TypeAlias = tuple[object, str, Group, dict[int, Decision]]


def _agent(user_agent: _Text) -> str | bytes:
    # (a bytearray or memoryview is kept as bytes: it compares equal to those)
    return user_agent if isinstance(user_agent, (str, bytes)) else bytes(user_agent)


class Explaining:
    """RobotsTxt.explain (a mixin: RobotsTxt holds the state)."""

    __slots__ = ()

    _explained: Explained | None
    _originals: dict[int, str] | None

    def _remember(self, explained: Explained) -> None:
        raise NotImplementedError

    def _known(self, token: str) -> dict[int, Decision]:
        """*token*'s compiled group's decisions so far, by deciding rule."""
        raise NotImplementedError

    def _token(self, user_agent: _Text) -> str | None:
        raise NotImplementedError

    def _scan(self, token: str) -> Scan | None:
        raise NotImplementedError

    def _spend(self, token: str, cost: int) -> None:
        raise NotImplementedError

    def _group(self, token: str) -> Group:
        raise NotImplementedError

    def explain(self, url: _Text, user_agent: _Text) -> Decision:
        """Like :meth:`allowed`, with the deciding line, rule and group."""
        # A crawl explains every request (crawl/decide.py): once the agent's group is
        # compiled, this is allowed()'s check (best_rule, which allowed() inlines), and
        # each deciding rule's Decision is built once (a frozen value, shared by the
        # calls it answers).
        memo = self._explained
        if memo is None or user_agent != memo[0]:
            return self._explain_first(url, user_agent)
        group = memo[2]
        path, text = path_and_text(url)
        # is_robots_txt(path), inlined: /robots.txt is always allowed (RFC 9309 2.2.2)
        if path[:11] == b"/robots.txt" and (len(path) == 11 or path[11] == 0x3F):
            return _ROBOTS_TXT
        best = best_rule(group, path, text)
        known = memo[3]
        found = known.get(best)
        if found is None:
            found = known[best] = self._rule_decision(memo[1], group, best)
        return found

    def _explain_first(self, url: _Text, user_agent: _Text) -> Decision:
        """explain() for a user agent other than the remembered one, or whose group is
        still scanned (see _interpreted): remembers it once its group is compiled."""
        token = self._token(user_agent)
        path = plain_path(_text(url))
        if is_robots_txt(path):
            return _ROBOTS_TXT
        if token is None:
            # remembered as a group of no rules, whose one decision is this
            self._remember((_agent(user_agent), "", EMPTY_GROUP, {-1: _NO_GROUP}))
            return _NO_GROUP
        scan = self._scan(token)
        if scan is not None:
            n, cost = scan_best(scan, path)
            self._spend(token, cost)
            if n < 0:
                return Decision(True, None, None, (token,), "no-matching-rule")
            mark, pattern = scan_rule(scan, n)
            return self._decision(token, mark, pattern)
        group = self._group(token)
        known = self._known(token)
        self._remember((_agent(user_agent), token, group, known))
        n = best_rule(group, path)
        found = known.get(n)
        if found is None:
            found = known[n] = self._rule_decision(token, group, n)
        return found

    def _rule_decision(self, token: str, group: Group, n: int) -> Decision:
        """The Decision of compiled rule *n* of *token*'s group (-1: none matches)."""
        if n < 0:
            return Decision(True, None, None, (token,), "no-matching-rule")
        return self._decision(token, group.codes[n] & _MARK, pattern_at(group, n))

    def _decision(self, token: str, mark: int, pattern: bytes) -> Decision:
        """The Decision of the rule of line *mark* >> 1 (disallow if its low bit is
        set), normalised as *pattern*: named as written in the file."""
        allow = not mark & 1
        line = mark >> 1
        text = (self._originals or {}).get(line)
        if text is None:
            text = pattern.decode("ascii")
        rule = ("Allow: " if allow else "Disallow: ") + text
        return Decision(allow, line, rule, (token,), "rule")
