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

__all__ = ["match_pieces", "normalise_path", "normalise_pattern", "split_pattern", "url_path"]

# RFC 3986 §2.3 unreserved characters: their %XX form equals the character itself.
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

# In a pattern: escapes to canonicalise, non-ASCII octets to escape, and a "$" that is
# not the final character (only a final "$" anchors; elsewhere it is a literal "$",
# which a URL carries as %24 after normalise_path).
_PATTERN_FIX = re.compile(rb"%([0-9A-Fa-f]{2})|[\x80-\xff]|\$(?!\Z)")
# In a URL: the same, plus literal "*" and "$", which must not look like pattern
# syntax; RFC 9309 §2.2.3 (Figure 6) says %2A and %24 in a rule match them.
_PATH_FIX = re.compile(rb"%([0-9A-Fa-f]{2})|[\x80-\xff*$]")

# scheme "://" authority, or a network-path reference "//" authority (RFC 3986 §4.2).
_AUTHORITY = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.\-]*:)?//[^/?#]*")


def _fix(match: re.Match[bytes]) -> bytes:
    hexpair = match.group(1)
    if hexpair is None:
        # a raw octet outside unreserved ASCII that needs escaping
        return b"%%%02X" % match.group()[0]
    value = int(hexpair, 16)
    if value in _UNRESERVED:
        return bytes((value,))
    return b"%" + hexpair.upper()


def normalise_pattern(raw: bytes) -> str:
    """Canonical form of a rule pattern, as raw bytes from the file.

    Non-ASCII octets become upper-case %XX (RFC 9309 §2.2.2); %XX of unreserved
    characters is decoded; other escapes keep their meaning but get upper-case hex.
    Invalid UTF-8 is escaped octet by octet, as Google's library does, so a Latin-1
    robots.txt still matches the Latin-1 escapes its own site uses.
    """
    if raw.isascii() and b"%" not in raw and b"$" not in raw[:-1]:
        return raw.decode("ascii")
    return _PATTERN_FIX.sub(_fix, raw).decode("ascii")


def normalise_path(path: str) -> str:
    """Canonical form of a URL path+query, comparable with normalise_pattern output."""
    if path.isascii() and "%" not in path and "*" not in path and "$" not in path:
        return path
    raw = path.encode("utf-8", "surrogatepass")
    return _PATH_FIX.sub(_fix, raw).decode("ascii")


def url_path(url: str) -> str:
    """The path plus ``?query`` of *url* (no fragment); an empty path is ``/``.

    *url* may be absolute (``https://h/p?q``), network-path (``//h/p``) or a path.
    Anything else is taken as a path missing its leading slash.
    """
    if url[:1] == "/" and url[1:2] != "/":
        rest = url
    else:
        m = _AUTHORITY.match(url)
        rest = url[m.end() :] if m else url
    hash_at = rest.find("#")
    if hash_at >= 0:
        rest = rest[:hash_at]
    if rest[:1] != "/":
        rest = "/" + rest
    return rest


def split_pattern(pattern: str) -> tuple[tuple[str, ...], bool]:
    """Pre-split a normalised pattern into literal pieces and an end anchor flag."""
    anchored = pattern.endswith("$")
    if anchored:
        pattern = pattern[:-1]
    return tuple(pattern.split("*")), anchored


def match_pieces(pieces: tuple[str, ...], anchored: bool, path: str) -> bool:
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
