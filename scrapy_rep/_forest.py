"""Literal rules of a group as a sorted prefix forest (see _matcher.literal_rule).

Each distinct guard gets its parent, the position of its longest proper prefix among
the guards (-1 for none), so that the guards a path starts with are one bisect and a
short walk away.
"""

from __future__ import annotations

from array import array
from itertools import repeat

__all__ = ["literals", "parents", "plain_literals"]


def parents(guards: list[bytes]) -> array[int]:
    """Each sorted guard's longest proper prefix among them (-1 for none)."""
    parents = array("i")
    stack: list[int] = []
    for node, guard in enumerate(guards):
        while stack and not guard.startswith(guards[stack[-1]]):
            stack.pop()
        parents.append(stack[-1] if stack else -1)
        stack.append(node)
    return parents


def plain_literals(
    literal: list[int], patterns: list[bytes], codes: list[int], packed: list[int]
) -> tuple[tuple[bytes, ...], array[int], array[int]]:
    """_literals when no literal had trailing "*"s: mostly C-level calls.

    A guard is then always longer than its prefixes, so no ancestor can outrank a
    descendant (no chain).  In sorted order a guard's parent is the guard before it
    when that is a prefix of it; otherwise it is found on the previous guard's chain
    of prefixes, which is empty for most guards.
    """
    first = dict(zip(map(patterns.__getitem__, literal), literal, strict=True))
    if len(first) < len(literal):
        # equal guards: the deciding rule is the one of highest precedence, then
        # the first in file order, and it must be the last one the dict sees
        literal.sort(key=codes.__getitem__, reverse=True)
        literal.reverse()
        first = dict(zip(map(patterns.__getitem__, literal), literal, strict=True))
    lits = sorted(first)
    lit_codes = array("q", map(packed.__getitem__, map(first.__getitem__, lits)))
    n = len(lits)
    parents = array("i", repeat(-1, n))
    if n > 1:
        child = list(map(bytes.startswith, lits[1:], lits[:-1]))
        if True in child:
            # guards before the first one with a parent are all roots
            for i in range(child.index(True) + 1, n):
                if child[i - 1]:
                    parents[i] = i - 1
                    continue
                up = parents[i - 1]
                if up < 0:
                    continue
                guard = lits[i]
                while up >= 0 and not guard.startswith(lits[up]):
                    up = parents[up]
                parents[i] = up
    return tuple(lits), parents, lit_codes


def literals(
    literal: list[int], patterns: list[bytes], codes: list[int], packed: list[int]
) -> tuple[tuple[bytes, ...], array[int], array[int], array[int] | None]:
    """The literal rules as a sorted prefix forest (see literal_rule).

    Returns the distinct guards in sorted order, each one's parent (the position of
    its longest proper prefix among them, -1 for none), their packed codes (of the
    deciding rule among equal guards) and, when some ancestor can outrank its
    descendant (a literal written with trailing "*"s keeps their length), the
    position of the deciding rule on each guard's chain of prefixes.
    """
    # equal guards together, the deciding one first (precedence, then file order)
    literal.sort(key=codes.__getitem__, reverse=True)
    literal.sort(key=patterns.__getitem__)
    lits: list[bytes] = []
    parents = array("i")
    lit_codes = array("q")
    chain = array("i")
    ranked = False  # whether some guard's deciding rule is an ancestor's
    stack: list[int] = []  # positions of the prefixes of the last guard
    prev = None
    for j in literal:
        guard = patterns[j]
        if guard == prev:
            continue
        prev = guard
        while stack and not guard.startswith(lits[stack[-1]]):
            stack.pop()
        node = len(lits)
        lits.append(guard)
        lit_codes.append(packed[j])
        if stack:
            parent = stack[-1]
            parents.append(parent)
            up = chain[parent]
            # the ancestor wins on higher precedence, or equal precedence and an
            # earlier line (codes are then equal down to the line bits)
            if lit_codes[up] >> 33 > codes[j] or (
                lit_codes[up] >> 33 == codes[j] and lit_codes[up] < packed[j]
            ):
                chain.append(up)
                ranked = True
                stack.append(node)
                continue
        else:
            parents.append(-1)
        chain.append(node)
        stack.append(node)
    return tuple(lits), parents, lit_codes, chain if ranked else None
