"""Literal rules of a group as a sorted prefix forest (see _matcher.literal_rule).

Each distinct guard gets its parent, the position of its longest proper prefix among
the guards (-1 for none), so that the guards a path starts with are one bisect and a
short walk away.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterator
from itertools import compress, count, repeat
from operator import ge
from typing import TypeAlias

__all__ = [
    "WALK_STEP",
    "parents",
    "parents_steps",
    "plain_literals",
    "plain_literals_steps",
    "ranked_chain",
]


def _after(prefix: bytes) -> bytes | None:
    """The least bytes string above every string that starts with *prefix* (None:
    there is none)."""
    stem = prefix.rstrip(b"\xff")
    return stem[:-1] + bytes((stem[-1] + 1,)) if stem else None


def parents(guards: list[bytes]) -> array[int]:
    """Each sorted guard's longest proper prefix among them (-1 for none): see
    parents_steps, run at once."""
    found = array("i", [-1]) * len(guards)
    for _ in parents_steps(guards, found):
        pass
    return found


# parents_steps yields after walking about this many guards (a few ms at most)
WALK_STEP = 4096


def parents_steps(guards: list[bytes], found: array[int]) -> Iterator[None]:
    """Fill *found* (-1 for each guard) with each sorted guard's longest proper prefix
    among them (-1 for none), yielding after every WALK_STEP guards walked.

    In sorted order the guards that start with a guard follow it in one run (its
    subtree), and a guard without a parent (a root) starts no run unless the next
    guard starts with it: so only the runs are walked, one bisect each, and most
    guards (roots of no run, in real files) are never visited in Python.  Within a
    run a guard's parent is the guard before it when that is a prefix of it;
    otherwise it is on the previous guard's chain of prefixes.  (Guards that are
    prefixes of one another by the thousand, "/1", "/10", "/100", are walked in steps.)
    """
    n = len(guards)
    child = list(map(bytes.startswith, guards[1:], guards[:-1]))
    end = 0
    walked = 0  # guards walked since the last yield
    for root in compress(count(), child):
        if root < end:
            continue  # inside the run of an earlier root
        after = _after(guards[root])
        end = n if after is None else bisect_left(guards, after, root + 1)
        for low in range(root + 1, end, WALK_STEP):
            if walked >= WALK_STEP:
                walked = 0
                yield
            high = min(low + WALK_STEP, end)
            walked += high - low
            for i in range(low, high):
                if child[i - 1]:
                    found[i] = i - 1
                    continue
                up = found[i - 1]
                guard = guards[i]
                while not guard.startswith(guards[up]):
                    up = found[up]
                found[i] = up


Literals: TypeAlias = tuple[tuple[bytes, ...], "array[int]", "array[int]"]


def plain_literals(
    literal: list[int] | None, patterns: list[bytes], codes: list[int], packed: list[int]
) -> Literals:
    """The literal rules (positions in *patterns*; None: all of them) as a sorted
    prefix forest: plain_literals_steps run at once."""
    for found in plain_literals_steps(literal, patterns, codes, packed):  # noqa: B007
        pass
    return found  # type: ignore[return-value]  # (the last item is the forest)


def plain_literals_steps(
    literal: list[int] | None, patterns: list[bytes], codes: list[int], packed: list[int]
) -> Iterator[Literals | None]:
    """The literal rules (positions in *patterns*; None: all of them) as a sorted
    prefix forest, in mostly C-level calls: yields None between them (for a caller
    that runs them in steps) and, last, the distinct guards in sorted order, each
    one's parent (see parents) and their packed codes (of the deciding rule among
    equal guards)."""
    if literal is None:  # the common case: every rule is a plain prefix
        first = dict(zip(patterns, packed, strict=True))
        if len(first) == len(patterns):
            yield None
            lits = sorted(first)
            lit_codes = array("q", list(map(first.__getitem__, lits)))
            yield None
            found = array("i", [-1]) * len(lits)
            yield from parents_steps(lits, found)
            yield tuple(lits), found, lit_codes
            return
        literal = list(range(len(patterns)))
    by_guard = dict(zip(map(patterns.__getitem__, literal), literal, strict=True))
    if len(by_guard) < len(literal):
        yield None
        # equal guards: the deciding rule is the one of highest precedence, then
        # the first in file order, and it must be the last one the dict sees
        literal.sort(key=codes.__getitem__, reverse=True)
        literal.reverse()
        by_guard = dict(zip(map(patterns.__getitem__, literal), literal, strict=True))
    yield None
    lits = sorted(by_guard)
    lit_codes = array("q", list(map(packed.__getitem__, map(by_guard.__getitem__, lits))))
    yield None
    found = array("i", [-1]) * len(lits)
    yield from parents_steps(lits, found)
    yield tuple(lits), found, lit_codes


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
