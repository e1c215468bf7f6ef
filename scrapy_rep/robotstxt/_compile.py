"""Compiling a group (see _matcher.Group for the compiled form), in passes that can stop.

A group of tens of thousands of rules takes about twenty C-level passes of 1-3 ms to
compile: more than a crawl's event loop may wait (25 ms, docs/rfc.md), so compile_steps
yields between the passes of a large group (see RobotsTxt.prepare_steps).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Generator, Iterator
from functools import partial
from itertools import accumulate, compress, count, pairwise, repeat
from operator import add, and_, contains, ge, itemgetter, lshift, ne, or_, sub
from typing import TypeAlias

from scrapy_rep.robotstxt._matcher import EMPTY_GROUP, MANY_WILDCARDS, Group, probe_index_steps
from scrapy_rep.robotstxt._normalise import joined_needs_fixing, normalised_rules

# from this many rules, repeated rules are dropped before compiling (each copy costs
# every pass; in smaller groups the set that finds them costs more than it saves)
DEDUP_FROM = 2048
# from this many wildcard rules, repeated ones are dropped from the buckets (a check
# would try every copy that passes its probe)
DEDUP_WILD_FROM = 64
# from this many rules, or pattern octets, compile_steps yields between its passes (a
# smaller group compiles in well under a millisecond)
STEPS_FROM = 1024
STEPS_FROM_OCTETS = 65_536
# up to this many wildcard rules, a group keeps their probes for allowed()'s one-call
# test; beyond, testing them all costs what it saves
QUICK_PROBES = 8

_longer = partial(max, key=len)  # (the first on a tie)
_FIRST = itemgetter(0)
_LAST = itemgetter(2)

Rules: TypeAlias = tuple[list[bytes], "array[int]"]


def merged_rules(runs: list[Rules]) -> Rules:
    """Patterns and line marks of all the runs (merged same-name groups), in file
    order; a single run's own lists, not copies (callers copy before changing)."""
    if len(runs) == 1:
        return runs[0]
    return [p for r in runs for p in r[0]], array("q", [m for r in runs for m in r[1]])


# normalised_rules costs ~0.3 µs a rule (C-level passes over the rules joined): a large
# group is normalised this many rules, or octets, at a time (about 1-2 ms a slice)
NORMALISE_RULES = 4096
NORMALISE_OCTETS = 32_768


def _normalised_steps(
    patterns: list[bytes], marks: array[int], originals: dict[int, str]
) -> Generator[None, None, tuple[list[bytes], bytes]]:
    """normalised_rules, a slice of rules at a time (the same result: each pattern is
    normalised on its own)."""
    joined = b"\n".join(patterns)
    if not joined_needs_fixing(joined):
        return patterns, joined
    ends = list(accumulate(map(len, patterns)))
    fixed: list[bytes] = []
    low = 0
    while low < len(patterns):
        yield None
        # at most NORMALISE_RULES rules, at most NORMALISE_OCTETS octets, at least one
        limit = ends[low] - len(patterns[low]) + NORMALISE_OCTETS
        high = max(low + 1, min(low + NORMALISE_RULES, bisect_right(ends, limit, low)))
        fixed.extend(normalised_rules(patterns[low:high], marks[low:high], originals)[0])
        low = high
    return fixed, b"\n".join(fixed)


def _first_copies_steps(patterns: list[bytes], marks: array[int]) -> Generator[None, None, Rules]:
    """*patterns* and *marks* without the rules that repeat an earlier one (same pattern and
    kind: a copy never decides, but a failing check would try every copy)."""
    keys = list(zip(patterns, map(and_, marks, repeat(1)), strict=True))
    yield None
    first = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1), strict=True))
    yield None
    kept = sorted(first.values())
    yield None
    return list(map(patterns.__getitem__, kept)), array("q", map(marks.__getitem__, kept))


def compile_group(runs: list[Rules], strings: dict[bytes, str], originals: dict[int, str]) -> Group:
    """compile_steps run to its end."""
    return deque(compile_steps(runs, strings, originals), maxlen=1)[0]  # type: ignore[return-value]


def compile_steps(
    runs: list[Rules], strings: dict[bytes, str], originals: dict[int, str]
) -> Iterator[Group | None]:
    """Compile the runs (merged same-name groups, RFC 9309 §2.2.1) one crawler obeys:
    yields None between passes from STEPS_FROM rules or STEPS_FROM_OCTETS octets, and the
    group last. *strings* shares equal probes (as str); *originals* receives {line:
    pattern as written} for the patterns normalisation changed."""
    patterns, marks = merged_rules(runs)
    if not patterns:
        yield EMPTY_GROUP
        return
    # a few very long rules are as much work as many short ones (normalising 500 KiB
    # of "$" writes 1.5 MB): steps by octets too, so _normalised_steps slices them
    steps = len(patterns) >= STEPS_FROM or sum(map(len, patterns)) >= STEPS_FROM_OCTETS
    if steps:
        yield None
        patterns, joined = yield from _normalised_steps(patterns, marks, originals)
    else:
        patterns, joined = normalised_rules(patterns, marks, originals)
    deduped = len(patterns) >= DEDUP_FROM
    if deduped:
        yield None  # (deduped: steps too)
        if len(set(patterns)) < len(patterns):
            yield None
            patterns, marks = yield from _first_copies_steps(patterns, marks)
    if steps:
        yield None
    # mark = line * 2 + (1 for disallow); precedence = 2 * len - that bit (in C)
    lens = list(map(len, patterns))
    codes = list(map(sub, map(add, lens, lens), map(and_, marks, repeat(1))))
    wild: list[int] = []
    starred = False  # some literal was written with trailing "*"s
    dollar = 0x24 in joined
    if 0x2A in joined or dollar:
        if steps:
            yield None
        # after normalisation a "$" can only be a pattern's last octet: a pattern
        # holding one is anchored
        special = map(contains, patterns, repeat(0x2A))
        if dollar:
            special = map(or_, special, map(contains, patterns, repeat(0x24)))
        wild = list(compress(count(), special))
        if joined.endswith(b"*") or b"*\n" in joined:
            if steps:
                yield None
            # A rule is a wildcard rule if it ends with "$" or keeps a "*" once its
            # trailing "*"s are gone; only trailing "*"s: a plain prefix that matches
            # like "/a" but keeps its own length for precedence (as Google's library)
            stems = list(map(bytes.rstrip, map(patterns.__getitem__, wild), repeat(b"*")))
            anchored = map(contains, map(patterns.__getitem__, wild), repeat(0x24))
            is_wild = list(map(or_, anchored, map(contains, stems, repeat(0x2A))))
            if False in is_wild:
                if patterns is runs[0][0]:
                    patterns = list(patterns)  # the run's own list stays as parsed
                for i, stem, flag in zip(wild, stems, is_wild, strict=True):
                    if not flag:
                        patterns[i] = stem
                starred = True
                wild = list(compress(wild, is_wild))
    if steps:
        yield None
    if not wild:
        literal = None  # every rule is a literal
    elif len(wild) == len(patterns):
        literal = []
    else:
        literal = sorted(set(range(len(patterns))).difference(wild))
        if steps:
            yield None
    # one integer per rule: precedence in the high bits, the line mark below
    packed = list(map(or_, map(lshift, codes, repeat(33)), marks))
    if steps:
        yield None
    for found in plain_literals_steps(literal, patterns, codes, packed):
        if steps and found is None:
            yield None
    lits, lit_parents, lit_codes = found  # type: ignore[misc]  # (the last item)
    chain = ranked_chain(lit_parents, lit_codes) if starred else None
    if not wild:
        yield Group(lits, lit_parents, chain, lit_codes)
        return
    if steps:
        yield None
    # by guard, then by precedence (both sorts are stable: file order on ties)
    wild.sort(key=codes.__getitem__, reverse=True)
    wild_patterns = list(map(patterns.__getitem__, wild))
    if not deduped and len(wild) >= DEDUP_WILD_FROM and len(set(wild_patterns)) < len(wild):
        # (the sort is stable: the first copy in precedence order is the first in the file)
        keys = list(zip(wild_patterns, map(codes.__getitem__, wild), strict=True))
        kept = set(dict(zip(reversed(keys), reversed(wild), strict=True)).values())
        wild = list(compress(wild, map(kept.__contains__, wild)))
        wild_patterns = list(map(patterns.__getitem__, wild))
    if steps:
        yield None
    # as split_pattern does: one final "$" off, then the guard (the first piece) and
    # the rest; most patterns hold one "*", and partition is quicker than split
    unanchored = map(bytes.removesuffix, wild_patterns, repeat(b"$")) if dollar else wild_patterns
    parts = list(map(bytes.partition, unanchored, repeat(b"*")))
    heads = list(map(_FIRST, parts))
    if steps:
        yield None
    order = sorted(range(len(wild)), key=heads.__getitem__)
    guards = list(map(heads.__getitem__, order))
    distinct = list(dict.fromkeys(guards))
    if steps:
        yield None
    # where each distinct guard's bucket starts (guards are sorted), in C
    starts = array("i", [0])
    if len(distinct) < len(guards):
        starts.extend(compress(count(1), map(ne, guards[1:], guards[:-1])))
    else:
        starts.extend(range(1, len(guards)))
    starts.append(len(guards))
    # each rule's probe: the longer of its pieces right after its first and its last
    # "*" (b"" for "/a$", no "*"); any piece after the first "*" must occur in a path
    # it matches, and with one or two "*"s, the common case, these are all of them
    probes = list(map(_LAST, map(parts.__getitem__, order)))
    if 0x2A in b"".join(probes):
        if steps:
            yield None
        firsts = list(map(_FIRST, map(bytes.partition, probes, repeat(b"*"))))
        if steps:
            yield None
        lasts = list(map(_LAST, map(bytes.rpartition, probes, repeat(b"*"))))
        if steps:
            yield None
        probes = list(map(_longer, firsts, lasts))
    if steps:
        yield None
    # kept as str (normalised patterns are ASCII, and hold no "\n": decoded in one
    # call), one object per probe per file in groups of few
    texts = b"\n".join(probes).decode("ascii").split("\n")
    if len(texts) < MANY_WILDCARDS:  # (a large group's probes are mostly distinct)
        texts = list(map(strings.setdefault, probes, texts))
    lit_codes.extend(array("q", list(map(packed.__getitem__, map(wild.__getitem__, order)))))
    if steps:
        yield None
    if len(distinct) < len(guards):
        buckets = tuple([tuple(texts[a:b]) for a, b in pairwise(starts)])
    else:  # one rule per guard: one C pass
        buckets = tuple(zip(texts))
    if steps:
        yield None
        wild_parents = array("i", [-1]) * len(distinct)
        yield from parents_steps(distinct, wild_parents)
    else:
        wild_parents = prefix_parents(distinct)
    # many wildcard rules: their probes are looked for in one pass (see _matcher.ProbeIndex)
    index = None
    if len(texts) >= MANY_WILDCARDS:
        for index in probe_index_steps(texts):
            if steps and index is None:
                yield None
    # a path holding none of a few probes skips the wildcard step in one C call:
    # 65 % of the checks that enter it on the corpus (most groups have a "/*..." rule,
    # whose guard "/" every path passes), at about a third of its cost
    quick = None
    if len(texts) <= QUICK_PROBES and "" not in texts:
        quick = tuple(dict.fromkeys(texts))
    if steps:
        yield None
    yield Group(
        lits,
        lit_parents,
        chain,
        lit_codes,
        wild_guards=tuple(distinct),
        wild_parents=wild_parents,
        bucket_starts=starts,
        probes=buckets,
        wild_patterns=tuple(map(wild_patterns.__getitem__, order)),
        probe_index=index,
        quick_probes=quick,
    )


def prefix_parents(guards: list[bytes]) -> array[int]:
    """parents_steps run at once."""
    found = array("i", [-1]) * len(guards)
    deque(parents_steps(guards, found), maxlen=0)  # (run to its end)
    return found


# parents_steps yields after walking about this many guards (a few ms at most)
WALK_STEP = 4096


def parents_steps(guards: list[bytes], found: array[int]) -> Iterator[None]:
    """Fill *found* (-1 for each guard) with each sorted guard's longest proper prefix
    among them (-1 for none), yielding after every WALK_STEP guards walked.

    In sorted order the guards that start with a guard follow it in one run, found by
    one bisect, so most guards are never visited in Python. Within a run a guard's
    parent is the guard before it or on that one's chain of prefixes."""
    n = len(guards)
    child = list(map(bytes.startswith, guards[1:], guards[:-1]))
    end = 0
    walked = 0  # guards walked since the last yield
    for root in compress(count(), child):
        if root < end:
            continue  # inside the run of an earlier root
        # the run ends at the least bytes above all that start with the root, if any
        stem = guards[root].rstrip(b"\xff")
        end = bisect_left(guards, stem[:-1] + bytes((stem[-1] + 1,)), root + 1) if stem else n
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


def plain_literals_steps(
    literal: list[int] | None, patterns: list[bytes], codes: list[int], packed: list[int]
) -> Iterator[tuple[tuple[bytes, ...], array[int], array[int]] | None]:
    """The literal rules (positions in *patterns*; None: all of them) as a sorted
    prefix forest, yielding None between C-level passes and, last, the distinct guards
    sorted, each one's parent and the packed code of its deciding rule."""
    rules = range(len(patterns)) if literal is None else literal
    if literal is None:  # the common case: every rule is a plain prefix
        first = dict(zip(patterns, packed, strict=True))  # guard -> packed code
    else:
        guards = map(patterns.__getitem__, literal)
        first = dict(zip(guards, map(packed.__getitem__, literal), strict=True))
    if len(first) < len(rules):
        yield None
        # equal guards: the deciding rule is the one of highest precedence, then
        # the first in file order, and it must be the last one the dict sees
        ranked = sorted(rules, key=codes.__getitem__, reverse=True)
        ranked.reverse()
        guards = map(patterns.__getitem__, ranked)
        first = dict(zip(guards, map(packed.__getitem__, ranked), strict=True))
    yield None
    lits = sorted(first)
    lit_codes = array("q", list(map(first.__getitem__, lits)))
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
