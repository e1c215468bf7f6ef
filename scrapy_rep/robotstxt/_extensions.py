"""Group-scoped extension fields: Crawl-delay, Request-rate, Content-Signal.

Their lines are kept generically, per group and in file order, as (field, value, line)
(see ExtensionLine): a new extension field is one entry in EXTENSION_FIELDS (its
spellings) and, if the engine should interpret it, one in INTERPRET.  Its lines are
then available through RobotsTxt.extension_lines(user_agent, field).

Interpretation is linear in the number of lines: each group's (run's) lines are read
once, whatever the number of user-agent lines naming the group, and each token then
combines the summaries of its runs (RFC 9309 §2.2.1: same-name groups merge).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Iterator
from typing import NamedTuple

from scrapy_rep.robotstxt._issues import (
    INVALID_VALUE,
    RULE_OUTSIDE_GROUP,
    SIGNAL_FOR_EVERYONE,
    IssueLog,
)

# canonical field name -> spellings accepted (each as a prefix of the field name, as
# Google's library matches its own fields); the first spelling is the canonical one
EXTENSION_FIELDS: dict[str, tuple[bytes, ...]] = {
    "crawl-delay": (b"crawl-delay", b"crawldelay", b"crawl delay"),
    "request-rate": (b"request-rate", b"requestrate", b"request rate"),
    "content-signal": (b"content-signal",),
    "content-usage": (b"content-usage",),  # draft-ietf-aipref-attach (see _usage)
}


class ExtensionLine(NamedTuple):
    field: str  # canonical name (a key of EXTENSION_FIELDS)
    value: str  # as written, comment and surrounding blanks removed
    line: int


_DELAY_VALUE = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")
_RATE_VALUE = re.compile(
    r"([0-9]+)\s*/\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([smhd]?)(?![A-Za-z])", re.I
)
_RATE_UNIT = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
SIGNAL_KEYS = ("search", "ai-input", "ai-train")
_SIGNAL_VALUES = {"yes": True, "no": False}


def _delay(value: str) -> float | None:
    return float(value) if _DELAY_VALUE.fullmatch(value) else None


def _rate(value: str) -> tuple[int, float] | None:
    m = _RATE_VALUE.match(value)
    if m is None:
        return None
    requests = int(m.group(1))
    seconds = float(m.group(2)) * _RATE_UNIT[m.group(3).lower()]
    if requests <= 0 or seconds <= 0:
        return None
    return requests, seconds


def _signals(value: str) -> dict[str, bool] | None:
    found: dict[str, bool] = {}
    for item in value.split(","):
        name, _, flag = item.partition("=")
        key = name.strip().lower()
        verdict = _SIGNAL_VALUES.get(flag.strip().lower())
        if verdict is not None and key in SIGNAL_KEYS:
            found.setdefault(key, verdict)
    return found or None


# field -> interpreter: the value, or None when it is invalid (an issue is reported)
INTERPRET: dict[str, Callable[[str], object]] = {
    "crawl-delay": _delay,
    "request-rate": _rate,
    "content-signal": _signals,
}


class Extensions:
    """What the engine makes of one token's extension lines."""

    __slots__ = ("delay", "rate", "signals")

    def __init__(self) -> None:
        self.delay: float | None = None
        self.rate: tuple[int, float] | None = None
        self.signals: dict[str, bool] = {}

    def add(self, field: str, value: object) -> None:
        """Take one valid value; the first valid one in file order wins."""
        if field == "crawl-delay" and self.delay is None:
            self.delay = value  # type: ignore[assignment]
        elif field == "request-rate" and self.rate is None:
            self.rate = value  # type: ignore[assignment]
        elif field == "content-signal":
            for key, flag in value.items():  # type: ignore[attr-defined]
                self.signals.setdefault(key, flag)

    def merge(self, other: Extensions) -> Extensions:
        """*self* with *other*'s values where it has none (earlier lines win)."""
        if self.delay is None:
            self.delay = other.delay
        if self.rate is None:
            self.rate = other.rate
        for key, flag in other.signals.items():
            self.signals.setdefault(key, flag)
        return self


def summarise(lines: list[ExtensionLine], invalid: list[int]) -> Extensions:
    """The valid values of one run's lines; *invalid* receives bad lines' numbers."""
    found = Extensions()
    seen: dict[tuple[str, str], object] = {}  # a value written again is read once
    for field, value, line in lines:
        interpret = INTERPRET.get(field)
        if interpret is None:
            continue  # kept for extension_lines() only
        key = (field, value)
        parsed = seen.get(key, seen)
        if parsed is seen:
            parsed = seen[key] = interpret(value)
        if parsed is None:
            invalid.append(line)
        else:
            found.add(field, parsed)
    return found


def _summarise_steps(
    lines: list[ExtensionLine], invalid: list[int], step: int
) -> Generator[None, None, Extensions]:
    """summarise, *step* lines at a time (0: at once), yielding None before each slice."""
    if not step or len(lines) <= step:
        return summarise(lines, invalid)
    found = Extensions()
    for low in range(0, len(lines), step):
        yield None
        found.merge(summarise(lines[low : low + step], invalid))
    return found


Interpreted = tuple[dict[str, "Extensions"], "Extensions | None"]


def interpret_steps(
    per_token: dict[str, list[list[ExtensionLine]]],
    preamble: list[ExtensionLine],
    log: IssueLog,
    step: int,
) -> Iterator[Interpreted | None]:
    """Each token's extension values, reading every run's lines once (linear), and
    those of the *preamble* (lines before any user-agent line); invalid values and
    preamble lines that are not content signals are reported to *log*. Yields None
    after about every *step* lines or tokens (0: never), and the result last."""
    invalid: list[int] = []
    by_run: dict[int, Extensions] = {}
    summaries: dict[str, Extensions] = {}
    done = 0  # lines and tokens since the last yield
    for token, runs in per_token.items():
        found = None
        own = False  # found is this token's own object, not a run's shared summary
        for lines in runs:
            summary = by_run.get(id(lines))
            if summary is None:
                if step and len(lines) > step:
                    summary = yield from _summarise_steps(lines, invalid, step)
                else:
                    summary = summarise(lines, invalid)
                by_run[id(lines)] = summary
                done += len(lines)
            if found is None:
                found = summary  # shared, read-only: most tokens have one group
            else:
                if not own:
                    found, own = Extensions().merge(found), True
                found.merge(summary)
        if found is not None:
            summaries[token] = found
        done += 1
        if step and done >= step:
            done = 0
            yield None
    preamble_summary = None
    if preamble:  # before any user-agent line only content signals apply, file-wide
        signals = [e for e in preamble if e.field == "content-signal"]
        preamble_summary = yield from _summarise_steps(signals, invalid, step)
        outside = (e.line for e in preamble if e.field != "content-signal")
        log.found.extend((line, RULE_OUTSIDE_GROUP) for line in outside)
        # applied, but not as RFC 9309 §2.2 reads a line outside a group: a site owner
        # reading the report sees that it reaches every crawler
        # (an invalid one is reported as such: it reaches no one)
        bad = set(invalid)
        log.found.extend((e.line, SIGNAL_FOR_EVERYONE) for e in signals if e.line not in bad)
    log.found.extend((line, INVALID_VALUE) for line in invalid)
    yield summaries, preamble_summary
