"""Usage preferences: IETF AIPREF ``Content-Usage`` and Cloudflare ``Content-Signal``.

Preferences say what a crawler may do with content, never whether it may fetch it:
Allow and Disallow still decide fetching (draft-ietf-aipref-vocab §3.3). The rules, in
full in docs/usage.md: path-scoped rules of the chosen group, longest match first
(draft-ietf-aipref-attach §3); ``Content-Signal`` lines before any user-agent line for
every crawler (as crawler-commons reads them); the ``Content-Usage`` response header
(draft-ietf-aipref-attach §2). Statements combine per label (draft-ietf-aipref-vocab
§5.1): any ``n`` wins, then any ``y``, else unknown; every answer keeps the statements
that decided it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias

from http_sf import Token
from http_sf import parse as parse_structured

from scrapy_rep.robotstxt._lines import MAX_LINE, as_bytes
from scrapy_rep.robotstxt._matcher import pattern_matches
from scrapy_rep.robotstxt._normalise import normalise_pattern

Y, N, UNKNOWN = "y", "n", "unknown"

# draft-ietf-aipref-vocab §6.1 labels that a Content-Usage Dictionary can carry.
AIPREF_LABELS = ("train-ai", "search")
# Content-Signal keys -> the label they state a preference for (ai-train is AIPREF's
# train-ai; ai-input has no AIPREF label and keeps its own).
SIGNAL_LABELS = {"ai-train": "train-ai", "search": "search", "ai-input": "ai-input"}
# Every label a crawl can declare as its purpose, in report order.
LABELS = ("train-ai", "search", "ai-input")
# Content-Signal ``use=``: how much of the content may be kept, least first.
USE_LEVELS = ("immediate", "reference", "full")

_SIGNAL_VALUES = {b"yes": Y, b"no": N}
# A rule value: a path up to the first SP or HTAB, then the preference
# (draft-ietf-aipref-attach §3.2).
_PATH_AND_VALUE = re.compile(rb"(/[^ \t]*)[ \t]*(.*)", re.DOTALL)

# (field, value, line number), as the parser keeps extension lines; a str value is
# UTF-8 encoded again (draft-ietf-aipref-attach §3.2: preferences are processed as bytes)
Line = tuple[str, bytes | str, int]


@dataclass(frozen=True, slots=True)
class Source:
    """Where a statement came from: a robots.txt line or a response header."""

    field: str  # "Content-Usage" or "Content-Signal"
    value: str  # as written
    line: int | None = None  # robots.txt line number; None for the header

    def describe(self) -> str:
        where = "response header" if self.line is None else f"robots.txt line {self.line}"
        return f"{where}: {self.field}: {self.value}"

    def to_json(self) -> dict[str, Any]:
        origin = "header" if self.line is None else "robots.txt"
        return {"from": origin, "line": self.line, "text": f"{self.field}: {self.value}"}


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement of preference: a value per label it speaks about."""

    prefs: Mapping[str, str]  # label -> Y or N; labels it leaves unknown are absent
    source: Source
    use: str | None = None  # Content-Signal use= level


@dataclass(frozen=True, slots=True)
class Preference:
    """The combined preference for one label, and the statements that decided it."""

    value: str = UNKNOWN
    sources: tuple[Source, ...] = ()


_NO_PREFERENCE = Preference()  # (frozen: one shared by every unknown)


def _merged(a: Preference, b: Preference, ranking: tuple[str, ...]) -> Preference:
    """The value ranked first of *a*'s and *b*'s (else unknown), with the sources of
    both that gave it: for labels (N, Y), draft-ietf-aipref-vocab §5.1's any "n" wins,
    then any "y"; for ``use=``, USE_LEVELS: the least use wins."""
    for value in ranking:
        if a.value == value or b.value == value:
            mine = a.sources if a.value == value else ()
            theirs = b.sources if b.value == value else ()
            return Preference(value, mine + tuple(s for s in theirs if s not in mine))
    return _NO_PREFERENCE


def _unknown_all() -> dict[str, Preference]:
    return dict.fromkeys(LABELS, _NO_PREFERENCE)


@dataclass(frozen=True, slots=True)
class Usage:
    """Preferences per label (every label of LABELS), with where each came from."""

    preferences: Mapping[str, Preference] = field(default_factory=_unknown_all)
    use: Preference = _NO_PREFERENCE  # value: a USE_LEVELS entry

    def value(self, label: str) -> str:
        return self.preferences.get(label, _NO_PREFERENCE).value

    def refused(self, purposes: Iterable[str]) -> list[str]:
        """The purposes this content is refused for (``n``), in the order given."""
        return [label for label in purposes if self.value(label) == N]

    def merged(self, other: Usage) -> Usage:
        prefs = {
            label: _merged(
                self.preferences.get(label, _NO_PREFERENCE),
                other.preferences.get(label, _NO_PREFERENCE),
                (N, Y),
            )
            for label in LABELS
        }
        return Usage(prefs, _merged(self.use, other.use, USE_LEVELS))

    @classmethod
    def of(cls, statements: Iterable[Statement]) -> Usage:
        usage = cls()
        for statement in statements:
            source = (statement.source,)
            prefs = {label: Preference(value, source) for label, value in statement.prefs.items()}
            use = _NO_PREFERENCE if statement.use is None else Preference(statement.use, source)
            usage = usage.merged(cls(prefs, use))
        return usage

    def to_json(self) -> dict[str, Any]:
        """Plain data (for request meta and ``scrapy robots --json``)."""
        return {
            "preferences": {label: self.value(label) for label in LABELS},
            "use": None if self.use.value == UNKNOWN else self.use.value,
            "sources": {
                label: [source.to_json() for source in pref.sources]
                for label, pref in (*self.preferences.items(), ("use", self.use))
                if pref.sources
            },
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Usage:
        """Inverse of to_json (what a request's meta carries back to its response)."""
        sources = doc.get("sources") or {}

        def pref(label: str, value: str | None) -> Preference:
            if value is None or value == UNKNOWN:
                return _NO_PREFERENCE
            found = tuple(
                Source(*_split_text(s["text"]), line=s["line"]) for s in sources.get(label, ())
            )
            return Preference(value, found)

        given = doc.get("preferences") or {}
        return cls(
            {label: pref(label, given.get(label)) for label in LABELS},
            pref("use", doc.get("use")),
        )


def _split_text(text: str) -> tuple[str, str]:
    name, _, value = text.partition(": ")
    return name, value


# -- statements ------------------------------------------------------------------------


def usage_dictionary(value: bytes) -> dict[str, str]:
    """Labels of a Content-Usage Dictionary that are ``y`` or ``n``; the rest unknown."""
    try:
        parsed = parse_structured(value, tltype="dictionary")
    except ValueError:  # StructuredFieldError: the whole statement says nothing
        return {}
    assert isinstance(parsed, dict)
    found: dict[str, str] = {}
    for label in AIPREF_LABELS:
        member = parsed.get(label)
        # (value, parameters); an inner list is (list, parameters) and is unknown
        item = member[0] if isinstance(member, tuple) else member
        if isinstance(item, Token) and str(item) in (Y, N):
            found[label] = str(item)
    return found


# A source keeps at most this much of its text: it travels in every request's meta.
MAX_SOURCE_TEXT = 512


def _text(value: bytes) -> str:
    if len(value) > MAX_SOURCE_TEXT:
        return value[:MAX_SOURCE_TEXT].decode("utf-8", "replace") + "..."
    return value.decode("utf-8", "replace")


def content_usage_statement(value: bytes, line: int | None = None) -> Statement:
    return Statement(usage_dictionary(value), Source("Content-Usage", _text(value), line))


def content_signal_statement(value: bytes, line: int | None = None) -> Statement:
    """A Content-Signal value: ``key=yes|no`` items (and ``use=``), case-insensitive.

    Content Signals are not defined as a Structured Field, so this reads them the way
    sites write them; a key given twice in one line keeps its most restrictive value.
    """
    prefs: dict[str, str] = {}
    use: str | None = None
    for item in value.split(b","):
        name, _, flag = item.partition(b"=")
        key = name.strip().lower().decode("ascii", "replace")
        flag = flag.strip().lower()
        if key == "use":
            level = flag.decode("ascii", "replace")
            if level in USE_LEVELS:  # the least use wins, as "n" does for labels
                use = level if use is None else min(use, level, key=USE_LEVELS.index)
            continue
        label = SIGNAL_LABELS.get(key)
        verdict = _SIGNAL_VALUES.get(flag)
        if label is not None and verdict is not None and prefs.get(label) != N:
            prefs[label] = verdict
    return Statement(prefs, Source("Content-Signal", _text(value), line), use)


def header_statement(values: Sequence[bytes]) -> Statement | None:
    """The Content-Usage response header (its field lines joined, RFC 9110 §5.3)."""
    if not values:
        return None
    value = b", ".join(values)
    # longer than a robots.txt line may be, it says nothing: parsing it would cost the
    # reactor time a site could grow at will
    if len(value) > MAX_LINE:
        return Statement({}, Source("Content-Usage", f"({len(value)} bytes, too long: ignored)"))
    return content_usage_statement(value)


# -- robots.txt rules ------------------------------------------------------------------


# Path-scoped statements of one kind, longest pattern first (b"" for a rule written
# without a path: it matches every path, after all the others)
_Rules: TypeAlias = tuple[tuple[bytes, Statement], ...]


def _best(rules: _Rules, path: bytes) -> list[Statement]:
    """The statements of the longest matching pattern(s) (draft-ietf-aipref-attach
    §3.1: longest match as for Allow/Disallow; equally long ones all apply)."""
    found: list[Statement] = []
    length = -1
    for pattern, statement in rules:
        if len(pattern) < length:
            break
        if pattern_matches(pattern, path):
            length = len(pattern)
            found.append(statement)
    return found


def _rules(lines: Iterable[Line], name: str) -> _Rules:
    reader = content_usage_statement if name == "content-usage" else content_signal_statement
    rules: list[tuple[bytes, Statement]] = []
    for field_name, raw, line in lines:
        if field_name != name:
            continue
        value = as_bytes(raw)
        m = _PATH_AND_VALUE.fullmatch(value)
        # a rule without a path has a path of 0 octets (draft-ietf-aipref-attach-05
        # §3.1): it applies everywhere, and any written path, "/" too, is longer
        path, preference = (m.group(1), m.group(2)) if m else (b"", value)
        statement = reader(preference, line)
        # the source shows the whole line value, path included
        source = replace(statement.source, value=_text(value))
        rules.append((normalise_pattern(path), replace(statement, source=source)))
    rules.sort(key=lambda rule: -len(rule[0]))
    return tuple(rules)


#: Distinct Usage objects one parsed file keeps for reuse.
MAX_USAGE_MEMO = 256


class UsageIndex:
    """The usage preference lines of a parsed robots.txt, compiled per token on use."""

    __slots__ = ("_compiled", "_lines", "_made")

    def __init__(self, lines: Mapping[str, Sequence[Sequence[Line]]]) -> None:
        self._lines = lines
        # token -> (Content-Usage rules, Content-Signal rules); replaced whole, so
        # threads sharing the index never see half of it
        self._compiled: dict[str, tuple[_Rules, _Rules]] = {}
        # The statements that applied (by identity: they live in _compiled) -> their Usage.
        # Most requests to an origin pick the same ones; bounded, because a file of many
        # equally long wildcard patterns can give a hostile URL set ever new combinations.
        self._made: dict[tuple[int, ...], Usage] = {}

    def _for(self, token: str | None) -> tuple[_Rules, _Rules]:
        key = token or ""
        found = self._compiled.get(key)
        if found is None:
            own = [line for run in self._lines.get(token, ()) for line in run] if token else []
            # Content-Usage is a group rule (RFC 9309 §2.2: rules outside groups are
            # ignored); Content-Signal before any group applies file-wide.
            everyone = [line for run in self._lines.get("", ()) for line in run]
            found = (_rules(own, "content-usage"), _rules(own + everyone, "content-signal"))
            self._compiled = {**self._compiled, key: found}
        return found

    def usage(self, token: str | None, path: bytes) -> Usage:
        usage_rules, signal_rules = self._for(token)
        statements = [*_best(usage_rules, path), *_best(signal_rules, path)]
        key = tuple(map(id, statements))
        usage = self._made.get(key)
        if usage is None:
            usage = Usage.of(statements)
            if len(self._made) < MAX_USAGE_MEMO:
                self._made[key] = usage
        return usage
