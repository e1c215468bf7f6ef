"""A group's rules as the parser leaves them: runs, filled once the line loop is done.

The line loop (_parser) keeps every rule line's raw value (what follows the colon)
and line mark in file-wide lists, and where each user-agent run's rules begin.
fill_runs then cuts comments, strips, drops empty values and adds the index.html
rules with a handful of C-level passes over the whole file, and gives each run its
patterns joined in one bytes object: no Python work per rule.
"""

from __future__ import annotations

from array import array
from collections.abc import Generator
from itertools import accumulate, compress, count, repeat
from operator import itemgetter, not_

from scrapy_rep.robotstxt._issues import EMPTY_VALUE, IssueLog

__all__ = ["INDEX_STEP", "Run", "fill_runs", "fill_runs_at_once", "run_rules"]

_BEFORE = itemgetter(0)


class Run:
    """Rules of one user-agent run: its patterns joined by "\n" (no pattern holds
    one: lines are split on it), and per rule its line mark, line * 2 + (0 for
    allow, 1 for disallow); compiling turns these into precedence codes (see
    _matcher).  One bytes object per run instead of one per rule, and a slotted
    object (48 octets): a parsed file is kept while its origin is crawled.  The
    parser registers a run before its rules are known and fills it at the end."""

    __slots__ = ("marks", "patterns")

    patterns: bytes
    marks: array[int]


def run_rules(run: Run) -> tuple[list[bytes], array[int]]:
    """(patterns, line marks) of *run*, as compiling and scanning take them."""
    marks = run.marks
    return (run.patterns.split(b"\n") if marks else []), marks


def fill_runs_at_once(
    runs: list[Run], starts: list[int], values: list[bytes], marks: list[int], typecode: str
) -> int | None:
    """fill_runs for most files, at once (a plain function: no generator to start
    and resume): when no value holds a comment, none is empty once stripped and
    none names an index.html, fill the runs and return the number of rules; else
    None, and nothing is changed."""
    patterns = list(map(bytes.strip, values))
    if not all(patterns):
        return None
    if len(runs) == 1:  # (the most common file)
        joined = b"\n".join(patterns)
        if 0x23 in joined or b"/index.htm" in joined:
            return None
        runs[0].patterns = joined
        runs[0].marks = array(typecode, marks)
        return len(patterns)
    ends = [*starts[1:], len(patterns)] if starts else []
    texts = [b"\n".join(patterns[a:b]) for a, b in zip(starts, ends, strict=True)]
    joined = b"\n".join(texts)
    if 0x23 in joined or b"/index.htm" in joined:
        return None
    kept = array(typecode, marks)
    for run, a, b, text in zip(runs, starts, ends, texts, strict=True):
        run.patterns = text
        run.marks = kept[a:b]
    return len(patterns)


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
    """Cut every rule value at a comment, strip it, drop the empty ones (an empty
    value means "no restriction", RFC 9309 §2.2.2), add the index.html rules (see
    _index_rules: *originals* receives their lines), and fill each run with its patterns
    joined and its line marks (*marks*, one per value, kept in arrays of
    *typecode*); return the number of rules kept (the index.html rules not
    counted).  Yields between the passes when *step* (a pause for parse_steps)."""
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
    ends = [*starts[1:], len(patterns)] if starts else []
    for run, a, b in zip(runs, starts, ends, strict=True):
        run.patterns = b"\n".join(patterns[a:b])
        run.marks = marks_kept[a:b]
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
    extra rule "allow: /dir/$" right after it (and the same line).  Yields after
    every INDEX_STEP rules (a pause for parse_steps)."""
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
