"""Path normalisation and pattern matching (RFC 9309 §2.2.2, §2.2.3).

Everything here works on *normalised* strings: both the rule patterns and the URL
path are brought to one canonical percent-encoding before they are compared, so
that equal URIs compare equal whatever escaping the site or the crawler used.

Matching never backtracks: a pattern is split on ``*`` once, and a URL is checked by
placing each literal piece at its leftmost possible position with ``str.find``.
Greedy leftmost placement is optimal for ``*`` (any run of characters), so the
worst case is O(len(pattern) * len(path)) and typical cases are a few C-level
``find`` calls.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from itertools import accumulate, compress, count, repeat
from operator import add, and_, itemgetter, lshift, or_, sub
from typing import TypeAlias

__all__ = [
    "EMPTY_GROUP",
    "ESCAPE",
    "Group",
    "best_rule",
    "compile_group",
    "fix_escape",
    "match_pieces",
    "normalise_pattern",
    "pattern_at",
    "split_pattern",
]

# RFC 3986 §2.3 unreserved characters: their %XX form equals the character itself.
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

# Escapes that normalisation changes: any with a lower-case hex digit, and those of
# unreserved characters (2D 2E 30-39 41-5A 5F 61-7A 7E).  Escapes already in
# canonical form (upper-case, reserved or non-ASCII: "%2F", "%E3") are left alone,
# so a pattern full of them costs one regex scan and no Python callback.
ESCAPE = rb"%(?:[0-9A-Fa-f][a-f]|[a-f][0-9A-F]|2[DE]|3[0-9]|4[1-9A-F]|5[0-9AF]|6[1-9A-F]|7[0-9AE])"
# In a pattern: those escapes, non-ASCII octets to escape, and a "$" that is not
# the final character (only a final "$" anchors; elsewhere it is a literal "$",
# which a URL carries as %24 after normalise_path).
_PATTERN_FIX = re.compile(ESCAPE + rb"|[\x80-\xff]+|\$(?!\Z)")


def fix_escape(match: re.Match[bytes]) -> bytes:
    text = match.group()
    if text[0] != 0x25:
        # raw octets that must be escaped: a run of non-ASCII ones, or a "$" or "*"
        # (those two only reach here from a path)
        return b"%" + text.hex("%").upper().encode("ascii")
    value = int(text[1:], 16)
    if value in _UNRESERVED:
        return bytes((value,))
    return text.upper()


def normalise_pattern(raw: bytes) -> bytes:
    """Canonical form of a rule pattern, as raw bytes from the file.

    Non-ASCII octets become upper-case %XX (RFC 9309 §2.2.2); %XX of unreserved
    characters is decoded; other escapes keep their meaning but get upper-case hex.
    Invalid UTF-8 is escaped octet by octet, as Google's library does, so a Latin-1
    robots.txt still matches the Latin-1 escapes its own site uses.
    """
    if raw.isascii() and b"%" not in raw and b"$" not in raw[:-1]:
        return raw
    if _PATTERN_FIX.search(raw) is None:
        return raw
    return _PATTERN_FIX.sub(fix_escape, raw)


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
# for a literal, the part before the first "*" for a wildcard), and
# bytes.startswith(tuple) tests many guards in one C call.  A wildcard rule also
# needs its "probe", the longest literal piece after the first "*", somewhere in
# the path; only then does the general matcher run.  Each probe's rarest octet
# ("marker") gates a whole list: bytes.translate drops the markers from the path in
# one C call, and if nothing was dropped no probe can be there.  Large groups get an index:
# guards sorted by their first two octets, {octets: slice}; guards shorter than
# that sit under b"" and are tried for every path.
# ---------------------------------------------------------------------------

Index: TypeAlias = "dict[bytes, slice] | None"
# (literal guards, their index, wildcard guards, their index, probes, wildcard
#  patterns, codes: the literals' then the wildcards', marker octets)
Group: TypeAlias = tuple[
    tuple[bytes, ...],
    Index,
    tuple[bytes, ...],
    Index,
    tuple[bytes, ...],
    tuple[bytes, ...],
    "array[int]",
    bytes,
]

KEY_LEN = 2
INDEX_MIN = 24  # below this many guards one startswith(tuple) beats an index
EMPTY_GROUP: Group = ((), None, (), None, (), (), array("q"), b"")
# Index keys recur across groups and files: share one object per key.
_KEYS: dict[bytes, bytes] = {}
# Split wildcard patterns, shared: the same few ("/*?", "/*.pdf$") recur across
# sites, and a pattern is split only when a path passes its guard and probe.
_SPLIT: dict[bytes, tuple[tuple[bytes, ...], bool]] = {}
_CACHE_LIMIT = 4096
_KEYS_LIMIT = 65536
_HEAD = itemgetter(slice(0, KEY_LEN))
_SCAN = 6  # lists up to this long are scanned linearly
# Octets to pass over when picking a probe's marker (see _marker), commonest last.
_ALNUM = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_COMMONER = (_ALNUM + b"._-/", _ALNUM + b"/", b"/")
# In patterns joined by "\n": octets that make a pattern need normalising or the
# general matcher.  (A "$" at a pattern's end needs only the latter.)
_JOINED_FIX = re.compile(ESCAPE + rb"|[\x80-\xff]|\$(?!\n|\Z)")
_SPECIAL = re.compile(rb"[*$]")


def _indexed(order: list[int], guards: list[bytes]) -> tuple[list[int], Index]:
    """Reorder *order* (positions in *guards*, by precedence) for an index."""
    if len(order) < INDEX_MIN:
        return order, None
    keys = list(map(_HEAD, map(guards.__getitem__, order)))
    if min(map(len, keys)) < KEY_LEN:
        keys = [k if len(k) == KEY_LEN else b"" for k in keys]
    by_key = sorted(range(len(order)), key=keys.__getitem__)  # stable
    keys = list(map(keys.__getitem__, by_key))
    index = {}
    for k in dict.fromkeys(keys):
        if len(_KEYS) < _KEYS_LIMIT:
            k = _KEYS.setdefault(k, k)
        index[k] = slice(bisect_left(keys, k), bisect_right(keys, k))
    return list(map(order.__getitem__, by_key)), index


def _rules_at(ends: list[int], hits: Iterator[re.Match[bytes]]) -> list[int]:
    """Indexes of the patterns (joined by one octet; *ends* = cumulative ends) hit."""
    return sorted(set(map(bisect_right, repeat(ends), map(re.Match.start, hits))))


def compile_group(
    runs: list[tuple[list[bytes], array[int]]],
    strings: dict[bytes, bytes],
    originals: dict[int, str],
) -> Group:
    """Compile the rules of all the runs (merged same-name groups) one crawler obeys.

    Each run holds raw patterns and line marks as _parser makes them; *strings* dedupes
    equal byte strings across the groups of one file; *originals* receives
    {line: pattern as written} for patterns that normalisation changed.  Most rules are plain ASCII
    prefixes, so per-rule work is left to C-level sort/map calls where possible.
    """
    if len(runs) == 1:
        patterns, marks = list(runs[0][0]), runs[0][1]
    else:
        patterns = [p for r in runs for p in r[0]]
        marks = array("q", [m for r in runs for m in r[1]])
    if not patterns:
        return EMPTY_GROUP
    # mark = line * 2 + (1 for disallow); precedence = 2 * len - that bit (in C)
    lens = list(map(len, patterns))
    codes = list(map(sub, map(add, lens, lens), map(and_, marks, repeat(1))))
    # Rules needing attention are found by scanning all patterns joined, in C, and
    # mapping hits back to rules through the cumulative lengths.
    joined = b"\n".join(patterns)
    ends: list[int] | None = None
    dollars = joined.count(b"$")
    mid_dollar = dollars and dollars != joined.count(b"$\n") + joined.endswith(b"$")
    if (not joined.isascii() or b"%" in joined or mid_dollar) and _JOINED_FIX.search(joined):
        ends = list(accumulate(map(add, lens, repeat(1))))
        for i in _rules_at(ends, _JOINED_FIX.finditer(joined)):
            raw = patterns[i]
            if _PATTERN_FIX.search(raw) is not None:
                originals.setdefault(marks[i] >> 1, raw.decode("utf-8", "replace"))
                pattern = patterns[i] = _PATTERN_FIX.sub(fix_escape, raw)
                codes[i] = 2 * len(pattern) - (marks[i] & 1)
                ends = None
        if ends is None:
            joined = b"\n".join(patterns)
    wild: list[int] = []
    if b"*" in joined or b"$" in joined:
        if ends is None:
            ends = list(accumulate(map(add, map(len, patterns), repeat(1))))
        for i in _rules_at(ends, _SPECIAL.finditer(joined)):
            pattern = patterns[i]
            stem = pattern if pattern.endswith(b"$") else pattern.rstrip(b"*")
            if b"*" in stem or stem.endswith(b"$"):
                wild.append(i)
            else:
                # only trailing "*"s: a plain prefix that matches like "/a" but keeps
                # its own length for precedence (as in Google's library)
                patterns[i] = stem
    literal = list(range(len(patterns)))
    if wild:
        literal = sorted(set(literal).difference(wild))
    literal.sort(key=codes.__getitem__, reverse=True)
    literal, lit_index = _indexed(literal, patterns)
    lits = tuple(map(patterns.__getitem__, literal))
    # one integer per rule: precedence in the high bits, the line mark below
    packed = list(map(or_, map(lshift, codes, repeat(33)), marks))
    lit_codes = array("q", map(packed.__getitem__, literal))
    if not wild:
        return lits, lit_index, (), None, (), (), lit_codes, b""
    wild.sort(key=codes.__getitem__, reverse=True)
    fulls = [patterns[i] for i in wild]
    pieces = [split_pattern(f)[0] for f in fulls]
    wild_guards = [p[0] for p in pieces]
    probes = [max(p[1:], key=len, default=b"") for p in pieces]
    order, wild_index = _indexed(list(range(len(wild))), wild_guards)
    lit_codes.extend([packed[wild[i]] for i in order])
    return (
        lits,
        lit_index,
        tuple(map(wild_guards.__getitem__, order)),
        wild_index,
        tuple([strings.setdefault(probes[i], probes[i]) for i in order]),
        tuple(map(fulls.__getitem__, order)),
        lit_codes,
        bytes([_marker(probes[i]) for i in order]),
    )


def _marker(probe: bytes) -> int:
    """An octet of *probe* unlikely to be in a URL path (0 for no probe): query
    punctuation first, then ".-_", then letters and digits, "/" last."""
    for common in _COMMONER:
        rare = probe.translate(None, common)
        if rare:
            return rare[0]
    return probe[0] if probe else 0


def _split(full: bytes) -> tuple[tuple[bytes, ...], bool]:
    found = _SPLIT.get(full)
    if found is None:
        if len(_SPLIT) >= _CACHE_LIMIT:
            _SPLIT.clear()
        found = _SPLIT[full] = split_pattern(full)
    return found


def _first_literal(guards: tuple[bytes, ...], start: int, path: bytes) -> int:
    """Position of the first guard that *path* starts with (offset by *start*), or -1.

    bytes.startswith(tuple) rejects most paths in one C call.
    """
    if not path.startswith(guards):
        return -1
    lo, hi = 0, len(guards)
    # Narrow a long list by halves (each test one C call over a slice) before the
    # linear scan: the first match is what we want, the list is precedence-ordered.
    while hi - lo > _SCAN:
        mid = (lo + hi) // 2
        if path.startswith(guards[lo:mid]):
            hi = mid
        else:
            lo = mid
    for i in range(lo, hi):
        if path.startswith(guards[i]):
            return start + i
    return -1  # not reached: some guard in [lo, hi) matches


def _first_wild(group: Group, sl: slice, path: bytes, floor: int) -> int:
    """Position of the best wildcard rule of one list matching *path*, or -1.

    Only rules whose precedence is above *floor* are considered.  Cheap tests
    first: the list's best precedence, its guards, its marker octets.
    """
    start = sl.start or 0
    base = len(group[0])
    codes = group[6]
    if codes[base + start] >> 33 <= floor:
        return -1  # even the list's most specific rule cannot beat what was found
    guards = group[2][sl]
    if not path.startswith(guards):
        return -1
    marks = group[7][sl]
    if 0 not in marks and len(path.translate(None, marks)) == len(path):
        return -1  # the path holds no rule's marker octet: no probe can occur in it
    fulls = group[5]
    # Only rules whose probe occurs in the path are candidates; C-level filter.
    for i in compress(count(start), map(path.__contains__, group[4][sl])):
        if codes[base + i] >> 33 <= floor:
            break
        if path.startswith(group[2][i]):
            pieces, anchored = _split(fulls[i])
            if match_pieces(pieces, anchored, path):
                return base + i
    return -1


_ALL = slice(None)


def best_rule(group: Group, path: bytes) -> int:
    """Position (in the group's codes) of the deciding rule for *path*, or -1."""
    lits, lit_index, wilds, wild_index, _, _, codes, _ = group
    if lit_index is None:
        best = _first_literal(lits, 0, path) if lits else -1
    else:
        best = -1
        sl = lit_index.get(path[:KEY_LEN])
        if sl is not None:
            best = _first_literal(lits[sl], sl.start, path)
        sl = lit_index.get(b"")
        if sl is not None:
            other = _first_literal(lits[sl], sl.start, path)
            if other >= 0 and (best < 0 or codes[other] > codes[best]):
                best = other
    if not wilds:
        return best
    floor = codes[best] >> 33 if best >= 0 else -1
    if wild_index is None:
        found = _first_wild(group, _ALL, path, floor)
        return found if found >= 0 else best
    for key in (path[:KEY_LEN], b""):
        sl = wild_index.get(key)
        if sl is not None:
            found = _first_wild(group, sl, path, floor)
            if found >= 0:
                best = found
                floor = codes[found] >> 33
    return best


def pattern_at(group: Group, n: int) -> bytes:
    """The stored pattern of rule *n*: for explanations, not on any hot path.

    A literal is stored without trailing "*"s; its precedence says how many.
    """
    lits = group[0]
    if n >= len(lits):
        return group[5][n - len(lits)]
    code = group[6][n]
    length = ((code >> 33) + (code & 1)) // 2
    return lits[n] + b"*" * (length - len(lits[n]))
