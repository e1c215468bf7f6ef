"""robots.txt bytes -> groups of rules (RFC 9309 §2.1-§2.2, Google's leniencies).

It works on bytes so that invalid UTF-8 can never stop it: rule values stay raw octets
until matching normalises them (RFC 9309 §2.2.2). A loop with constant work per line
(a rule line costs one partition, one memo look-up and two appends) assigns the fields
to groups; comments and empty values are dealt with after it, in C-level passes.
"""

from __future__ import annotations

import re
from array import array
from collections import deque
from collections.abc import Generator, Iterable, Iterator
from itertools import accumulate, compress, count, repeat
from operator import itemgetter, not_

from scrapy_rep.robotstxt._extensions import ExtensionLine, Extensions, interpret_steps
from scrapy_rep.robotstxt._issues import (
    EMPTY_VALUE,
    INVALID_VALUE,
    MARKUP,
    MISSING_COLON,
    NOT_A_FIELD,
    RULE_OUTSIDE_GROUP,
    UNKNOWN_FIELD,
    IssueLog,
    Pending,
)
from scrapy_rep.robotstxt._issues import TYPO as TYPO_ISSUE
from scrapy_rep.robotstxt._lines import (
    DISALLOW,
    EXT,
    EXT_NAMES,
    FIELD_START,
    HASH,
    KINDS,
    MAX_LINE,
    OTHER,
    SITEMAP,
    TYPO,
    UA,
    UA_TOKENS,
    cut_long_lines,
    field_kind,
    is_blank,
    is_markup,
    may_hold_field,
    prepare,
    split_line,
    ua_token,
)

# RFC 9309 §2.5: crawlers must parse at least the first 500 KiB.
DEFAULT_MAX_SIZE = 512_000

_ABSOLUTE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^/?#\s]")
_BEFORE = itemgetter(0)

# kinds_get's answer for a field name not seen before (greater than every kind, so
# that the hot path's single comparison sends it on)
UNSEEN = 1 << 16


class ParseResult:
    """What the parser found, keyed by lower-cased product token ("*" = default); RobotsTxt
    takes its fields and drops it."""

    def __init__(self) -> None:
        # token -> the runs naming it; same-name groups merge (RFC 9309 §2.2.1)
        self.groups: dict[str, list[Run]] = {}
        # token -> extension lines of each of its runs (lists shared between the
        # tokens of one run: never copied, so memory stays linear)
        self.extensions: dict[str, list[list[ExtensionLine]]] = {}
        # extension lines before any user-agent line
        self.preamble: list[ExtensionLine] = []
        # token -> its interpreted extension values, and those of the preamble
        self.summaries: dict[str, Extensions] = {}
        self.preamble_summary: Extensions | None = None
        self.sitemaps: list[str] = []
        # line -> pattern as written, where explain() cannot rebuild it
        self.originals: dict[int, str] = {}
        self.rule_count = 0
        self.truncated = False
        self.issues: Pending | None = None
        # the count of each kind, when not all issues are kept (else counted on demand)
        self.issue_counts: dict[str, int] | None = None


def parse(content: bytes | bytearray | memoryview | str, max_size: int) -> ParseResult:
    """*content* parsed at once: parse_steps run to its end, with no pause."""
    return deque(parse_steps(content, max_size, 0), maxlen=1)[0]  # type: ignore[return-value]


# parse_steps' default: lines per step (a few ms for the slowest lines, user-agent
# lines of a file of tens of thousands of groups) and post-loop items per step
LINES_STEP = 2048


def parse_steps(
    content: bytes | bytearray | memoryview | str, max_size: int, step: int = LINES_STEP
) -> Iterator[ParseResult | None]:
    """Parse *content*, yielding None after every *step* lines and between the phases
    after the line loop (0: no pause at all), and the ParseResult last."""
    res = ParseResult()
    log = IssueLog()
    issue = log.found.append
    if content.__class__ is bytes and len(content) <= max_size and content[:1] != b"\xef":
        data = content  # (the common case: nothing to convert, cut or skip)
    else:
        data, res.truncated = prepare(content, max_size, log)
    groups = res.groups
    kinds_get = KINDS.get
    ua_tokens = UA_TOKENS
    # every run's raw rule values and line marks, in file order; starts[n]: where
    # run n's begin (its placeholder is runs[n], filled in by fill_runs)
    values: list[bytes] = []
    marks: list[int] = []  # (a list: its append is cheaper than an array's)
    # Rules before the first user-agent line go to these instead, to become issues after
    # the loop (RFC 9309 §2.2.2 ignores them): the hot path appends with no test.
    stray: list[int] = []
    ignored: list[bytes] = []
    add_value, add_mark = ignored.append, stray.append
    starts: list[int] = []
    runs: list[Run] = []
    # tokens of the user-agent run being filled (a dict: constant-time membership,
    # so a run of thousands of user-agent lines stays linear)
    tokens: dict[str, None] = {}
    run_start = 0
    extras: list[ExtensionLine] | None = None  # the run's extension lines, if any
    in_rules = False  # a Content-Usage line has been seen since the last user-agent

    # (bytes.splitlines ends a line at LF, CRLF or CR, as RFC 9309 §2.2 does, in one
    # pass; replacing CR first and splitting on LF is fewer instructions but slower)
    if step:
        yield None
    lines = data.splitlines()
    if step:
        yield None
    if len(data) > MAX_LINE:
        lines = cut_long_lines(lines, log)
    markup = is_markup(data, len(lines))
    if markup:
        # Mostly page markup (an HTML page served as robots.txt): only lines whose first
        # non-blank octet can start a field name can matter (found in C: _numbered).
        issue((1, MARKUP))
    if not step or len(lines) <= step:
        slices: Iterable[Iterable[tuple[int, bytes]]] = (_numbered(lines, 0, markup),)
    else:
        slices = (_numbered(lines[a : a + step], a, markup) for a in range(0, len(lines), step))
    for numbered in slices:
        if step:
            yield None
        # (line2 is the line number times two: a rule's line mark less its kind bit)
        for line2, line in numbered:
            # The hot path: most lines are rules written "Field: value" with a field name
            # seen before (the memo holds no name with a colon: a hit ends at the first).
            key, sep, value = line.partition(b": ")
            if sep:
                kind = kinds_get(key, UNSEEN)
                if kind <= DISALLOW:
                    # (the value is cut at a comment, stripped, and dropped if empty
                    # after the loop, in C: see fill_runs)
                    add_value(value)
                    add_mark(line2 + kind)
                    continue
            elif not line or line[0] == 0x23:
                continue  # empty, or a comment ("#", whatever follows it)
            else:
                kind = UNSEEN
            if kind == UNSEEN:
                key, colon, value = line.partition(b":")
                if colon:
                    kind = kinds_get(key, UNSEEN)
                    if kind == UNSEEN:
                        kind = field_kind(key)
                    if kind <= DISALLOW:
                        add_value(value)
                        add_mark(line2 + kind)
                        continue
                elif line[0] not in FIELD_START:
                    issue((line2 >> 1, NOT_A_FIELD))
                    continue  # not a field (page markup, prose)
                else:
                    kind = HASH  # no colon: maybe Google's "field value" form (two words)
            if kind == HASH:
                split = split_line(line)
                if split is None:
                    if not is_blank(line):
                        issue((line2 >> 1, NOT_A_FIELD))
                    continue
                key, value, has_colon = split
                kind = kinds_get(key, UNSEEN)
                if kind == UNSEEN:
                    kind = field_kind(key)
                if kind in (HASH, OTHER):
                    issue((line2 >> 1, UNKNOWN_FIELD if has_colon else NOT_A_FIELD))
                    continue
                if not has_colon:
                    issue((line2 >> 1, MISSING_COLON))
            elif kind == OTHER:
                issue((line2 >> 1, UNKNOWN_FIELD))
                continue
            else:
                if 0x23 in value:  # (0x23 is "#": an int membership test is one memchr)
                    value = value[: value.find(b"#")]
                value = value.strip()
            if kind & TYPO:
                issue((line2 >> 1, TYPO_ISSUE))
                kind ^= TYPO

            if kind == UA:  # (the commonest line off the hot path)
                if in_rules or not tokens or len(values) != run_start:
                    if not runs:  # the first group: rules are kept from now on
                        add_value, add_mark = values.append, marks.append
                    run_start = len(values)
                    starts.append(run_start)
                    run = Run()
                    runs.append(run)
                    tokens = {}
                    extras = None
                    in_rules = False
                if not value:
                    issue((line2 >> 1, EMPTY_VALUE))
                token = ua_tokens.get(value)
                if token is None:
                    token = ua_token(value)
                if token not in tokens:
                    tokens[token] = None
                    found = groups.get(token)
                    if found is None:
                        groups[token] = [run]  # (a list of one: append would allot four)
                    else:
                        found.append(run)
                    if extras is not None:
                        res.extensions.setdefault(token, []).append(extras)
            elif kind <= DISALLOW:  # a rule line off the hot path
                add_value(value)
                add_mark(line2 + kind)
            elif kind == SITEMAP:
                if value:
                    url = value.decode("utf-8", "replace")
                    res.sitemaps.append(url)
                    # (most are "https://" and a letter or digit: no regex needed)
                    plain = value[8:9].isalnum() and value.startswith(b"https://")
                    if not plain and _ABSOLUTE.match(url) is None:
                        issue((line2 >> 1, INVALID_VALUE))
                else:
                    issue((line2 >> 1, EMPTY_VALUE))
            elif not value:
                issue((line2 >> 1, EMPTY_VALUE))
            else:  # an extension: it belongs to the whole group (run), in file order
                found_line = ExtensionLine(
                    EXT_NAMES[kind - EXT], value.decode("utf-8", "replace"), line2 >> 1
                )
                if found_line.field == "content-usage" and tokens:
                    # draft-ietf-aipref-attach §3 makes Content-Usage a rule ("rule =/"):
                    # a user-agent line after it starts a new group, as after Allow.
                    in_rules = True
                if not tokens:
                    res.preamble.append(found_line)
                elif extras is None:
                    extras = [found_line]
                    # (once a run: a run of thousands of user-agent lines pauses too)
                    for n, token in enumerate(tokens, 1):
                        res.extensions.setdefault(token, []).append(extras)
                        if step and not n % step:
                            yield None
                else:
                    extras.append(found_line)
    if stray:
        log.found.extend([(mark >> 1, RULE_OUTSIDE_GROUP) for mark in stray])
    if step:
        yield None
    # (4 octets a mark when every line * 2 + 1 fits in them, as it does for any file
    # under 1 GiB: a 500 KiB file has fewer than 2**19 lines)
    typecode = "i" if len(data) < 2**30 else "q"
    rule_count = None
    if not runs:
        rule_count = 0  # (no group: no rule kept, nothing to fill)
    elif not step or len(values) <= step:
        rule_count = fill_runs_at_once(runs, starts, values, marks, typecode)
    if rule_count is None:
        rule_count = yield from fill_runs(
            runs, starts, values, marks, typecode, log, res.originals, step
        )
    res.rule_count = rule_count
    if res.extensions or res.preamble:
        for interpreted in interpret_steps(res.extensions, res.preamble, log, step):
            if interpreted is None:
                yield None
        res.summaries, res.preamble_summary = interpreted  # type: ignore[misc]  # (the last)
    if log.found or log.limit:
        if step:
            yield None
        res.issues, res.issue_counts = log.finish(lines)
    yield res


def _numbered(lines: list[bytes], before: int, markup: bool) -> Iterable[tuple[int, bytes]]:
    """(line number * 2, line) of *lines*, which follow *before* lines of the file;
    of a page of markup only the lines that can hold a field."""
    numbered = zip(count(before * 2 + 2, 2), lines)
    return compress(numbered, may_hold_field(lines)) if markup else numbered


class Run:
    """Rules of one user-agent run, filled after the line loop: its patterns joined by
    "\n" (one bytes object per run, not per rule: a parsed file is kept while its origin
    is crawled), and per rule its line mark, line * 2 + (1 for disallow)."""

    __slots__ = ("marks", "patterns")

    patterns: bytes
    marks: array[int]


def run_rules(run: Run) -> tuple[list[bytes], array[int]]:
    """(patterns, line marks) of *run*, as compiling takes them."""
    marks = run.marks
    return (run.patterns.split(b"\n") if marks else []), marks


def fill_runs_at_once(
    runs: list[Run], starts: list[int], values: list[bytes], marks: list[int], typecode: str
) -> int | None:
    """fill_runs for most files, with no generator to run: the number of rules, or None
    (nothing changed) when a value holds a comment, is empty or names an index.html."""
    patterns = list(map(bytes.strip, values))
    if not all(patterns):
        return None
    joined = b"\n".join(patterns)
    if 0x23 in joined or b"/index.htm" in joined:
        return None
    if len(runs) == 1:  # (the most common file)
        runs[0].patterns = joined
        runs[0].marks = array(typecode, marks)
    else:
        _fill(runs, starts, patterns, array(typecode, marks))
    return len(patterns)


def _fill(runs: list[Run], starts: list[int], patterns: list[bytes], marks: array[int]) -> None:
    """Fill each run with its slice of *patterns* and *marks* (run n's begin at starts[n])."""
    for run, a, b in zip(runs, starts, [*starts[1:], len(patterns)], strict=True):
        run.patterns = b"\n".join(patterns[a:b])
        run.marks = marks[a:b]


def fill_runs(
    runs: list[Run],
    starts: list[int],
    values: list[bytes],
    marks: list[int],
    typecode: str,
    log: IssueLog,
    originals: dict[int, str],
    step: int,
) -> Generator[None, None, int]:
    """Cut every rule value at a comment, strip it, drop the empty ones (RFC 9309 §2.2.2:
    no restriction), add the index.html rules (their lines to *originals*), fill each
    run; return the number of rules, index.html ones not counted."""
    patterns = list(map(bytes.strip, values))
    if step:
        yield None
    marks_kept = array(typecode, marks)
    if 0x23 in b"".join(values):  # some value holds a comment: cut it ("#")
        if step:
            yield None
        cut = map(_BEFORE, map(bytes.partition, values, repeat(b"#")))
        patterns = list(map(bytes.strip, cut))
    if not all(patterns):
        for i in compress(count(), map(not_, patterns)):
            if not marks[i] & 1:  # an empty Allow says nothing at all
                log.found.append((marks[i] >> 1, EMPTY_VALUE))
        if step:
            yield None
        kept = list(accumulate(map(bool, patterns), initial=0))
        starts = list(map(kept.__getitem__, starts))
        marks_kept = array(typecode, compress(marks, patterns))
        patterns = list(filter(None, patterns))
    rule_count = len(patterns)
    if b"/index.htm" in b"".join(patterns):
        if step:
            yield None
        patterns, marks_kept, starts = yield from _index_rules(
            patterns, marks_kept, starts, originals, step
        )
    if step:
        yield None
    _fill(runs, starts, patterns, marks_kept)
    return rule_count


INDEX_STEP = 4096  # rules between two pauses of _index_rules (a Python loop)


def _index_rules(
    patterns: list[bytes],
    marks: array[int],
    starts: list[int],
    originals: dict[int, str],
    step: int,
) -> Generator[None, None, tuple[list[bytes], array[int], list[int]]]:
    """Google/Protego: "allow: /dir/index.htm[l]" also allows "/dir/" itself, as the
    extra rule "allow: /dir/$" right after it (same line). Yields every INDEX_STEP."""
    fixed: list[bytes] = []
    fixed_marks = array(marks.typecode)
    at = dict.fromkeys(starts, 0)  # old position -> new (runs can start together)
    for i, (value, mark) in enumerate(zip(patterns, marks, strict=True)):
        if step and not i % INDEX_STEP:
            yield None
        if i in at:
            at[i] = len(fixed)
        fixed.append(value)
        fixed_marks.append(mark)
        if not mark & 1 and b"/index.htm" in value:
            slash = value.rfind(b"/")
            if slash >= 0 and value.startswith(b"/index.htm", slash):
                fixed.append(value[: slash + 1] + b"$")
                fixed_marks.append(mark)
                originals[mark >> 1] = value.decode("utf-8", "replace")
    if len(patterns) in at:
        at[len(patterns)] = len(fixed)
    return fixed, fixed_marks, list(map(at.__getitem__, starts))
