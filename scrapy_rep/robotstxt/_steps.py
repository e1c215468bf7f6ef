"""RobotsTxt's work in bounded steps, for a caller that must not stop for long.

An event loop (a Scrapy crawl's reactor, see scrapy_rep/crawl/stepping.py) must not
wait more than 25 ms (SPEC "cost"), and pure Python parses the worst 500 KiB files,
and compiles the worst groups of tens of thousands of rules, in 30-90 ms.  So both
can run as generators: each ``next()`` does a bounded amount of work (a slice of
lines, one phase after them, one pass of the compile: a few ms at most for a 500 KiB
file), and the caller runs other work between them.  They run the same code as
RobotsTxt.parse and a first check (see _parser.parse_steps, _compile.compile_steps),
so they build exactly what those build.
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import nullcontext
from operator import attrgetter
from typing import TypeAlias, TypeVar

from scrapy_rep.robotstxt._compile import compile_steps
from scrapy_rep.robotstxt._gc import paused_gc
from scrapy_rep.robotstxt._interpreted import Scan
from scrapy_rep.robotstxt._matcher import Group, Rules
from scrapy_rep.robotstxt._parser import (
    DEFAULT_MAX_SIZE,
    LINES_STEP,
    ParseResult,
    Run,
    parse_steps,
    run_rules,
)

__all__ = ["ScanState", "SteppedWork"]

_Text: TypeAlias = str | bytes | bytearray | memoryview
_R = TypeVar("_R", bound="SteppedWork")
# a group being scanned: what scanning it may still cost before it is compiled, its
# scan, and its runs' rules split (see _runs.run_rules), for the compile to reuse
ScanState: TypeAlias = tuple[int, Scan, list[Rules]]
# a file (octets) or group (16 octets a rule) from which the collector is paused
_LARGE = 32_768
_MARKS = attrgetter("marks")  # a run's line marks, one per rule (see _runs.Run)


class SteppedWork:
    """RobotsTxt's parse and first-check preparation in steps (a mixin: RobotsTxt
    holds the state)."""

    __slots__ = ()

    _groups: dict[str, Group | list[Run]]
    _scans: dict[str, ScanState] | None
    _originals: dict[int, str] | None

    @classmethod
    def _parsed(cls: type[_R], res: ParseResult) -> _R:
        raise NotImplementedError

    def _token(self, user_agent: _Text) -> str | None:
        raise NotImplementedError

    def _scan(self, token: str) -> Scan | None:
        raise NotImplementedError

    def _compiled(self, token: str, group: Group, originals: dict[int, str]) -> None:
        raise NotImplementedError

    @classmethod
    def parse_steps(
        cls: type[_R], content: _Text, max_size: int = DEFAULT_MAX_SIZE, step: int = LINES_STEP
    ) -> Generator[None, None, _R]:
        """:meth:`parse` in bounded steps, for a caller that must not stop for long
        (an event loop): a generator, each ``next()`` of which parses at most *step*
        lines or does one of the phases after them (each linear in the file, a few
        ms for a 500 KiB file), and that returns the parsed file, the same as
        :meth:`parse` gives::

            steps = RobotsTxt.parse_steps(body)
            while True:
                try:
                    next(steps)  # ... other work between steps ...
                except StopIteration as done:
                    robots = done.value
                    break

        (or ``robots = yield from RobotsTxt.parse_steps(body)`` in a generator).
        The cyclic garbage collector stays paused from the first step to the last
        for a large file, as in :meth:`parse`.
        """
        with paused_gc() if len(content) >= _LARGE else nullcontext():
            for res in parse_steps(content, max_size, step):
                if res is None:
                    yield
        return cls._parsed(res)  # type: ignore[arg-type]  # (the last item)

    def prepare_steps(self, user_agent: _Text) -> Generator[None, None, None]:
        """:meth:`prepare` in bounded steps, for a caller that must not stop for long
        (an event loop): a generator, each ``next()`` of which does one pass of the
        compile (a few C-level calls over the group's rules, a few ms for 30,000
        rules), or prepares a scan (a group of at most 2,000 rules, see
        _interpreted); the group is the same as :meth:`prepare` or a first check
        would have built.  The object may be queried between steps: a query that
        needs the group meanwhile builds it itself, and the steps then keep that."""
        token = self._token(user_agent)
        if token is None or self._scan(token) is not None:
            return  # no group, compiled already, or a (now prepared) scan answers
        if not isinstance(self._groups[token], list):
            return  # (compiled meanwhile)
        yield
        yield from self._compile_steps(token)

    def _compile_steps(self, token: str) -> Generator[None, None, None]:
        """Compile *token*'s group (not compiled yet) and keep it, yielding between the
        compile's passes: the one compile both a first check (run to its end) and
        :meth:`prepare_steps` do."""
        runs = self._groups[token]
        if not isinstance(runs, list):
            return  # (compiled meanwhile, by a query between steps)
        scans = self._scans
        scanned = None if scans is None else scans.get(token)
        # the scan's split rules if it has them: splitting the runs' joined patterns
        # again would cost the compile as much as the first check paid
        rules = list(map(run_rules, runs)) if scanned is None else scanned[2]
        # (an originals dict is kept only once it holds something)
        originals = {} if self._originals is None else self._originals
        large = sum(map(len, map(_MARKS, runs))) >= _LARGE // 16
        with paused_gc() if large else nullcontext():
            for group in compile_steps(rules, {}, originals):
                if group is None:
                    yield
        if isinstance(self._groups[token], list):  # (else compiled meanwhile)
            self._compiled(token, group, originals)  # type: ignore[arg-type]  # (last)
