"""Patterns and URL paths in one canonical percent-encoding (RFC 9309 §2.2.2).

Both the rule patterns and the URL path are brought to it before they are compared,
so that equal URIs compare equal whatever escaping the site or the crawler used:

- octets that may not appear in a URI (non-ASCII, controls, space, ``"<>\\^`{|}``)
  become upper-case %XX, so ``Disallow: /a b`` matches Scrapy's ``/a%20b``;
- %XX of an unreserved character (RFC 3986 §2.3) becomes the character, and other
  escapes get upper-case hex (reserved characters stay escaped: ``%2F`` is not ``/``);
- a "%" not followed by two hex digits is a literal "%", that is ``%25`` (as
  Google's library);
- in a pattern, a "$" anywhere but at the end is a literal ("%24"); in a path, "*"
  and "$" are literals ("%2A", "%24") that must not look like pattern syntax
  (RFC 9309 §2.2.3 says %2A and %24 in a rule match them).

No regex callback per escape: each distinct octet or escape to change is one
bytes.replace (C, memchr speed).
"""

from __future__ import annotations

import re
import sys
from array import array
from itertools import chain, compress, repeat
from operator import itemgetter, ne, rshift

_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_HEX = b"0123456789ABCDEFabcdef"
# the two octets after a "%" -> the canonical escape (or the character)
_ESCAPES: dict[bytes, bytes] = {}
for _a in _HEX:
    for _b in _HEX:
        _pair = bytes((_a, _b))
        _value = int(_pair, 16)
        _ESCAPES[_pair] = bytes((_value,)) if _value in _UNRESERVED else b"%" + _pair.upper()

# octets that may not appear in a URI (RFC 3986 §2: not reserved, unreserved or "%")
_NOT_URI = bytes(range(0x21)) + b'"<>\\^`{|}' + bytes(range(0x7F, 0x100))
# octets that may appear in a URI as they are (in a pattern; a path adds "*" and "$")
_URI_OK = bytes(sorted(set(range(256)) - set(_NOT_URI)))
_PATTERN_OK = _URI_OK.replace(b"$", b"")
_PATH_OK = _PATTERN_OK.replace(b"*", b"")
_OCTET_ESCAPES = tuple(b"%%%02X" % c for c in range(256))

# Escapes that normalisation changes: any with a lower-case hex digit, and those of
# unreserved characters (2D 2E 30-39 41-5A 5F 61-7A 7E); "%2F" or "%E3" stay as they are.
_TO_CHANGE = rb"[0-9A-Fa-f][a-f]|[a-f][0-9A-F]|2[DE]|3[0-9]|4[1-9A-F]|5[0-9AF]|6[1-9A-F]|7[0-9AE]"
_CHANGE = re.compile(rb"%(?:" + _TO_CHANGE + rb")")
_LONE_PERCENT = re.compile(rb"%(?![0-9A-Fa-f]{2})")  # a "%" without two hex digits
_ESCAPE = rb"%(?:" + _TO_CHANGE + rb"|(?![0-9A-Fa-f]{2}))"  # either of those
# (the regex engine skips to its literal first octet, "%", at memchr speed)
_JOINED_ESCAPE = re.compile(_ESCAPE)
_NOT_URI_CLASS = rb'[\x00-\x20"<>\\^`{|}\x7f-\xff]'
# something to change in a pattern (a "$" that is not the last octet included)
_PATTERN_FIX = re.compile(_ESCAPE + rb"|" + _NOT_URI_CLASS + rb"|\$(?!\Z)")
_PATH_FIX = re.compile(_ESCAPE + rb"|" + _NOT_URI_CLASS + rb"|[*$]")
_HEAD = itemgetter(slice(0, 2))
_REST = itemgetter(slice(2, None))
# with up to this many distinct escapes to change, one bytes.replace per escape (C,
# memchr speed) beats splitting on every "%"
_FEW = 8


def _split_escapes(raw: bytes) -> bytes:
    """*raw* (every "%" followed by two hex digits) with every escape canonical."""
    head, *tails = raw.split(b"%")
    fixed: list[bytes | None] = list(map(_ESCAPES.get, map(_HEAD, tails)))
    rests: list[bytes] = list(map(_REST, tails))
    return head + b"".join(chain.from_iterable(zip(fixed, rests, strict=True)))  # type: ignore[arg-type]


def _escapes(raw: bytes) -> bytes:
    """*raw* with every "%" sequence in canonical form (see the module docstring)."""
    if _LONE_PERCENT.search(raw) is not None:
        raw = _LONE_PERCENT.sub(b"%25", raw)  # a literal replacement: no callback
    # Each escape is replaced whole, and each "%" now starts a valid escape, so a
    # replacement can never create a new escape across its neighbours.
    pos = 0
    for _ in range(_FEW):
        m = _CHANGE.search(raw, pos)
        if m is None:
            return raw
        escape = m.group()
        raw = raw.replace(escape, _ESCAPES[escape[1:]])
        pos = m.start()
    return _split_escapes(raw) if _CHANGE.search(raw, pos) else raw


def _normalise(raw: bytes, keep: bytes) -> bytes:
    """Escapes made canonical, then the octets outside *keep* escaped."""
    if 0x25 in raw:
        raw = _escapes(raw)
    rest = raw.translate(None, keep)  # the octets to escape, each as often as it occurs
    while rest:
        # one distinct octet at a time (a rule of 16,000 "$" is two replaces)
        octet = rest[:1]
        raw = raw.replace(octet, _OCTET_ESCAPES[rest[0]])
        rest = rest.translate(None, octet)
    return raw


# octets that may need a pattern fixed: "%", "$", and those outside URIs but "\n"
_MAYBE_FIX = b"%$" + _NOT_URI.replace(b"\n", b"")
_SURE_OK = bytes(sorted(set(range(256)) - set(_MAYBE_FIX)))


def joined_needs_fixing(joined: bytes) -> bool:
    """Whether some pattern of *joined* (patterns joined by "\n") needs normalising: C-level
    passes first (most files have no "%", no non-ASCII, only final "$"s), a regex last."""
    rest = joined.translate(None, _SURE_OK)
    if not rest:
        return False
    if rest.translate(None, b"%$"):  # an octet that may not appear in a URI
        return True
    dollars = rest.count(b"$")
    if dollars and dollars != joined.count(b"$\n") + joined.endswith(b"$"):
        return True  # a "$" that is not a pattern's last octet
    return 0x25 in rest and _JOINED_ESCAPE.search(joined) is not None


def normalise_pattern(raw: bytes) -> bytes:
    """Canonical form of a rule pattern, as raw bytes from the file (invalid UTF-8 is
    escaped octet by octet, as Google's library does, so a Latin-1 robots.txt still
    matches the Latin-1 escapes its own site uses)."""
    if _PATTERN_FIX.search(raw) is None:
        return raw
    if raw[-1:] == b"$":  # only a final "$" anchors (RFC 9309 §2.2.3)
        return _normalise(raw[:-1], _PATTERN_OK) + b"$"
    return _normalise(raw, _PATTERN_OK)


# -- a group's rules at once ------------------------------------------------------------


# what the joined patterns keep as they are: a pattern's octets, the joiner, and "$"
# (a "$" that is not a pattern's last octet is escaped apart: see _normalised_joined)
_JOINED_OK = _PATTERN_OK + b"\n$"


def _normalised_joined(joined: bytes) -> bytes:
    """Patterns joined by "\n", each in canonical form (normalise_pattern of each),
    in C-level passes over them all. Nothing crosses a joiner: an escape needs two hex
    digits ("\n" is none), "\n" is never escaped (no pattern holds one), and a "$"
    before "\n" or the end is a pattern's last octet, the only one that anchors."""
    joined = _normalise(joined, _JOINED_OK)
    if 0x24 in joined:
        # every "$" escaped but the last octet of each pattern: those are held as
        # "\x00" meanwhile (no octet below 0x21 is left unescaped by now); replaces,
        # not a regex substitution: a rule of 16,000 "$" is not 16,000 matches
        joined = joined.replace(b"$\n", b"\x00\n")
        if joined[-1:] == b"$":
            joined = joined[:-1] + b"\x00"
        joined = joined.replace(b"$", b"%24").replace(b"\x00", b"$")
    return joined


def normalised_rules(
    patterns: list[bytes], marks: array[int], originals: dict[int, str]
) -> tuple[list[bytes], bytes]:
    """*patterns* in canonical form (a new list if any changed) and joined by "\n",
    normalised at once (see _normalised_joined); *originals* receives {line: pattern
    as written} for those that changed."""
    raw = b"\n".join(patterns)
    if not joined_needs_fixing(raw):
        return patterns, raw
    joined = _normalised_joined(raw)
    fixed = joined.split(b"\n")
    changed = list(map(ne, fixed, patterns))
    # {line: pattern as written} of those that changed, in C-level passes (decoded in
    # one call: an invalid sequence cut by a "\n" is replaced as at a pattern's end)
    texts = compress(raw.decode("utf-8", "replace").split("\n"), changed)
    lines = map(rshift, compress(marks, changed), repeat(1))
    # (reversed: of rules sharing a line, the parser's "/a/$" derived from
    # "/a/index.html", the first in file order is the one named)
    written = dict(reversed(list(zip(lines, texts, strict=True))))
    for line in written.keys() & originals.keys():  # a line known already keeps its text
        del written[line]
    originals.update(written)
    return fixed, joined


# scheme "://" authority, or a network-path reference "//" authority (RFC 3986 §4.2),
# then the path and query as group 1 (the fragment is never sent to a server).
_AUTHORITY = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.\-]*:)?//[^/?#]*([^#]*)")

# characters that keep a URL off the fast paths: "%", "*", "$", and those that may not
# appear in a URI (they are escaped: see _normalise), non-ASCII included
_SPECIAL = r'%*$\x00-\x20"<>\\^`{|}\x7f-\U0010ffff'
# plain_path's fast path: path and query of an absolute or path-only URL of any scheme
# that needs no normalisation, with or without a fragment
_PLAIN = re.compile(r"(?:(?:[A-Za-z][A-Za-z0-9+.\-]*:)?//[^/?#]*)?([^#" + _SPECIAL + r"]*)(?:#|\Z)")


# allowed()'s narrower fast path: an http(s) or path-only URL without a fragment, so
# the match is the path itself (no slash to add, nothing to cut).
# Possessive repeats (Python 3.11+) never give back what they matched: the match
# fails at once on a URL the fast path cannot take, and is ~15 % quicker on others.
_ONCE = "+" if sys.version_info >= (3, 11) else ""
SIMPLE_URL = re.compile(rf"(?:https?://[^/?#]*{_ONCE}|(?!//))(/[^#" + _SPECIAL + rf"]*{_ONCE})\Z")


def plain_path(url: str) -> bytes:
    """Normalised path+query of *url* (see url_path and normalise_path)."""
    m = _PLAIN.match(url)
    if m is None:
        return normalise_path(url_path(url))
    path = m.group(1)
    if path[:1] != "/":
        path = "/" + path
    return path.encode("ascii")


def normalise_path(path: str) -> bytes:
    """Canonical form of a URL path+query, comparable with normalise_pattern output
    (bytes: 16 octets smaller than a str, over hundreds of thousands of rules)."""
    raw = path.encode("utf-8", "surrogatepass")
    return raw if _PATH_FIX.search(raw) is None else _normalise(raw, _PATH_OK)


def url_path(url: str) -> str:
    """The path plus ``?query`` of *url* (no fragment; an empty path is ``/``), *url*
    absolute, network-path (``//h/p``) or a path (its leading slash added if missing)."""
    if url[:1] == "/" and url[1:2] != "/":
        hash_at = url.find("#")
        return url if hash_at < 0 else url[:hash_at]
    m = _AUTHORITY.match(url)
    rest = m.group(1) if m else url.partition("#")[0]
    return rest if rest[:1] == "/" else "/" + rest


def as_text(value: str | bytes | bytearray | memoryview) -> str:
    if isinstance(value, str):
        return value
    return bytes(value).decode("utf-8", "replace")


def path_and_text(url: str | bytes | bytearray | memoryview) -> tuple[bytes, str | None]:
    """The normalised path+query of *url* (plain_path) and, for the common URL
    (SIMPLE_URL), the same as str, else None. RobotsTxt.allowed() inlines this."""
    m = SIMPLE_URL.match(url) if url.__class__ is str else None
    if m is not None:
        text: str = m[1]
        return text.encode(), text
    return plain_path(as_text(url)), None
