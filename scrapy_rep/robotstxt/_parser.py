"""robots.txt bytes -> groups of rules (RFC 9309 §2.1-§2.2, Google's leniencies).

The parser works on bytes so that invalid UTF-8 can never stop it: field names are
ASCII, rule values stay raw octets until matching normalises them (non-ASCII and
invalid octets become %XX, as RFC 9309 §2.2.2 and Google's library do), and only
sitemap URLs and extension values are decoded (UTF-8, bad sequences replaced).

Lines are split once in C (bytes.splitlines), so line numbers are just a counter, and
a loop with constant work per line assigns the fields to groups: linear time whatever
the mix of lines.  What is not taken as written is recorded as it goes (_issues).
"""

from __future__ import annotations

import re
import sys
from array import array
from collections.abc import Iterable
from itertools import compress

from scrapy_rep.robotstxt._extensions import (
    EXTENSION_FIELDS,
    ExtensionLine,
    Extensions,
    summarise,
)
from scrapy_rep.robotstxt._issues import (
    EMPTY_VALUE,
    INVALID_VALUE,
    LINE_TOO_LONG,
    MARKUP,
    MAX_TEXT,
    MISSING_COLON,
    NOT_A_FIELD,
    RULE_OUTSIDE_GROUP,
    TYPO,
    UNKNOWN_FIELD,
    IssueLog,
    Pending,
)
from scrapy_rep.robotstxt._useragent import product_token

__all__ = ["MAX_LINE", "ParseResult", "Run", "parse"]

# Google's library reads a line into a buffer of 8 x 2083 octets (2083 = the longest
# URL old IE accepted) that also holds the terminating NUL: 16,663 octets are kept.
MAX_LINE = 16_663

# Field kinds.  _HASH: the text before the first colon holds a "#", so the line
# must be cut at the comment first and looked at again.  Extension fields follow,
# one kind each (see _extensions.EXTENSION_FIELDS).  _TYPO is or-ed into the kind of
# a misspelt name, so that the hot path (kind <= _DISALLOW) only takes exact names.
_ALLOW, _DISALLOW, _UA, _SITEMAP, _OTHER, _HASH = range(6)
_EXT = 6
_EXT_NAMES = tuple(EXTENSION_FIELDS)
_TYPO = 64

# Google's library recognises a field when its name *starts with* one of these,
# case-insensitively; the typo spellings are the ones it accepts ("frequent typos").
# The first spelling of each kind is the exact one.
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
    *(
        (spelling, _EXT + n)
        for n, spellings in enumerate(EXTENSION_FIELDS.values())
        for spelling in spellings
    ),
)
_EXACT = {kind: name for name, kind in reversed(_PREFIXES)}
# All prefixes in one regex: the number of the group that matched gives the kind.
_FIELD = re.compile(b"|".join(b"(" + re.escape(name) + b")" for name, _ in _PREFIXES))
_FIELD_KINDS = (_OTHER, *(kind for _, kind in _PREFIXES))
# First octets a colon-less field line can start with.
_FIELD_START = frozenset(b"".join(name[:1] for name, _ in _PREFIXES).lower())
_FIELD_START |= frozenset(bytes(_FIELD_START).upper()) | frozenset(b" \t\v\f")
# A line can hold a field only if its first non-blank octet can start a field name.
_MAYBE_FIELD = re.compile(
    rb"[ \t\x0b\x0c]*[" + bytes(sorted(_FIELD_START - frozenset(b" \t\v\f"))) + rb"]"
).match
_MARKUP_START = re.compile(rb"\s*<").match
# Google: a field without its colon is "field value" with only spaces or tabs between
# them, and exactly two such words.
_COLONLESS = re.compile(rb"([^ \t]+)[ \t]+([^ \t]+)")
# Field names as written -> kind: a bounded memo of the case-folding prefix scan.
_KINDS: dict[bytes, int] = {}
_KINDS_LIMIT = 4096

_ASCII_TOKEN = re.compile(rb"[-A-Za-z0-9_]*")
_ABSOLUTE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^/?#\s]")

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
        if kind != _OTHER and folded != _EXACT[kind]:
            kind |= _TYPO
    # Memoise names as written; long unknown names are page junk, not worth a slot.
    if len(_KINDS) < _KINDS_LIMIT and (kind != _OTHER or len(key) <= 24):
        _KINDS[key] = kind
    return kind


def _token(value: bytes) -> str:
    """The group key of a user-agent value (see _useragent for the rule)."""
    if value[:1] == b"*" and (len(value) == 1 or value[1:2].isspace()):
        return "*"  # Google: "*" followed by anything after whitespace is still global
    if value.isascii():
        match = _ASCII_TOKEN.match(value)
        return sys.intern(match.group().decode("ascii").lower()) if match else ""
    return sys.intern(product_token(value).lower())


class ParseResult:
    """What the parser found, keyed by lower-cased product token ("*" = default)."""

    __slots__ = (
        "extensions",
        "groups",
        "issue_counts",
        "issues",
        "originals",
        "preamble",
        "preamble_summary",
        "rule_count",
        "sitemaps",
        "summaries",
        "truncated",
    )

    def __init__(self) -> None:
        # token -> the runs naming it; same-name groups merge (RFC 9309 §2.2.1)
        self.groups: dict[str, list[Run]] = {}
        # token -> extension lines of each of its runs (lists shared between the
        # tokens of one run: never copied, so memory stays linear)
        self.extensions: dict[str, list[list[ExtensionLine]]] = {}
        # extension lines before any user-agent line
        self.preamble: list[ExtensionLine] = []
        # token -> its interpreted extension values, and those of the preamble
        self.summaries: dict[str, Extensions] = {}
        self.preamble_summary: Extensions | None = None
        self.sitemaps: list[str] = []
        # line -> pattern as written, where explain() cannot rebuild it
        self.originals: dict[int, str] = {}
        self.rule_count = 0
        self.truncated = False
        self.issues: Pending | None = None
        self.issue_counts: dict[str, int] = {}


def _to_bytes(content: bytes | bytearray | memoryview | str) -> bytes:
    if isinstance(content, str):
        try:
            return content.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            return content.encode("utf-8", "replace")
    return bytes(content)


def _limit(data: bytes, max_size: int, log: IssueLog) -> tuple[bytes, bool]:
    """Keep the first *max_size* octets, dropping a line the limit cuts in half."""
    max_size = max(max_size, 0)
    if len(data) <= max_size:
        return data, False
    following = data[max_size : max_size + 1]
    kept = data[:max_size]
    if following not in (b"\n", b"\r"):
        end = max(kept.rfind(b"\n"), kept.rfind(b"\r"))
        kept = kept[: end + 1]
    line = len(kept.splitlines()) + 1
    log.limit = (line, max_size, data[len(kept) : min(max_size, len(kept) + MAX_TEXT + 1)])
    return kept, True


def _prepare(
    content: bytes | bytearray | memoryview | str, max_size: int, log: IssueLog
) -> tuple[bytes, bool]:
    data, truncated = _limit(_to_bytes(content), max_size, log)
    # a UTF-8 BOM, or the start of one (Google's library skips each octet that
    # continues the BOM), is not part of the first line
    if data[:1] == b"\xef":
        skip = 3 if data[1:3] == b"\xbb\xbf" else 2 if data[1:2] == b"\xbb" else 1
        data = data[skip:]
    return data, truncated


def _split_line(line: bytes) -> tuple[bytes, bytes, bool] | None:
    """(field, value, has colon) of a line the fast path could not split, or None."""
    hash_at = line.find(b"#")
    if hash_at >= 0:
        line = line[:hash_at]
    key, colon, value = line.partition(b":")
    if colon:
        key = key.strip()
        return (key, value.strip(), True) if key else None
    m = _COLONLESS.fullmatch(line.strip())
    return (m[1], m[2].strip(), False) if m else None


def _is_blank(line: bytes) -> bool:
    stripped = line.lstrip()
    return not stripped or stripped[:1] == b"#"


def _interpret(res: ParseResult, log: IssueLog) -> None:
    """Each token's extension values, reading every run's lines once (linear)."""
    invalid: list[int] = []
    by_run: dict[int, Extensions] = {}
    for token, per_run in res.extensions.items():
        found = None
        own = False  # found is this token's own object, not a run's shared summary
        for lines in per_run:
            summary = by_run.get(id(lines))
            if summary is None:
                summary = by_run[id(lines)] = summarise(lines, invalid)
            if found is None:
                found = summary  # shared, read-only: most tokens have one group
            else:
                if not own:
                    found, own = Extensions().merged(found), True
                found.merge(summary)
        if found is not None:
            res.summaries[token] = found
    if res.preamble:  # before any user-agent line only content signals apply, file-wide
        signals = [e for e in res.preamble if e.field == "content-signal"]
        res.preamble_summary = summarise(signals, invalid)
        outside = (e.line for e in res.preamble if e.field != "content-signal")
        log.found.extend((line, RULE_OUTSIDE_GROUP) for line in outside)
    log.found.extend((line, INVALID_VALUE) for line in invalid)


def parse(content: bytes | bytearray | memoryview | str, max_size: int) -> ParseResult:
    res = ParseResult()
    log = IssueLog()
    issue = log.found.append
    data, res.truncated = _prepare(content, max_size, log)
    groups = res.groups
    originals = res.originals
    kinds = _KINDS
    # tokens of the user-agent run being filled (a dict: constant-time membership,
    # so a run of thousands of user-agent lines stays linear)
    tokens: dict[str, None] = {}
    run: Run = ([], array("q"))
    patterns, marks = run
    add_pattern, add_mark = patterns.append, marks.append  # bound once per run
    extras: list[ExtensionLine] | None = None  # the run's extension lines, if any
    rule_count = 0
    in_rules = False  # a rule has been seen since the last user-agent line

    lines = data.splitlines()  # for bytes: LF, CRLF and CR only, in one pass
    if len(data) > MAX_LINE and max(map(len, lines)) > MAX_LINE:
        issue_lines = [n for n, line in enumerate(lines, 1) if len(line) > MAX_LINE]
        log.found.extend((n, LINE_TOO_LONG) for n in issue_lines)
        lines = [line[:MAX_LINE] for line in lines]
    numbered: Iterable[tuple[int, bytes]] = enumerate(lines, 1)
    if _MARKUP_START(data) or data.count(b"<") * 4 > len(lines):
        # Mostly page markup (an HTML page served as robots.txt): only lines whose
        # first non-blank octet can start a field name can matter, and one C-level
        # regex match per line finds them.
        numbered = compress(numbered, map(_MAYBE_FIELD, lines))
        issue((1, MARKUP))
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
                    issue((lineno, RULE_OUTSIDE_GROUP))
                    continue  # RFC 9309 §2.2.2: rules outside any group are ignored
                in_rules = True
                value = value.strip()
                if value:  # an empty value means "no restriction": nothing to keep
                    add_pattern(value)
                    add_mark(lineno * 2 + kind)
                    rule_count += 1
                    if kind == _ALLOW and b"/index.htm" in value:
                        _index_rule(value, lineno, run, originals)
                elif kind == _ALLOW:
                    issue((lineno, EMPTY_VALUE))
                continue
            if kind == _OTHER:
                issue((lineno, UNKNOWN_FIELD))
                continue
            if 0x23 in value:
                value = value[: value.find(b"#")]
            value = value.strip()
        elif not line or line[0] == 0x23:
            continue  # empty, or a comment ("#")
        elif line[0] not in _FIELD_START:
            issue((lineno, NOT_A_FIELD))
            continue  # not a field (page markup, prose)
        else:
            kind = _HASH  # no colon: maybe Google's "field value" form (two words)
        if kind == _HASH:
            split = _split_line(line)
            if split is None:
                if not _is_blank(line[: line.find(b"#")] if 0x23 in line else line):
                    issue((lineno, NOT_A_FIELD))
                continue
            key, value, has_colon = split
            kind = _kind(key)
            if kind in (_HASH, _OTHER):
                issue((lineno, UNKNOWN_FIELD if has_colon else NOT_A_FIELD))
                continue
            if not has_colon:
                issue((lineno, MISSING_COLON))
        if kind & _TYPO:
            issue((lineno, TYPO))
            kind ^= _TYPO

        if kind <= _DISALLOW:  # a rule line off the hot path
            if not tokens:
                issue((lineno, RULE_OUTSIDE_GROUP))
                continue
            in_rules = True
            if value:
                patterns.append(value)
                marks.append(lineno * 2 + kind)
                rule_count += 1
                if kind == _ALLOW and b"/index.htm" in value:
                    _index_rule(value, lineno, run, originals)
            elif kind == _ALLOW:
                issue((lineno, EMPTY_VALUE))
        elif kind == _UA:
            if in_rules or not tokens:
                run = ([], array("q"))
                patterns, marks = run
                add_pattern, add_mark = patterns.append, marks.append
                tokens = {}
                extras = None
                in_rules = False
            if not value:
                issue((lineno, EMPTY_VALUE))
            match = _ASCII_TOKEN.match(value) if value[:1] != b"*" else None
            if match is not None and (match.end() == len(value) or value.isascii()):
                token = sys.intern(match.group().decode("ascii").lower())
            else:
                token = _token(value)
            if token not in tokens:
                tokens[token] = None
                runs = groups.get(token)
                if runs is None:
                    groups[token] = [run]
                else:
                    runs.append(run)
                if extras is not None:
                    res.extensions.setdefault(token, []).append(extras)
        elif kind == _SITEMAP:
            if value:
                url = value.decode("utf-8", "replace")
                res.sitemaps.append(url)
                if _ABSOLUTE.match(url) is None:
                    issue((lineno, INVALID_VALUE))
            else:
                issue((lineno, EMPTY_VALUE))
        elif not value:
            issue((lineno, EMPTY_VALUE))
        else:  # an extension: it belongs to the whole group (run), in file order
            found = ExtensionLine(_EXT_NAMES[kind - _EXT], value.decode("utf-8", "replace"), lineno)
            if found.field == "content-usage" and tokens:
                # draft-ietf-aipref-attach §3 makes Content-Usage a rule ("rule =/"):
                # a user-agent line after it starts a new group, as after Allow.
                in_rules = True
            if not tokens:
                res.preamble.append(found)
            elif extras is None:
                extras = [found]
                for token in tokens:
                    res.extensions.setdefault(token, []).append(extras)
            else:
                extras.append(found)
    res.rule_count = rule_count
    if res.extensions or res.preamble:
        _interpret(res, log)
    if log.found or log.limit:
        res.issues, res.issue_counts = log.finish(lines)
    return res


def _index_rule(value: bytes, lineno: int, run: Run, originals: dict[int, str]) -> None:
    # Google/Protego: "allow: /dir/index.htm[l]" also allows "/dir/" itself, as the
    # extra rule "allow: /dir/$".
    slash = value.rfind(b"/")
    if slash >= 0 and value.startswith(b"/index.htm", slash):
        run[0].append(value[: slash + 1] + b"$")
        run[1].append(lineno * 2)
        originals[lineno] = value.decode("utf-8", "replace")
