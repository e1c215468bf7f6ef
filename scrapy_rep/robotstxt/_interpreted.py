"""A group's first checks, answered by scanning its rules instead of compiling them.

Compiling a group (see _compile.compile_group) builds the index that makes every
later check fast, but it costs as much as several checks that simply scan the group's
rules, and many crawls ask a site's robots.txt about a handful of URLs only.  So a
group is scanned until the scans have cost about what compiling it would, and then
compiled: whichever way the crawl goes, that costs at most about twice what the
better choice in hindsight would have (the ski-rental bound).

Costs are counted in a model, not measured, so that which checks scan does not depend
on the machine's load.  Its unit is about the time to scan one rule (~0.03-0.06 µs).
A scan is charged what it costs beyond a check of the compiled group, and compiling
what it costs beyond the scans it ends; both were re-fitted (notes/checks.md) from
the real flow on the 4,231 files of the benchmark corpus: parse, then checks of the
file's own URLs one after another, each group scanned, or compiled at once, side by
side.  That put the break-even at 2-6 checks for every size of group (a scan's fixed
part and its wildcard rules matched in full cost far more than the old fit said):

    a scan:     37 + n + 75 w  (n rules, w wildcard rules matched in full; the 37
                               includes the slower path a scanned check takes)
    compiling: 300 + 12 n

so a plain group of 12 rules is scanned 9 times, a group of 50 rules that matches
two wildcard rules in full per check 4 times (the old model, 20 + n + 9 w against
340 + 8 n, scanned them 14 and 9 times).  A group of more than SCAN_MAX_RULES
rules, or of COMPILE_WILDCARDS wildcard rules (see _probes), is compiled at its first
check: a scan of it would cost more than twice a compiled check.

A scan gives exactly the compiled matcher's verdicts (RFC 9309 §2.2.2: the longest
matching pattern decides, allow wins a tie) from the same normalised patterns; the
tests check the two against each other.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from itertools import chain, compress, count, repeat
from operator import gt, itemgetter, ne
from typing import TypeAlias

from scrapy_rep.robotstxt._escapes import PLAIN_OK
from scrapy_rep.robotstxt._matcher import Rules, merged_rules, normalised_rules, pattern_matches
from scrapy_rep.robotstxt._probes import MANY_WILDCARDS

__all__ = [
    "SCAN_MAX_OCTETS",
    "Scan",
    "compile_cost",
    "plain_scan",
    "prepare_scan",
    "scan_allows",
    "scan_best",
    "scan_rule",
    "windowed",
]

# The cost model (see the module docstring).
SCAN_FIXED = 37
SCAN_PER_WILDCARD_MATCH = 75
COMPILE_FIXED = 300
COMPILE_PER_RULE = 12
# A group of more rules is compiled at its first check: a scan of it would cost more
# than twice a compiled check (bench_parser.py, "scanned vs compiled").
SCAN_MAX_RULES = 2000
# Nor is a group whose patterns hold more octets than this: preparing its scan
# normalises them in one piece (a few rules of 16,000 "$" each: 1.5 MB out, 11-12 ms),
# while the compile normalises them in slices a caller can run as bounded steps
# (prepare_steps; SPEC "cost"). Real groups are far smaller: a file this large is rare.
SCAN_MAX_OCTETS = 65_536
# A group of this many wildcard rules is compiled at its first check: a scan matches
# each in full (a few ms for hostile ones), the compiled group finds their probes in
# one pass (see _probes); fewer are scanned, as a first check of such a real group
# costs less than compiling it.
COMPILE_WILDCARDS = 4 * MANY_WILDCARDS

# (each rule's guard: the pattern up to its first "*" or final "$"; line marks; the
# whole normalised patterns, or None when every guard is its whole pattern)
# the guards again as a tuple, for one C-level bytes.startswith(tuple) that tells
# whether any rule can match: most URLs a crawl checks match none; for a group of
# more than WINDOW_FROM rules, its guards sorted (see _candidates), else None;
# each rule's last piece, after its last "*" (see scan_allows), or None when every
# guard is its whole pattern)
Window: TypeAlias = tuple[list[bytes], list[int], list[int]]
Scan: TypeAlias = tuple[
    list[bytes],
    "array[int]",
    "list[bytes] | None",
    tuple[bytes, ...],
    "Window | None",
    "list[bytes] | None",
]
WINDOW_FROM = 24

_GUARD = itemgetter(0)
_REST = itemgetter(2)


def prepare_scan(runs: list[Rules], originals: dict[int, str]) -> Scan:
    """What the scans need for the rules of *runs*: C-level passes, no per-rule loop.

    *originals* receives {line: pattern as written} as compile_group would fill it.
    """
    patterns, marks = merged_rules(runs)
    patterns, joined = normalised_rules(patterns, marks, originals)
    if 0x2A not in joined and 0x24 not in joined:  # no "*" or "$": plain prefixes
        return patterns, marks, None, tuple(patterns), None, None
    # after normalisation a "$" can only be a pattern's last octet
    stems = map(bytes.removesuffix, patterns, repeat(b"$")) if 0x24 in joined else patterns
    parts = list(map(bytes.partition, stems, repeat(b"*")))
    guards = list(map(_GUARD, parts))
    # what follows the first "*" (b"" for a rule without one), cut to its last piece
    lasts = list(map(_REST, parts))
    if 0x2A in b"".join(lasts):  # (some rule holds more than one "*")
        lasts = list(map(_REST, map(bytes.rpartition, lasts, repeat(b"*"))))
    return guards, marks, patterns, tuple(guards), None, lasts


def plain_scan(patterns: bytes, marks: array[int]) -> tuple[Scan, int] | None:
    """The scan of one run's rules (*patterns* joined by "\n", as parsed) and what
    compiling them costs, when every rule is a plain prefix that needs no normalising
    (no "%", "*" or "$", no octet outside URIs: most groups): one C-level check and
    one split, none of prepare_scan's passes.  None for any other run."""
    if not marks or patterns.translate(None, PLAIN_OK):
        return None
    guards = patterns.split(b"\n")
    return (guards, marks, None, tuple(guards), None, None), (
        COMPILE_FIXED + COMPILE_PER_RULE * len(guards)
    )


def windowed(scan: Scan) -> Scan:
    """*scan* with its window (see _candidates): the guards in sorted order, their
    positions, and the positions of the guards shorter than two octets.  Not built
    for a group small enough to scan whole; a larger one gets it before its first
    scan, which then looks at the window only (the sort costs about one pass over
    all the guards, a map of startswith at ~0.09 us a guard, up to a few hundred
    rules; the first check used to pay both)."""
    guards = scan[0]
    if scan[4] is not None or len(guards) <= WINDOW_FROM:
        return scan
    order = sorted(range(len(guards)), key=guards.__getitem__)
    short = list(compress(count(), map(gt, repeat(2), map(len, guards))))
    return (*scan[:4], (list(map(guards.__getitem__, order)), order, short), scan[5])


def _candidates(scan: Scan, path: bytes) -> Iterator[int]:
    """Positions of the rules whose guard *path* starts with.

    A guard of two octets or more that *path* starts with shares its first two octets
    and sorts between them and *path*: with the guards sorted, two bisects leave a
    window of the few that can (the shorter guards are tried apart)."""
    guards, _, _, _, window, _ = scan
    if window is None:
        return compress(count(), map(path.startswith, guards))
    ordered, order, short = window
    a = bisect_left(ordered, path[:2])
    b = bisect_right(ordered, path, a)
    found = compress(order[a:b], map(path.startswith, ordered[a:b]))
    if not short:
        return found
    return chain(compress(short, map(path.startswith, map(guards.__getitem__, short))), found)


def compile_cost(scan: Scan) -> int:
    """What compiling the scanned group costs, in the model's units; 0 (compile at
    once) for a group of many wildcard rules, whose scans would match each in full
    while the compiled group looks for all their probes in one pass (see _probes)."""
    guards, _, patterns, _, _, _ = scan
    if len(guards) > SCAN_MAX_RULES:
        return 0
    if patterns is not None and len(patterns) >= COMPILE_WILDCARDS:
        wildcards = sum(map(ne, map(len, guards), map(len, patterns)))
        if wildcards >= COMPILE_WILDCARDS:
            return 0
    return COMPILE_FIXED + COMPILE_PER_RULE * len(guards)


def scan_allows(scan: Scan, path: bytes) -> tuple[bool, int]:
    """Whether the rules allow the normalised *path* (/robots.txt is the caller's),
    and what the scan cost in the model's units.

    A rule can match only if *path* starts with its guard, so one C-level pass over
    the guards leaves the few candidates; among those that match, the highest
    precedence (2 * length, less 1 for disallow) decides.  A wildcard rule can match
    only if its last piece occurs after its guard: one C-level find leaves out most
    of them before they are matched in full.
    """
    guards, marks, patterns, any_guard, _, lasts = scan
    cost = SCAN_FIXED + len(guards)
    if not path.startswith(any_guard):
        return True, cost  # no rule can match: allowed
    best = 0  # no rule: allowed (every stored pattern has precedence >= 1)
    if patterns is None:
        for i in _candidates(scan, path):
            rank = 2 * len(guards[i]) - (marks[i] & 1)
            if rank > best:
                best = rank
    else:
        for i in _candidates(scan, path):
            pattern = patterns[i]
            rank = 2 * len(pattern) - (marks[i] & 1)
            if rank <= best:
                continue
            # a pattern longer than its guard holds "*" or "$": match it in full
            guard = len(guards[i])
            if len(pattern) != guard:
                if path.find(lasts[i], guard) < 0:  # type: ignore[index]
                    continue
                cost += SCAN_PER_WILDCARD_MATCH
                if not pattern_matches(pattern, path):
                    continue
            best = rank
    return not best & 1, cost  # the low bit of a rank is set for disallow rules


def scan_best(scan: Scan, path: bytes) -> tuple[int, int]:
    """Position of the deciding rule for the normalised *path* in the scan, or -1,
    and what the scan cost in the model's units.

    For explain(): among rules of equal precedence (equal length and kind, so the
    verdict is the same) it picks the one the compiled group picks, so that the line
    reported does not change when the group is compiled.  The compiled group prefers
    a plain prefix (a literal, maybe written with trailing "*"s) to a wildcard rule,
    the first literal in file order, and the wildcard rule with the longest guard,
    then the first in file order.
    """
    guards, marks, patterns, any_guard, _, lasts = scan
    cost = SCAN_FIXED + len(guards)
    if not path.startswith(any_guard):
        return -1, cost
    best = -1
    best_key = (0, 0, 0, 0)
    for i in _candidates(scan, path):
        guard = guards[i]
        pattern = guard if patterns is None else patterns[i]
        if len(pattern) != len(guard):
            if path.find(lasts[i], len(guard)) < 0:  # type: ignore[index]
                continue  # (see scan_allows)
            cost += SCAN_PER_WILDCARD_MATCH
            if not pattern_matches(pattern, path):
                continue
        rank = 2 * len(pattern) - (marks[i] & 1)
        if pattern[-1:] != b"$" and pattern.rstrip(b"*") == guard:
            key = (rank, 1, 0, -i)  # a literal
        else:
            key = (rank, 0, len(guard), -i)
        if key > best_key:
            best, best_key = i, key
    return best, cost


def scan_rule(scan: Scan, n: int) -> tuple[int, bytes]:
    """Line mark and normalised pattern of rule *n* of the scan (see scan_best)."""
    guards, marks, patterns, _, _, _ = scan
    return marks[n], (guards if patterns is None else patterns)[n]
