"""Pattern matching and compiled groups (RFC 9309 §2.2.2, §2.2.3).

Everything here works on *normalised* strings: both the rule patterns and the URL
path are brought to one canonical percent-encoding before they are compared (see
_escapes), so that equal URIs compare equal whatever escaping the site or the
crawler used.

Matching never backtracks: a pattern is split on ``*`` once, and a URL is checked by
placing each literal piece at its leftmost possible position with ``str.find``.
Greedy leftmost placement is optimal for ``*`` (any run of characters), so the
worst case is O(len(pattern) * len(path)) and typical cases are a few C-level
``find`` calls.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import TypeAlias

from scrapy_rep.robotstxt._escapes import normalise_pattern, normalised_rules
from scrapy_rep.robotstxt._probes import ProbeIndex, index_pays, present_probes

__all__ = [
    "EMPTY_GROUP",
    "Group",
    "Rules",
    "best_rule",
    "literal_rule",
    "match_pieces",
    "merged_rules",
    "normalise_pattern",
    "normalised_rules",
    "pattern_at",
    "pattern_matches",
    "split_pattern",
    "wild_rule",
]


def split_pattern(pattern: bytes) -> tuple[tuple[bytes, ...], bool]:
    """Pre-split a normalised pattern into literal pieces and an end anchor flag."""
    anchored = pattern.endswith(b"$")
    if anchored:
        pattern = pattern[:-1]
    return tuple(pattern.split(b"*")), anchored


def match_pieces(pieces: tuple[bytes, ...], anchored: bool, path: bytes) -> bool:
    """Whether the pattern given by split_pattern matches *path* from its start.

    The first piece must be a prefix; each middle piece is placed at its leftmost
    occurrence after the previous one (leaving the most room for the rest, so no
    other placement can succeed where this one fails); the last piece must occur
    after that, at the very end when anchored.
    """
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


# ---------------------------------------------------------------------------
# Compiled groups.
#
# A group's rules are kept as a few flat tuples rather than one object per rule
# (a parsed file stays a few KiB), sorted by precedence so that the first rule
# that matches is the deciding one (RFC 9309 §2.2.2: longest pattern, allow on a
# tie).  Precedence and line share one integer per rule in an array:
#     code = precedence << 33 | line << 1 | disallow,
#     precedence = 2 * len(pattern) - disallow   (so allow wins a tie).
#
# Plain-prefix rules ("literals") and wildcard rules are kept apart.  A URL path
# can match a rule only if it starts with the rule's "guard" (the pattern itself
# for a literal, the part before the first "*" for a wildcard).  The distinct
# guards of each kind are kept sorted, with each one's parent (its longest proper
# prefix among them): the guards a path starts with are then one guard and its
# ancestors, found by one bisect and a short walk (see literal_rule).  Wildcard
# rules sit in one bucket per guard, by precedence; a rule also needs its "probe",
# the longest literal piece after the first "*", somewhere in the path before the
# general matcher runs.
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Group:
    """One crawler's group compiled (see _compile.compile_steps): plain tuples and
    arrays in named slots, read on every check (a slot is one C-level load)."""

    #: the distinct literal guards (plain-prefix patterns), sorted
    literals: tuple[bytes, ...]
    #: each literal guard's longest proper prefix among them (-1: none)
    literal_parents: array[int]
    #: each literal's deciding rule on its chain of prefixes, or None when that is
    #: always itself (see _compile.ranked_chain)
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
    #: the distinct probes of all the wildcard rules when they are few and none is
    #: empty, else None: a path holding none of them is matched by no wildcard rule
    #: (one C call, see RobotsTxt.allowed)
    quick_probes: tuple[str, ...] | None = None


EMPTY_GROUP = Group((), array("i"), None, array("q"))
# Split wildcard patterns, shared: the same few ("/*?", "/*.pdf$") recur across
# sites, and a pattern is split only when a path passes its guard and probe.
_SPLIT: dict[bytes, tuple[tuple[bytes, ...], bool]] = {}
_CACHE_LIMIT = 4096


Rules: TypeAlias = tuple[list[bytes], "array[int]"]


def merged_rules(runs: list[Rules]) -> Rules:
    """Patterns and line marks of all the runs (merged same-name groups), in file order.

    A single run's own lists are returned, not copies: callers copy before changing.
    """
    if len(runs) == 1:
        return runs[0]
    return [p for r in runs for p in r[0]], array("q", [m for r in runs for m in r[1]])


def literal_rule(group: Group, path: bytes) -> int:
    """Position of the deciding literal rule for *path*, or -1.

    The guards that *path* starts with are the ancestors (prefixes) of one guard,
    and the largest guard not above *path* in sort order is either one of them or
    shares with *path* every one of them: so one bisect and a short walk up the
    chain of prefixes find the longest, in C calls but for the walk.
    """
    lits = group.literals
    n = bisect_right(lits, path) - 1
    parents = group.literal_parents
    while n >= 0 and not path.startswith(lits[n]):
        n = parents[n]
    chain = group.literal_winners
    return n if chain is None or n < 0 else chain[n]


def _split(full: bytes) -> tuple[tuple[bytes, ...], bool]:
    found = _SPLIT.get(full)
    if found is None:
        if len(_SPLIT) >= _CACHE_LIMIT:
            _SPLIT.clear()
        found = _SPLIT[full] = split_pattern(full)
    return found


def pattern_matches(full: bytes, path: bytes) -> bool:
    """Whether the normalised pattern *full* matches *path* (split once, shared)."""
    pieces, anchored = _SPLIT.get(full) or _split(full)
    return match_pieces(pieces, anchored, path)


def wild_rule(group: Group, path: bytes, best: int, text: str | None = None) -> int:
    """The deciding rule for *path* given *best*, its deciding literal rule (or -1).

    *text* is *path* as str, if the caller has it (probes are str: see compile_group).

    Walks the wildcard guards that *path* starts with (as literal_rule does) and, in
    each one's bucket, tries the rules that would outrank the best so far.
    """
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
            # only rules whose probe occurs in the path are matched in full (probes are
            # str: the bytes methods take their argument through the buffer protocol,
            # ~1.5x slower); a plain loop beats building C iterators for the buckets
            # of a few rules that most groups have (measured on the corpus)
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
    """Position (in the group's codes) of the deciding rule for *path*, or -1.

    *text* is *path* as str, if the caller has it.  RobotsTxt.allowed() inlines this
    (the hot path of a crawl's checks); explain() calls it.
    """
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
    """The stored pattern of rule *n*: for explanations, not on any hot path.

    A literal is stored without trailing "*"s; its precedence says how many.
    """
    lits = group.literals
    if n >= len(lits):
        return group.wild_patterns[n - len(lits)]
    code = group.codes[n]
    length = ((code >> 33) + (code & 1)) // 2
    return lits[n] + b"*" * (length - len(lits[n]))
