"""A group's first checks, answered by scanning its rules instead of compiling them.

Compiling a group (see _matcher.compile_group) builds the index that makes every
later check fast, but it costs about as much as eight checks that simply scan the
group's rules (the median over the 4,231 real files of the benchmark corpus; 4 at
the 10th percentile, 16 at the 90th).  Many crawls ask a site's robots.txt about a
handful of URLs only, so a group answers its first COMPILE_AFTER checks by scanning
and is compiled on the next one: whichever way the crawl goes, that costs at most
about twice what the better choice in hindsight would have (the ski-rental bound).

A scan gives exactly the compiled matcher's verdicts (RFC 9309 §2.2.2: the longest
matching pattern decides, allow wins a tie) from the same normalised patterns; the
tests check the two against each other.
"""

from __future__ import annotations

from array import array
from itertools import compress, count, repeat
from operator import itemgetter
from typing import TypeAlias

from scrapy_rep._matcher import Rules, match_pieces, merged_rules, normalised_rules, split_pattern

__all__ = ["COMPILE_AFTER", "Scan", "prepare_scan", "scan_allows", "scan_best"]

# Checks a group answers by scanning before it is compiled (see the module docstring).
COMPILE_AFTER = 8

# (each rule's guard: the pattern up to its first "*" or final "$"; line marks; the
# whole normalised patterns, or None when every guard is its whole pattern)
Scan: TypeAlias = tuple[list[bytes], "array[int]", "list[bytes] | None"]

_GUARD = itemgetter(0)


def prepare_scan(runs: list[Rules], originals: dict[int, str]) -> Scan:
    """What the scans need for the rules of *runs*: C-level passes, no per-rule loop.

    *originals* receives {line: pattern as written} as compile_group would fill it.
    """
    patterns, marks = merged_rules(runs)
    patterns, joined = normalised_rules(patterns, marks, originals)
    if 0x2A not in joined and 0x24 not in joined:  # no "*" or "$": plain prefixes
        return patterns, marks, None
    # after normalisation a "$" can only be a pattern's last octet
    stems = map(bytes.removesuffix, patterns, repeat(b"$"))
    guards = list(map(_GUARD, map(bytes.split, stems, repeat(b"*"), repeat(1))))
    return guards, marks, patterns


def scan_allows(scan: Scan, path: bytes) -> bool:
    """Whether the rules allow the normalised *path* (/robots.txt is the caller's).

    A rule can match only if *path* starts with its guard, so one C-level pass over
    the guards leaves the few candidates; among those that match, the highest
    precedence (2 * length, less 1 for disallow) decides.
    """
    guards, marks, patterns = scan
    best = 0  # no rule: allowed (every stored pattern has precedence >= 1)
    if patterns is None:
        for i in compress(count(), map(path.startswith, guards)):
            rank = 2 * len(guards[i]) - (marks[i] & 1)
            if rank > best:
                best = rank
    else:
        for i in compress(count(), map(path.startswith, guards)):
            pattern = patterns[i]
            rank = 2 * len(pattern) - (marks[i] & 1)
            # a pattern longer than its guard holds "*" or "$": match it in full
            if rank > best and (
                len(pattern) == len(guards[i]) or match_pieces(*split_pattern(pattern), path)
            ):
                best = rank
    return not best & 1  # the low bit of a rank is set for disallow rules


def scan_best(scan: Scan, path: bytes) -> int:
    """Position of the deciding rule for the normalised *path* in the scan, or -1.

    For explain(): among rules of equal precedence (equal length and kind, so the
    verdict is the same) it picks the one the compiled group picks, so that the line
    reported does not change when the group is compiled.  The compiled group prefers
    a plain prefix (a literal, maybe written with trailing "*"s) to a wildcard rule,
    the first literal in file order, and the wildcard rule with the longest guard,
    then the first in file order.
    """
    guards, marks, patterns = scan
    best = -1
    best_key = (0, 0, 0, 0)
    for i in compress(count(), map(path.startswith, guards)):
        guard = guards[i]
        pattern = guard if patterns is None else patterns[i]
        if len(pattern) != len(guard) and not match_pieces(*split_pattern(pattern), path):
            continue
        rank = 2 * len(pattern) - (marks[i] & 1)
        if pattern[-1:] != b"$" and pattern.rstrip(b"*") == guard:
            key = (rank, 1, 0, -i)  # a literal
        else:
            key = (rank, 0, len(guard), -i)
        if key > best_key:
            best, best_key = i, key
    return best
