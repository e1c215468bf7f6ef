"""Which of a group's many wildcard probes occur in a path: one multi-pattern pass.

A wildcard rule is matched in full only when its probe (its longest literal piece
after the first "*", see _compile.compile_group) occurs in the path.  Looking for
each probe in turn costs one substring search per rule on every check: with tens of
thousands of wildcard rules (a hostile file) that is 100-400 ms per check, and a
search for "a…Xa…" in "aaaa…" is itself quadratic in CPython's default search.

So a group with many wildcard rules keeps its distinct probes in an index, and a
check asks it once for the set of probes present in the path:

- a probe of at most GRAM octets is present exactly when it is one of the path's
  substrings of its length: the set of those is built in C (one slice per position
  and length) and intersected with the probes of that length;
- a longer probe can be present only if each of its GRAM-grams at a stride of GRAM
  (and its last one) is among the path's GRAM-grams: one C-level subset test per
  probe; only the probes that pass are searched for.

Per check that is O(GRAM x path length) for the short probes plus one subset test per
long probe, whatever the number of rules: ~1-3 ms for 30,000 probes and a 2,080
character path, instead of 200 ms.  (A long probe built so that every gram of it is
in the path while the probe is not still costs one substring search: such files are
the residual case noted in notes/parser.md.)
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from itertools import compress
from operator import itemgetter
from typing import TypeAlias

__all__ = [
    "GRAM",
    "MANY_WILDCARDS",
    "ProbeIndex",
    "index_pays",
    "present_probes",
    "probe_index",
    "probe_index_steps",
]

GRAM = 8
# from this many wildcard rules in a group, checks use the index (below it, one
# substring search per rule is quicker: measured on the corpus, whose largest
# wildcard groups have a few dozen rules)
MANY_WILDCARDS = 64

# (short probes by length, long probes, each long probe's grams, the number of
# wildcard rules the index serves)
ProbeIndex: TypeAlias = tuple[
    dict[int, frozenset[str]], tuple[str, ...], tuple[frozenset[str], ...], int
]

# The cost model of index_pays, in ns on the machine it was fitted on: a substring
# search per rule costs about SEARCH + length / 2, the index SLICE per substring of
# each short length and GRAM_TEST per long probe.
SEARCH, SLICE, GRAM_TEST = 60, 60, 100


def index_pays(index: ProbeIndex, length: int) -> bool:
    """Whether the index is cheaper than a substring search per rule for a path of
    *length* (short URLs against a few hundred rules: rather not).  Where it is not,
    the searches cost at most a few ms even when built to be slow."""
    short, long, _, rules = index
    # (a long probe can cost its length times the path's in CPython's search: counted
    # as twice the path, so that a few hundred such probes take the index)
    searches = rules * (SEARCH + length // 2) + len(long) * length * 2
    return searches > len(short) * length * SLICE + len(long) * GRAM_TEST


# a long probe's grams: its GRAM-grams at a stride of GRAM, and its last one
_STRIDE = re.compile(f".{{{GRAM}}}", re.DOTALL)
_LAST_GRAM = itemgetter(slice(-GRAM, None))


def _grams(long: tuple[str, ...]) -> tuple[frozenset[str], ...]:
    """Each long probe's grams, in C-level passes (no Python call per probe)."""
    strided = map(frozenset, map(_STRIDE.findall, long))
    return tuple(map(frozenset.union, strided, zip(map(_LAST_GRAM, long))))


def probe_index(probes: list[str]) -> ProbeIndex:
    """The index of *probes* (duplicates allowed), built in C-level passes."""
    for found in probe_index_steps(probes):  # noqa: B007 (the last one)
        pass
    return found  # type: ignore[return-value]  # (the last item is the index)


# probe_index_steps yields after the grams of this many long probes (~2 ms)
GRAMS_STEP = 1024


def probe_index_steps(probes: list[str]) -> Iterator[ProbeIndex | None]:
    """probe_index in steps: yields None between its passes (and after the grams of
    every GRAMS_STEP long probes), and the index last."""
    items = sorted(set(probes), key=len)
    yield None
    lengths = list(map(len, items))
    short: dict[int, frozenset[str]] = {}
    start = bisect_right(lengths, 0)
    for length in range(1, GRAM + 1):
        end = bisect_right(lengths, length, start)
        if end > start:
            short[length] = frozenset(items[start:end])
        start = end
    long = tuple(items[start:])
    if len(long) <= GRAMS_STEP:
        yield short, long, _grams(long), len(probes)
        return
    grams: list[frozenset[str]] = []
    for low in range(0, len(long), GRAMS_STEP):
        yield None
        grams.extend(_grams(long[low : low + GRAMS_STEP]))
    yield short, long, tuple(grams), len(probes)


def _substrings(text: str, length: int) -> set[str]:
    n = len(text) - length + 1
    return set(map(text.__getitem__, map(slice, range(n), range(length, length + n))))


def present_probes(index: ProbeIndex, text: str) -> frozenset[str] | set[str]:
    """The probes of *index* that occur in *text* ("" always does)."""
    short, long, keys, _ = index
    found = {""}
    grams: set[str] | None = None
    for length, probes in short.items():
        if 0 < length <= len(text):
            subs = _substrings(text, length)
            found.update(probes.intersection(subs))
            if length == GRAM:
                grams = subs
    if long and len(text) >= GRAM:
        if grams is None:
            grams = _substrings(text, GRAM)
        found.update(p for p in compress(long, map(grams.issuperset, keys)) if p in text)
    return found
