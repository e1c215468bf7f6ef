"""robots.txt bytes -> groups of rules (RFC 9309 §2.1-§2.2, Google's leniencies).

The parser works on bytes so that invalid UTF-8 can never stop it: field names are
ASCII, rule values stay raw octets until matching normalises them (non-ASCII and
invalid octets become %XX, as RFC 9309 §2.2.2 and Google's library do), and only
sitemap URLs are decoded (UTF-8, bad sequences replaced).

One regular expression splits every line into field and value in C (one result per
line, so line numbers are just a counter), and a loop with constant work per line
assigns the fields to groups: linear time, and no Python work on comment lines.
"""

from __future__ import annotations

import re
import sys
from array import array
from collections.abc import Iterable
from itertools import compress

__all__ = ["MAX_LINE", "ParseResult", "Run", "parse"]

# Google's library cuts lines at 8 x 2083 octets (2083 = the longest URL old IE
# accepted); anything after that on the same line is ignored.
MAX_LINE = 16_664

_BOM = b"\xef\xbb\xbf"

# Field kinds.  _HASH: the text before the first colon holds a "#", so the line
# must be cut at the comment first and looked at again.
# Allow and disallow come first, so that one comparison finds the common case.
_ALLOW, _DISALLOW, _UA, _SITEMAP, _DELAY, _RATE, _SIGNAL, _OTHER, _HASH = range(9)

# Google's library recognises a field when its name *starts with* one of these,
# case-insensitively; the typo spellings are the ones it accepts ("frequent typos").
_PREFIXES: tuple[tuple[bytes, int], ...] = (
    (b"user-agent", _UA),
    (b"useragent", _UA),
    (b"user agent", _UA),
    (b"allow", _ALLOW),
    (b"disallow", _DISALLOW),
    (b"dissallow", _DISALLOW),
    (b"dissalow", _DISALLOW),
    (b"disalow", _DISALLOW),
    (b"diasllow", _DISALLOW),
    (b"disallaw", _DISALLOW),
    (b"sitemap", _SITEMAP),
    (b"site-map", _SITEMAP),
    (b"crawl-delay", _DELAY),
    (b"crawldelay", _DELAY),
    (b"crawl delay", _DELAY),
    (b"request-rate", _RATE),
    (b"requestrate", _RATE),
    (b"request rate", _RATE),
    (b"content-signal", _SIGNAL),
)
# All prefixes in one regex: the number of the group that matched gives the kind.
_FIELD = re.compile(b"|".join(b"(" + re.escape(name) + b")" for name, _ in _PREFIXES))
_FIELD_KINDS = (_OTHER, *(kind for _, kind in _PREFIXES))
# First octets a colon-less field line can start with.
_FIELD_START = frozenset(b"uUaAdDsScCrR \t\v\f")
# A line can hold a field only if its first non-blank octet can start a field name.
_MAYBE_FIELD = re.compile(rb"[ \t\x0b\x0c]*[uUaAdDsScCrR]").match
_MARKUP_START = re.compile(rb"\s*<").match
# Field names as written -> kind: a bounded memo of the case-folding prefix scan.
_KINDS: dict[bytes, int] = {}
_KINDS_LIMIT = 4096

_UA_TOKEN = re.compile(rb"[A-Za-z_-]*")
_DELAY_VALUE = re.compile(rb"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")
_RATE_VALUE = re.compile(
    rb"([0-9]+)\s*/\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([smhd]?)(?![A-Za-z])", re.I
)
_RATE_UNIT = {b"": 1.0, b"s": 1.0, b"m": 60.0, b"h": 3600.0, b"d": 86400.0}
SIGNAL_KEYS = ("search", "ai-input", "ai-train")
_SIGNAL_VALUES = {b"yes": True, b"no": False}

# Rules of one user-agent run: raw patterns, and per rule line * 2 + (0 for allow,
# 1 for disallow); compiling turns these into precedence codes (see _matcher).
Run = tuple[list[bytes], "array[int]"]


def _kind(key: bytes) -> int:
    """Kind of a field name as written (blanks around it and any case allowed)."""
    folded = key.strip().lower()
    if 0x23 in folded:
        kind = _HASH
    else:
        m = _FIELD.match(folded)
        kind = _FIELD_KINDS[m.lastindex or 0] if m else _OTHER
    # Memoise names as written; long unknown names are page junk, not worth a slot.
    if len(_KINDS) < _KINDS_LIMIT and (kind != _OTHER or len(key) <= 24):
        _KINDS[key] = kind
    return kind


class ParseResult:
    """What the parser found, keyed by lower-cased product token ("*" = default)."""

    __slots__ = (
        "delays",
        "groups",
        "originals",
        "rates",
        "rule_count",
        "signals",
        "sitemaps",
        "truncated",
    )

    def __init__(self) -> None:
        # token -> the runs naming it; same-name groups merge (RFC 9309 §2.2.1)
        self.groups: dict[str, list[Run]] = {}
        self.delays: dict[str, float] = {}
        self.rates: dict[str, tuple[int, float]] = {}
        # "" holds signals given before any user-agent line: a file-wide default.
        self.signals: dict[str, dict[str, bool]] = {}
        self.sitemaps: list[str] = []
        # line -> pattern as written, where explain() cannot rebuild it
        self.originals: dict[int, str] = {}
        self.rule_count = 0
        self.truncated = False


def _to_bytes(content: bytes | bytearray | memoryview | str) -> bytes:
    if isinstance(content, str):
        try:
            return content.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            return content.encode("utf-8", "replace")
    return bytes(content)


def _limit(data: bytes, max_size: int) -> tuple[bytes, bool]:
    """Keep the first *max_size* octets, dropping a line the limit cuts in half."""
    max_size = max(max_size, 0)
    if len(data) <= max_size:
        return data, False
    following = data[max_size : max_size + 1]
    data = data[:max_size]
    if following not in (b"\n", b"\r"):
        end = max(data.rfind(b"\n"), data.rfind(b"\r"))
        data = data[: end + 1]
    return data, True


def _signals(value: bytes, into: dict[str, bool]) -> None:
    for item in value.split(b","):
        name, _, flag = item.partition(b"=")
        key = name.strip().lower().decode("ascii", "replace")
        verdict = _SIGNAL_VALUES.get(flag.strip().lower())
        if verdict is not None and key in SIGNAL_KEYS:
            into.setdefault(key, verdict)


def _rate(value: bytes) -> tuple[int, float] | None:
    m = _RATE_VALUE.match(value)
    if m is None:
        return None
    requests = int(m.group(1))
    seconds = float(m.group(2)) * _RATE_UNIT[m.group(3).lower()]
    if requests <= 0 or seconds <= 0:
        return None
    return requests, seconds


def _prepare(content: bytes | bytearray | memoryview | str, max_size: int) -> tuple[bytes, bool]:
    data, truncated = _limit(_to_bytes(content), max_size)
    if data.startswith(_BOM):
        data = data[3:]
    return data, truncated


def _extensions(res: ParseResult, extras: dict[int, tuple[Run, list[tuple[int, bytes]]]]) -> None:
    """Crawl-delay, request-rate and content-signal values of each token's groups.

    Like rules they belong to the whole group, whichever of its user-agent lines
    they follow; with merged groups the first valid value in file order wins.
    """
    top = extras.pop(0, None)
    if top is not None:  # content signals before any user-agent line: file-wide
        for kind, value in top[1]:
            if kind == _SIGNAL:
                _signals(value, res.signals.setdefault("", {}))
    for token, runs in res.groups.items():
        for run in runs:
            found = extras.get(id(run))
            if found is None:
                continue
            for kind, value in found[1]:
                if kind == _DELAY:
                    if token not in res.delays and _DELAY_VALUE.fullmatch(value):
                        res.delays[token] = float(value)
                elif kind == _RATE:
                    rate = None if token in res.rates else _rate(value)
                    if rate is not None:
                        res.rates[token] = rate
                elif kind == _SIGNAL:
                    _signals(value, res.signals.setdefault(token, {}))


def _split_line(line: bytes) -> tuple[bytes, bytes] | None:
    """(field, value) of a line the fast path could not split, or None."""
    hash_at = line.find(b"#")
    if hash_at >= 0:
        line = line[:hash_at]
    key, colon, value = line.partition(b":")
    if colon:
        key = key.strip()
        return (key, value.strip()) if key else None
    # Google: "field value" without a colon, only if there are exactly two
    # whitespace-separated words (so that prose is not read as a field).
    words = line.split()
    return (words[0], words[1]) if len(words) == 2 else None


def parse(content: bytes | bytearray | memoryview | str, max_size: int) -> ParseResult:
    res = ParseResult()
    data, res.truncated = _prepare(content, max_size)
    groups = res.groups
    originals = res.originals
    kinds = _KINDS
    # tokens of the user-agent run being filled (a dict: constant-time membership,
    # so a run of thousands of user-agent lines stays linear)
    tokens: dict[str, None] = {}
    run: Run = ([], array("q"))
    patterns, marks = run
    add_pattern, add_mark = patterns.append, marks.append  # bound once per run
    all_runs: list[Run] = []
    in_rules = False  # a rule has been seen since the last user-agent line
    derived = 0
    # id(run) -> (run, [(kind, value)]): extension lines, applied per group at the end
    extras: dict[int, tuple[Run, list[tuple[int, bytes]]]] = {}

    lines = data.splitlines()  # for bytes: LF, CRLF and CR only, in one pass
    if len(data) > MAX_LINE and max(map(len, lines)) > MAX_LINE:
        lines = [line[:MAX_LINE] for line in lines]
    numbered: Iterable[tuple[int, bytes]] = enumerate(lines, 1)
    if _MARKUP_START(data) or data.count(b"<") * 4 > len(lines):
        # Mostly page markup (an HTML page served as robots.txt): only lines whose
        # first non-blank octet can start a field name can matter, and one C-level
        # regex match per line finds them.
        numbered = compress(numbered, map(_MAYBE_FIELD, lines))
    for lineno, line in numbered:
        key, colon, value = line.partition(b":")
        if colon:
            kind = kinds.get(key)
            if kind is None:
                kind = _kind(key)
            if kind <= _DISALLOW:
                # The hot path: most lines of most files are rules.  (0x23 is "#": an
                # int membership test is one memchr, b"#" in takes ~8x as long.)
                if 0x23 in value:
                    value = value[: value.find(b"#")]
                if not tokens:
                    continue  # RFC 9309 §2.2.2: rules outside any group are ignored
                in_rules = True
                value = value.strip()
                if value:  # an empty value means "no restriction": nothing to keep
                    add_pattern(value)
                    add_mark(lineno * 2 + kind)
                    if kind == _ALLOW:
                        # Google/Protego: "allow: /dir/index.htm[l]" also allows "/dir/"
                        # itself, as the extra rule "allow: /dir/$".
                        slash = value.rfind(b"/")
                        if slash >= 0 and value.startswith(b"/index.htm", slash):
                            patterns.append(value[: slash + 1] + b"$")
                            marks.append(lineno * 2)
                            originals[lineno] = value.decode("utf-8", "replace")
                            derived += 1
                continue
            if kind == _OTHER:
                continue
            if 0x23 in value:
                value = value[: value.find(b"#")]
            value = value.strip()
        elif not line or line[0] not in _FIELD_START:
            continue  # empty, a "#" comment, or not a field (page markup, prose)
        else:
            # No colon: maybe Google's "field value" form (exactly two words).
            words = line.split(None, 2)
            if len(words) != 2 or 0x23 in line:
                if len(words) < 2 or 0x23 not in line:
                    continue
                kind = _HASH
            else:
                key, value = words
                kind = kinds.get(key)
                if kind is None:
                    kind = _kind(key)
        if kind == _HASH:
            split = _split_line(line)
            if split is None:
                continue
            key, value = split
            kind = _kind(key)
            if kind == _HASH:
                continue

        if kind <= _DISALLOW:  # a colon-less or commented rule line
            if not tokens:
                continue
            in_rules = True
            if value:
                patterns.append(value)
                marks.append(lineno * 2 + kind)
        elif kind == _UA:
            if in_rules or not tokens:
                run = ([], array("q"))
                patterns, marks = run
                add_pattern, add_mark = patterns.append, marks.append
                all_runs.append(run)
                tokens = {}
                in_rules = False
            if value[:1] == b"*" and (len(value) == 1 or value[1:2].isspace()):
                # Google: "*" followed by anything after whitespace is still global.
                token = "*"
            else:
                match = _UA_TOKEN.match(value)
                token = sys.intern(match.group().decode("ascii").lower()) if match else ""
            if token not in tokens:
                tokens[token] = None
                runs = groups.get(token)
                if runs is None:
                    groups[token] = [run]
                else:
                    runs.append(run)
        elif kind == _SITEMAP:
            if value:
                res.sitemaps.append(value.decode("utf-8", "replace"))
        elif kind >= _DELAY:  # extensions: they belong to the whole group (run)
            # before any user-agent line (key 0): only content signals, file-wide
            extras.setdefault(id(run) if tokens else 0, (run, []))[1].append((kind, value))
    res.rule_count = sum(len(r[0]) for r in all_runs) - derived
    if extras:
        _extensions(res, extras)
    return res
