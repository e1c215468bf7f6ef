"""The public ``RobotsTxt`` object: a parsed robots.txt and the questions it answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from scrapy_rep._matcher import match_pieces, normalise_path, split_pattern, url_path
from scrapy_rep._parser import LINE_MASK, SIGNAL_KEYS, Rule, parse
from scrapy_rep._useragent import token_key

__all__ = ["DEFAULT_MAX_SIZE", "Decision", "RobotsTxt"]

# RFC 9309 §2.5: crawlers must parse at least the first 500 KiB.
DEFAULT_MAX_SIZE = 512_000

_Text: TypeAlias = str | bytes | bytearray | memoryview

# A compiled rule: (literal prefix, code) or (pattern, code, pieces, anchored);
# see _parser.Rule for the code.  Most patterns are plain prefixes, and a 2-tuple
# plus str.startswith is the cheapest thing Python can store and test.
_Entry: TypeAlias = tuple[str, int] | tuple[str, int, tuple[str, ...], bool]
# A group: (entries indexed by their first two characters, entries without such a
# literal start).  Both parts are sorted by precedence, so the first hit in each is
# that part's best and a check usually stops after a handful of startswith calls.
_Group: TypeAlias = tuple[dict[str, tuple[_Entry, ...]], tuple[_Entry, ...]]

_KEY_LEN = 2


@dataclass(frozen=True, slots=True)
class Decision:
    """Why a URL is allowed or not, for logs and debugging."""

    allowed: bool
    line: int | None
    rule: str | None
    groups: tuple[str, ...]
    reason: str


def _entry(rule: Rule) -> _Entry:
    pattern, code = rule
    literal = pattern.rstrip("*") if not pattern.endswith("$") else pattern
    # A trailing "*" matches the empty run too, so "/a*" matches exactly like "/a"
    # (it keeps its own length for precedence, as in Google's library).
    if "*" not in literal and not literal.endswith("$"):
        return (literal, code)
    pieces, anchored = split_pattern(pattern)
    return (pattern, code, pieces, anchored)


def _compile(rules: list[Rule]) -> _Group:
    rules.sort(key=lambda r: -(r[1] >> 32))
    index: dict[str, list[_Entry]] = {}
    rest: list[_Entry] = []
    for rule in rules:
        entry = _entry(rule)
        # Index by the pattern's literal start only: a URL can match the entry
        # only if it starts with those same characters.
        first = entry[0] if len(entry) == 2 else entry[2][0]
        if len(first) >= _KEY_LEN:
            index.setdefault(first[:_KEY_LEN], []).append(entry)
        else:
            rest.append(entry)
    return {k: tuple(v) for k, v in index.items()}, tuple(rest)


def _hit(entry: _Entry, path: str) -> bool:
    if len(entry) == 2:
        return path.startswith(entry[0])
    return match_pieces(entry[2], entry[3], path)


def _best(group: _Group, path: str) -> _Entry | None:
    index, rest = group
    best: _Entry | None = None
    bucket = index.get(path[:_KEY_LEN])
    if bucket is not None:
        for entry in bucket:
            if len(entry) == 2:
                if path.startswith(entry[0]):
                    best = entry
                    break
            elif match_pieces(entry[2], entry[3], path):
                best = entry
                break
    if rest:
        floor = best[1] >> 32 if best is not None else -1
        for entry in rest:
            if entry[1] >> 32 <= floor:
                break  # nothing further down can beat the bucket's hit
            if _hit(entry, path):
                return entry
    return best


def _text(value: _Text) -> str:
    if isinstance(value, str):
        return value
    return bytes(value).decode("utf-8", "replace")


class RobotsTxt:
    """A parsed robots.txt.  Build with :meth:`parse`; every query is read-only."""

    __slots__ = (
        "_delays",
        "_groups",
        "_originals",
        "_rates",
        "_signals",
        "rule_count",
        "sitemaps",
        "truncated",
    )

    def __init__(self) -> None:
        self._groups: dict[str, _Group] = {}
        self._delays: dict[str, float] | None = None
        self._rates: dict[str, tuple[int, float]] | None = None
        self._signals: dict[str, dict[str, bool]] | None = None
        self._originals: dict[int, str] | None = None
        self.sitemaps: list[str] = []
        self.truncated = False
        self.rule_count = 0

    @classmethod
    def parse(cls, content: _Text, max_size: int = DEFAULT_MAX_SIZE) -> RobotsTxt:
        """Parse *content* (bytes or str); never raises for any content."""
        res = parse(content, max_size)
        self = cls()
        self._groups = {token: _compile(rules) for token, rules in res.groups.items()}
        self._delays = res.delays or None
        self._rates = res.rates or None
        self._signals = res.signals or None
        self._originals = res.originals or None
        self.sitemaps = res.sitemaps
        self.truncated = res.truncated
        self.rule_count = res.rule_count
        return self

    def _token(self, user_agent: _Text) -> str | None:
        """The group key this crawler obeys (RFC 9309 §2.2.1), or None for none."""
        token = token_key(_text(user_agent))
        if token and token in self._groups:
            return token
        return "*" if "*" in self._groups else None

    def allowed(self, url: _Text, user_agent: _Text) -> bool:
        """Whether *user_agent* may fetch *url*."""
        token = self._token(user_agent)
        if token is None:
            return True
        path = normalise_path(url_path(_text(url)))
        if path == "/robots.txt" or path.startswith("/robots.txt?"):
            return True  # RFC 9309 §2.2.2: /robots.txt is implicitly allowed
        entry = _best(self._groups[token], path)
        return entry is None or bool(entry[1] >> 32 & 1)

    def explain(self, url: _Text, user_agent: _Text) -> Decision:
        """Like :meth:`allowed`, with the deciding line, rule and group."""
        token = self._token(user_agent)
        path = normalise_path(url_path(_text(url)))
        if path == "/robots.txt" or path.startswith("/robots.txt?"):
            return Decision(True, None, None, (), "robots.txt-always-allowed")
        if token is None:
            return Decision(True, None, None, (), "no-matching-group")
        entry = _best(self._groups[token], path)
        if entry is None:
            return Decision(True, None, None, (token,), "no-matching-rule")
        code = entry[1]
        allow = bool(code >> 32 & 1)
        line = code & LINE_MASK
        pattern = (self._originals or {}).get(line, entry[0])
        rule = ("Allow: " if allow else "Disallow: ") + pattern
        return Decision(allow, line, rule, (token,), "rule")

    def crawl_delay(self, user_agent: _Text) -> float | None:
        """Crawl-delay of the obeyed group in seconds, if it gives a valid one."""
        token = self._token(user_agent)
        if token is None or self._delays is None:
            return None
        return self._delays.get(token)

    def request_rate(self, user_agent: _Text) -> tuple[int, float] | None:
        """Request-rate of the obeyed group as (requests, seconds)."""
        token = self._token(user_agent)
        if token is None or self._rates is None:
            return None
        return self._rates.get(token)

    def content_signals(self, user_agent: _Text) -> dict[str, bool]:
        """Content-Signal values (``search``, ``ai-input``, ``ai-train``) that apply.

        Signals in the obeyed group win; signals given before any user-agent line
        apply to every crawler as a file-wide default.
        """
        if self._signals is None:
            return {}
        token = self._token(user_agent)
        found = dict(self._signals.get(token, {})) if token is not None else {}
        for key, value in self._signals.get("", {}).items():
            found.setdefault(key, value)
        return {key: found[key] for key in SIGNAL_KEYS if key in found}
