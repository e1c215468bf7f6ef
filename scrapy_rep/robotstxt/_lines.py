"""The parser's view of lines: the size limit, field names and user-agent tokens.

Everything here is C-level or memoised (bounded), so the parser's loop does a small,
constant amount of work per line. A product token (RFC 9309 §2.2.1, matched without
case) is the leading run of ASCII letters and digits, ``-``, ``_`` and non-ASCII letters
(docs/rfc.md item 10: real crawlers use digits, ``MJ12bot``; Google's library cuts at
the first digit), in the file's values and the crawler's name alike.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from functools import lru_cache
from operator import itemgetter

from scrapy_rep.robotstxt._extensions import EXTENSION_FIELDS
from scrapy_rep.robotstxt._issues import LINE_TOO_LONG, MAX_TEXT, IssueLog

# ASCII letters, digits, "-", "_", then (only when the value is not ASCII) any word
# character: non-ASCII digits and numerics are cut off after the match (see _trim).
_TOKEN = re.compile(r"[-\w]*")
_ASCII_TOKEN_TEXT = re.compile(r"[-A-Za-z0-9_]*", re.ASCII)
_ASCII_TOKEN = re.compile(rb"[-A-Za-z0-9_]*")


def _trim(token: str) -> str:
    """Cut *token* (a run of ``[-\\w]``) at its first non-ASCII non-letter."""
    for i, char in enumerate(token):
        if not char.isascii() and not char.isalpha():
            return token[:i]
    return token


def product_token(ua: str | bytes) -> str:
    """The leading product token of *ua* (``""`` for none): ``"MyBot/1.2 (+http://x)"``
    -> ``"MyBot"``, leading whitespace skipped (a header value copied with its padding)."""
    if isinstance(ua, (bytes, bytearray, memoryview)):
        ua = bytes(ua).decode("utf-8", "replace")
    elif not isinstance(ua, str):
        return ""
    ua = ua.lstrip()
    if ua.isascii():
        match = _ASCII_TOKEN_TEXT.match(ua)
        return match.group() if match else ""
    match = _TOKEN.match(ua)
    return _trim(match.group()) if match else ""


@lru_cache(maxsize=512)
def token_key(ua: str) -> str:
    """The lower-cased product token of *ua*, the key groups are stored under (cached,
    bounded: a crawler asks with the same few user agents millions of times)."""
    return product_token(ua).lower()


# Google's library reads a line into a buffer of 8 x 2083 octets (2083 = the longest
# URL old IE accepted) that also holds the terminating NUL: 16,663 octets are kept.
MAX_LINE = 16_663

# Field kinds.  HASH: the text before the first colon holds a "#" (or there is no
# colon), so the line is looked at again.  Then one kind per extension field.  TYPO is
# or-ed into the kind of a misspelt name, so the hot path (kind <= DISALLOW) takes
# exact names only.
ALLOW, DISALLOW, UA, SITEMAP, OTHER, HASH = range(6)
EXT = 6
EXT_NAMES = tuple(EXTENSION_FIELDS)
TYPO = 64

# Google's library recognises a field when its name *starts with* one of these,
# case-insensitively; the typo spellings are the ones it accepts ("frequent typos").
# The first spelling of each kind is the exact one.
_PREFIXES: tuple[tuple[bytes, int], ...] = (
    (b"user-agent", UA),
    (b"useragent", UA),
    (b"user agent", UA),
    (b"allow", ALLOW),
    (b"disallow", DISALLOW),
    (b"dissallow", DISALLOW),
    (b"dissalow", DISALLOW),
    (b"disalow", DISALLOW),
    (b"diasllow", DISALLOW),
    (b"disallaw", DISALLOW),
    (b"sitemap", SITEMAP),
    (b"site-map", SITEMAP),
    *(
        (spelling, EXT + n)
        for n, spellings in enumerate(EXTENSION_FIELDS.values())
        for spelling in spellings
    ),
)
_EXACT = {kind: name for name, kind in reversed(_PREFIXES)}
# All prefixes in one regex: the number of the group that matched gives the kind.
_FIELD = re.compile(b"|".join(b"(" + re.escape(name) + b")" for name, _ in _PREFIXES))
_FIELD_KINDS = (OTHER, *(kind for _, kind in _PREFIXES))
# The octets a field name can start with; a colon-less field line starts with one of
# them or a blank.
_STARTS = frozenset(b"".join(name[:1] for name, _ in _PREFIXES).lower())
_NAME_STARTS = _STARTS | frozenset(bytes(_STARTS).upper())
FIELD_START = _NAME_STARTS | frozenset(b" \t\v\f")
# The same octets as the one-octet bytes objects a slice gives (CPython shares one per
# octet value, so testing a line's first octet allocates nothing).
_FIRST_OCTETS = frozenset(bytes((c,)) for c in _NAME_STARTS)
_FIRST = itemgetter(slice(0, 1))
_MARKUP_START = re.compile(rb"\s*<").match
# Google: a field without its colon is "field value" with only spaces or tabs between
# them, and exactly two such words.
_COLONLESS = re.compile(rb"([^ \t]+)[ \t]+([^ \t]+)")
# Field names as written -> kind, and user-agent values -> group key: bounded memos
# (a hostile file cannot grow them; past the bound, lookups are simply computed).
KINDS: dict[bytes, int] = {}
UA_TOKENS: dict[bytes, str] = {}
_MEMO_LIMIT = 4096


def field_kind(key: bytes) -> int:
    """Kind of a field name as written (blanks around it and any case allowed)."""
    folded = key.strip().lower()
    if 0x23 in folded:
        kind = HASH
    else:
        m = _FIELD.match(folded)
        kind = _FIELD_KINDS[m.lastindex or 0] if m else OTHER
        if kind != OTHER and folded != _EXACT[kind]:
            kind |= TYPO
    # Memoise names as written; long unknown names are page junk, not worth a slot.
    if len(KINDS) < _MEMO_LIMIT and (kind != OTHER or len(key) <= 24):
        KINDS[key] = kind
    return kind


def ua_token(value: bytes) -> str:
    """The group key of a (stripped) user-agent value (see product_token for the rule)."""
    if value[:1] == b"*" and (len(value) == 1 or value[1:2].isspace()):
        token = "*"  # Google: "*" followed by anything after whitespace is still global
    elif value.isascii():
        match = _ASCII_TOKEN.match(value)
        token = sys.intern(match.group().decode("ascii").lower()) if match else ""
    else:
        token = sys.intern(product_token(value).lower())
    if len(UA_TOKENS) < _MEMO_LIMIT and len(value) <= 64:
        UA_TOKENS[value] = token
    return token


def as_bytes(content: bytes | bytearray | memoryview | str) -> bytes:
    if isinstance(content, str):
        try:
            return content.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # a lone surrogate that surrogateescape did not make
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


def prepare(
    content: bytes | bytearray | memoryview | str, max_size: int, log: IssueLog
) -> tuple[bytes, bool]:
    data, truncated = _limit(as_bytes(content), max_size, log)
    # a UTF-8 BOM, or the start of one (Google's library skips each octet that
    # continues the BOM), is not part of the first line
    if data[:1] == b"\xef":
        skip = 3 if data[1:3] == b"\xbb\xbf" else 2 if data[1:2] == b"\xbb" else 1
        data = data[skip:]
    return data, truncated


def cut_long_lines(lines: list[bytes], log: IssueLog) -> list[bytes]:
    """*lines* cut to MAX_LINE octets, with an issue for each longer one."""
    if max(map(len, lines), default=0) <= MAX_LINE:
        return lines
    long = [n for n, line in enumerate(lines, 1) if len(line) > MAX_LINE]
    log.found.extend((n, LINE_TOO_LONG) for n in long)
    return [line[:MAX_LINE] for line in lines]


def is_markup(data: bytes, line_count: int) -> bool:
    """Mostly page markup (an HTML page served as robots.txt)?"""
    if 0x3C not in data:  # ("<": most files hold none, and memchr says so at once)
        return False
    return data.count(b"<") * 4 > line_count or _MARKUP_START(data) is not None


def may_hold_field(lines: list[bytes]) -> Iterator[bool]:
    """For each line, whether its first non-blank octet can start a field name (three
    C-level passes, no regex call per line)."""
    return map(_FIRST_OCTETS.__contains__, map(_FIRST, map(bytes.lstrip, lines)))


def split_line(line: bytes) -> tuple[bytes, bytes, bool] | None:
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


def is_blank(line: bytes) -> bool:
    stripped = line.lstrip()
    return not stripped or stripped[:1] == b"#"
