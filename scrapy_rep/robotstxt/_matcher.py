"""Pattern matching and compiled groups (RFC 9309 §2.2.2, §2.2.3).

Patterns and paths are compared normalised (see _normalise). Matching never backtracks:
each literal piece of a pattern split on ``*`` is placed leftmost with ``find`` (optimal
for ``*``), so the worst case is O(len(pattern) * len(path)).
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_right
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import compress
from operator import itemgetter
from typing import NamedTuple


def split_pattern(pattern: bytes) -> tuple[tuple[bytes, ...], bool]:
    """Pre-split a normalised pattern into literal pieces and an end anchor flag."""
    anchored = pattern.endswith(b"$")
    if anchored:
        pattern = pattern[:-1]
    return tuple(pattern.split(b"*")), anchored


def match_pieces(pieces: tuple[bytes, ...], anchored: bool, path: bytes) -> bool:
    """Whether the pattern given by split_pattern matches *path* from its start."""
    first = pieces[0]
    if not path.startswith(first):
        return False
    if len(pieces) == 1:
        return not anchored or len(path) == len(first)
    pos = len(first)
    for piece in pieces[1:-1]:
        if piece:
            found = path.find(piece, pos)
            if found < 0:
                return False
            pos = found + len(piece)
    last = pieces[-1]
    if anchored:
        return len(path) - len(last) >= pos and path.endswith(last)
    return not last or path.find(last, pos) >= 0


# -- which of a group's many wildcard probes occur in a path: one multi-pattern pass --
#
# A wildcard rule is matched in full only when its probe (its longest literal piece
# after the first "*") occurs in the path. With tens of thousands of wildcard rules (a
# hostile file) one search per rule costs 100-400 ms a check, so such a group indexes
# its distinct probes: a short probe is looked up among the path's substrings of its
# length (sets built in C), and a long one is searched for only if its GRAM-grams are
# all among the path's. That is ~1-3 ms for 30,000 probes and a 2,080 character path
# (a probe built to pass the grams test still costs one search: bench_adversarial.py).

GRAM = 8
# from this many wildcard rules in a group, checks use the index (below it one search
# per rule is quicker: measured on the corpus, whose largest have a few dozen)
MANY_WILDCARDS = 64


class ProbeIndex(NamedTuple):
    """The distinct probes of a group's wildcard rules, indexed (see above)."""

    short: dict[int, frozenset[str]]  # probes of at most GRAM octets, by length
    long: tuple[str, ...]  # the longer probes
    grams: tuple[frozenset[str], ...]  # each long probe's grams (see _grams)
    rules: int  # the number of wildcard rules the index serves


# The cost model of index_pays, in ns on the machine it was fitted on: a substring
# search per rule costs about SEARCH + length / 2, the index SLICE per substring of
# each short length and GRAM_TEST per long probe.
SEARCH, SLICE, GRAM_TEST = 60, 60, 100


def index_pays(index: ProbeIndex, length: int) -> bool:
    """Whether the index is cheaper than a substring search per rule for a path of
    *length* (where it is not, the searches cost a few ms at most)."""
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
    return deque(probe_index_steps(probes), maxlen=1)[0]  # type: ignore[return-value]


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
    grams: list[frozenset[str]] = []
    for low in range(0, len(long), GRAMS_STEP):
        yield None
        grams.extend(_grams(long[low : low + GRAMS_STEP]))
    yield ProbeIndex(short, long, tuple(grams), len(probes))


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


# -- compiled groups --
#
# A group's rules are a few flat tuples and arrays, not one object per rule (a parsed
# file stays a few KiB). Each rule has one integer code, precedence << 33 | line << 1 |
# disallow with precedence = 2 * len(pattern) - disallow, so the longest pattern wins
# and allow wins a tie (RFC 9309 §2.2.2). A path can match a rule only if it starts with
# the rule's "guard" (a literal's pattern, a wildcard rule's part before its first
# "*"); the guards of each kind are sorted, each with its longest proper prefix among
# them, so those a path starts with are one bisect and a short walk away.


@dataclass(frozen=True, slots=True)
class Group:
    """One crawler's group compiled (see _compile.compile_steps)."""

    #: the distinct literal guards (plain-prefix patterns), sorted
    literals: tuple[bytes, ...]
    #: each literal guard's longest proper prefix among them (-1: none)
    literal_parents: array[int]
    #: each literal's deciding rule on its chain of prefixes (None: always itself)
    literal_winners: array[int] | None
    #: one code per rule, the literals' then the wildcard rules' (see above)
    codes: array[int]
    #: the distinct wildcard guards (each rule's part before its first "*"), sorted
    wild_guards: tuple[bytes, ...] = ()
    #: each wildcard guard's longest proper prefix among them (-1: none)
    wild_parents: array[int] = field(default_factory=lambda: array("i"))
    #: where each wildcard guard's bucket of rules starts (and, last, the end)
    bucket_starts: array[int] = field(default_factory=lambda: array("i"))
    #: per bucket, the probe (as str) of each of its rules, by precedence
    probes: tuple[tuple[str, ...], ...] = ()
    #: the wildcard rules' normalised patterns, bucket by bucket
    wild_patterns: tuple[bytes, ...] = ()
    #: the probes of a group of many wildcard rules, indexed (see ProbeIndex)
    probe_index: ProbeIndex | None = None
    #: the distinct probes of a few wildcard rules, none empty (else None): a path
    #: holding none of them is matched by no wildcard rule
    quick_probes: tuple[str, ...] | None = None


EMPTY_GROUP = Group((), array("i"), None, array("q"))
# Split wildcard patterns, shared: the same few ("/*?", "/*.pdf$") recur across
# sites, and a pattern is split only when a path passes its guard and probe.
_SPLIT: dict[bytes, tuple[tuple[bytes, ...], bool]] = {}
_CACHE_LIMIT = 4096


def literal_rule(group: Group, path: bytes) -> int:
    """Position of the deciding literal rule for *path*, or -1: the largest guard not
    above *path* starts with every guard *path* starts with, so one bisect and a walk up
    its prefixes find the longest."""
    lits = group.literals
    n = bisect_right(lits, path) - 1
    parents = group.literal_parents
    while n >= 0 and not path.startswith(lits[n]):
        n = parents[n]
    chain = group.literal_winners
    return n if chain is None or n < 0 else chain[n]


def _split(full: bytes) -> tuple[tuple[bytes, ...], bool]:
    if len(_SPLIT) >= _CACHE_LIMIT:
        _SPLIT.clear()
    found = _SPLIT[full] = split_pattern(full)
    return found


def pattern_matches(full: bytes, path: bytes) -> bool:
    """Whether the normalised pattern *full* matches *path* (split once, shared)."""
    pieces, anchored = _SPLIT.get(full) or _split(full)
    return match_pieces(pieces, anchored, path)


def wild_rule(group: Group, path: bytes, best: int, text: str | None = None) -> int:
    """The deciding rule for *path* given *best*, its deciding literal rule (or -1),
    from the buckets of the wildcard guards *path* starts with (*text*: *path* as str)."""
    guards = group.wild_guards
    k = bisect_right(guards, path) - 1
    if k < 0:
        return best
    codes = group.codes
    base = len(group.literals)
    floor = codes[best] >> 33 if best >= 0 else -1
    parents, probes, starts = group.wild_parents, group.probes, group.bucket_starts
    if text is None:
        text = path.decode("ascii")  # normalised paths are ASCII
    # what probes are looked for in: the path, or the set of probes present in it
    index = group.probe_index
    haystack: str | frozenset[str] | set[str] | None = (
        text if index is None or not index_pays(index, len(text)) else None
    )
    while k >= 0:
        start = starts[k]
        if codes[base + start] >> 33 > floor and path.startswith(guards[k]):
            # only rules whose probe occurs in the path are matched in full; probes are
            # str (bytes methods take a buffer, ~1.5x slower), and a plain loop beats C
            # iterators over the few rules of most buckets (measured on the corpus)
            if haystack is None:
                haystack = present_probes(index, text)  # type: ignore[arg-type]
            for j, probe in enumerate(probes[k]):
                if probe not in haystack:
                    continue
                i = start + j
                rank = codes[base + i] >> 33
                if rank <= floor:
                    break  # the bucket is sorted by precedence: none left can win
                full = group.wild_patterns[i]
                pieces, anchored = _SPLIT.get(full) or _split(full)
                if len(pieces) == 2:
                    # one "*": the guard is the first piece, already a prefix
                    last = pieces[1]
                    if anchored:
                        ok = len(path) - len(last) >= len(pieces[0]) and path.endswith(last)
                    else:
                        ok = path.find(last, len(pieces[0])) >= 0
                else:
                    ok = match_pieces(pieces, anchored, path)
                if ok:
                    best = base + i
                    floor = rank
                    break
        k = parents[k]
    return best


def best_rule(group: Group, path: bytes, text: str | None = None) -> int:
    """Position (in the group's codes) of the deciding rule for *path*, or -1 (*text*:
    *path* as str). RobotsTxt.allowed() inlines this."""
    best = literal_rule(group, path)
    wild = group.wild_guards
    if not wild or not path.startswith(wild):
        return best  # no wildcard guard is a prefix of the path
    quick = group.quick_probes
    if quick is not None:
        if text is None:
            text = path.decode("ascii")  # normalised paths are ASCII
        if not any(map(text.__contains__, quick)):
            return best  # no probe in the path: no wildcard rule can match
    return wild_rule(group, path, best, text)


def pattern_at(group: Group, n: int) -> bytes:
    """The stored pattern of rule *n*, for explanations (a literal is stored without
    trailing "*"s: its precedence says how many)."""
    lits = group.literals
    if n >= len(lits):
        return group.wild_patterns[n - len(lits)]
    code = group.codes[n]
    length = ((code >> 33) + (code & 1)) // 2
    return lits[n] + b"*" * (length - len(lits[n]))
