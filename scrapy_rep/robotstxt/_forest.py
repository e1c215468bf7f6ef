"""Literal rules of a group as a sorted prefix forest (see _matcher.literal_rule).

Each distinct guard gets its parent, the position of its longest proper prefix among
the guards (-1 for none), so that the guards a path starts with are one bisect and a
short walk away.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from itertools import compress, count, repeat
from operator import ge

__all__ = ["parents", "plain_literals", "ranked_chain"]


def _after(prefix: bytes) -> bytes | None:
    """The least bytes string above every string that starts with *prefix* (None:
    there is none)."""
    stem = prefix.rstrip(b"\xff")
    return stem[:-1] + bytes((stem[-1] + 1,)) if stem else None


def parents(guards: list[bytes]) -> array[int]:
    """Each sorted guard's longest proper prefix among them (-1 for none).

    In sorted order the guards that start with a guard follow it in one run (its
    subtree), and a guard without a parent (a root) starts no run unless the next
    guard starts with it: so only the runs are walked, one bisect each, and most
    guards (roots of no run, in real files) are never visited in Python.  Within a
    run a guard's parent is the guard before it when that is a prefix of it;
    otherwise it is on the previous guard's chain of prefixes.
    """
    n = len(guards)
    found = array("i", [-1]) * n
    child = list(map(bytes.startswith, guards[1:], guards[:-1]))
    end = 0
    for root in compress(count(), child):
        if root < end:
            continue  # inside the run of an earlier root
        after = _after(guards[root])
        end = n if after is None else bisect_left(guards, after, root + 1)
        for i in range(root + 1, end):
            if child[i - 1]:
                found[i] = i - 1
                continue
            up = found[i - 1]
            guard = guards[i]
            while not guard.startswith(guards[up]):
                up = found[up]
            found[i] = up
    return found


def plain_literals(
    literal: list[int] | None, patterns: list[bytes], codes: list[int], packed: list[int]
) -> tuple[tuple[bytes, ...], array[int], array[int]]:
    """The literal rules (positions in *patterns*; None: all of them) as a sorted
    prefix forest, in mostly C-level calls.

    Returns the distinct guards in sorted order, each one's parent (see parents) and
    their packed codes (of the deciding rule among equal guards).
    """
    if literal is None:  # the common case: every rule is a plain prefix
        first = dict(zip(patterns, packed, strict=True))
        if len(first) == len(patterns):
            lits = sorted(first)
            lit_codes = array("q", list(map(first.__getitem__, lits)))
            return tuple(lits), parents(lits), lit_codes
        literal = list(range(len(patterns)))
    by_guard = dict(zip(map(patterns.__getitem__, literal), literal, strict=True))
    if len(by_guard) < len(literal):
        # equal guards: the deciding rule is the one of highest precedence, then
        # the first in file order, and it must be the last one the dict sees
        literal.sort(key=codes.__getitem__, reverse=True)
        literal.reverse()
        by_guard = dict(zip(map(patterns.__getitem__, literal), literal, strict=True))
    lits = sorted(by_guard)
    lit_codes = array("q", list(map(packed.__getitem__, map(by_guard.__getitem__, lits))))
    return tuple(lits), parents(lits), lit_codes


def ranked_chain(parents: array[int], lit_codes: array[int]) -> array[int] | None:
    """Each guard's deciding rule on its chain of prefixes, or None when that is
    always the guard itself (only a literal written with trailing "*"s keeps a
    length that can outrank a longer guard below it)."""
    chain = array("i", range(len(parents)))
    ranked = False
    # parents come before their children in sorted order
    for i in compress(count(), map(ge, parents, repeat(0))):
        up = chain[parents[i]]
        win, own = lit_codes[up], lit_codes[i]
        # the ancestor wins on higher precedence, or equal precedence and an
        # earlier line (codes are then equal down to the line bits)
        if win >> 33 > own >> 33 or (win >> 33 == own >> 33 and win < own):
            chain[i] = up
            ranked = True
    return chain if ranked else None
