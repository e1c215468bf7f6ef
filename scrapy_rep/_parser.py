"""robots.txt bytes -> groups of rules (RFC 9309 §2.1-§2.2, Google's leniencies).

The parser works on bytes so that invalid UTF-8 can never stop it: field names are
ASCII, rule values are percent-normalised octet by octet (non-ASCII and invalid
octets become %XX, as RFC 9309 §2.2.2 and Google's library do), and only sitemap
URLs are decoded (UTF-8, bad sequences replaced).  One pass over the lines, with a
constant amount of work per line besides the line's own length: linear time.
"""

from __future__ import annotations

import re

from scrapy_rep._matcher import normalise_pattern

__all__ = ["MAX_LINE", "ParseResult", "parse"]

# Google's library cuts lines at 8 x 2083 octets (2083 = the longest URL old IE
# accepted); anything after that on the same line is ignored.
MAX_LINE = 16_664

_BOM = b"\xef\xbb\xbf"

# Field kinds.
_UA, _ALLOW, _DISALLOW, _SITEMAP, _DELAY, _RATE, _SIGNAL, _OTHER = range(8)

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
# Exact lower-cased names seen so far -> kind; a bounded memo of the prefix scan.
_KINDS: dict[bytes, int] = {name: kind for name, kind in _PREFIXES}
_KINDS_LIMIT = 4096

_UA_TOKEN = re.compile(rb"[A-Za-z_-]*")
_DELAY_VALUE = re.compile(rb"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")
_RATE_VALUE = re.compile(
    rb"([0-9]+)\s*/\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([smhd]?)(?![A-Za-z])", re.I
)
_RATE_UNIT = {b"": 1.0, b"s": 1.0, b"m": 60.0, b"h": 3600.0, b"d": 86400.0}
SIGNAL_KEYS = ("search", "ai-input", "ai-train")
_SIGNAL_VALUES = {b"yes": True, b"no": False}

# A rule: (normalised pattern, code) with code = (len(pattern) * 2 + allow) << 32 | line.
# Sorting by code >> 32, descending, puts the longest pattern first and allow before
# disallow on a tie: RFC 9309 §2.2.2 precedence in one integer.
Rule = tuple[str, int]
LINE_MASK = (1 << 32) - 1


def _kind(key: bytes) -> int:
    kind = _KINDS.get(key)
    if kind is None:
        kind = _OTHER
        for name, k in _PREFIXES:
            if key.startswith(name):
                kind = k
                break
        if len(_KINDS) < _KINDS_LIMIT:
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
        self.groups: dict[str, list[Rule]] = {}
        self.delays: dict[str, float] = {}
        self.rates: dict[str, tuple[int, float]] = {}
        # "" holds signals given before any user-agent line: a file-wide default.
        self.signals: dict[str, dict[str, bool]] = {}
        self.sitemaps: list[str] = []
        # line -> pattern as written, only where it differs from the stored pattern
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


def parse(content: bytes | bytearray | memoryview | str, max_size: int) -> ParseResult:
    res = ParseResult()
    data, res.truncated = _limit(_to_bytes(content), max_size)
    if data.startswith(_BOM):
        data = data[3:]
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")

    groups = res.groups
    originals = res.originals
    current: list[list[Rule]] = []  # rule lists of the user-agent run being filled
    tokens: list[str] = []  # the same run's tokens
    in_rules = False  # a rule has been seen since the last user-agent line
    count = 0

    for lineno, line in enumerate(data.split(b"\n"), 1):
        if not line:
            continue
        if len(line) > MAX_LINE:
            line = line[:MAX_LINE]
        hash_at = line.find(b"#")
        if hash_at >= 0:
            line = line[:hash_at]
        colon = line.find(b":")
        if colon >= 0:
            key = line[:colon].strip().lower()
            value = line[colon + 1 :].strip()
        else:
            # Google: "field value" without a colon, only if there are exactly two
            # whitespace-separated words (so prose lines are not read as fields).
            words = line.split()
            if len(words) != 2:
                continue
            key = words[0].lower()
            value = words[1]
        if not key:
            continue
        kind = _KINDS.get(key)
        if kind is None:
            kind = _kind(key)

        if kind in (_ALLOW, _DISALLOW):
            if not tokens:
                continue  # RFC 9309 §2.2.2: rules outside any group are ignored
            in_rules = True
            if not value:
                continue  # an empty value means "no restriction": nothing to keep
            if value.isascii() and b"%" not in value and b"$" not in value[:-1]:
                pattern = value.decode("ascii")
            else:
                pattern = normalise_pattern(value)
                originals[lineno] = value.decode("utf-8", "replace")
            allow = kind == _ALLOW
            rule = (pattern, (len(pattern) * 2 + allow) << 32 | lineno)
            for rules in current:
                rules.append(rule)
            count += 1
            if allow:
                # Google/Protego: "allow: /dir/index.htm[l]" also allows "/dir/" itself,
                # added as "/dir/$" with that pattern's own length as its priority.
                slash = pattern.rfind("/")
                if slash >= 0 and pattern.startswith("/index.htm", slash):
                    dir_pattern = pattern[: slash + 1] + "$"
                    rule = (dir_pattern, (len(dir_pattern) * 2 + 1) << 32 | lineno)
                    for rules in current:
                        rules.append(rule)
                    if lineno not in originals:
                        originals[lineno] = pattern
        elif kind == _UA:
            if in_rules:
                current = []
                tokens = []
                in_rules = False
            if value[:1] == b"*" and (len(value) == 1 or value[1:2].isspace()):
                # Google: "*" followed by anything after whitespace is still global.
                token = "*"
            else:
                match = _UA_TOKEN.match(value)
                token = match.group().decode("ascii").lower() if match else ""
            if token not in tokens:
                tokens.append(token)
                group = groups.get(token)
                if group is None:
                    group = groups[token] = []
                current.append(group)
        elif kind == _SITEMAP:
            if value:
                res.sitemaps.append(value.decode("utf-8", "replace"))
        elif kind == _DELAY:
            m = _DELAY_VALUE.fullmatch(value)
            if m is not None and tokens:
                delay = float(value)
                for token in tokens:
                    res.delays.setdefault(token, delay)
        elif kind == _RATE:
            rate = _rate(value) if tokens else None
            if rate is not None:
                for token in tokens:
                    res.rates.setdefault(token, rate)
        elif kind == _SIGNAL:
            for token in tokens or [""]:
                _signals(value, res.signals.setdefault(token, {}))
    res.rule_count = count
    return res
