"""What the parser did not take as written: a report like Google's robots.txt report.

The parser records (kind, line) pairs as it goes, cheaply, and the texts are looked
up once at the end; only the first MAX_ISSUES are kept in full (a hostile file can
hold hundreds of thousands of junk lines), but every one is counted.
"""

from __future__ import annotations

from array import array
from collections import Counter
from dataclasses import dataclass
from operator import itemgetter
from typing import TypeAlias

# kind -> what it means (kept in this order in reports)
ISSUE_KINDS: dict[str, str] = {
    "size-limit": "the file is longer than the size limit: parsing stopped at this byte offset",
    "line-too-long": "the line is longer than 16,663 bytes: the rest of it was ignored",
    "rule-outside-group": "a rule before the first user-agent line: ignored (RFC 9309 §2.2.2)",
    "signal-for-everyone": (
        "a Content-Signal line before the first user-agent line: applied to every crawler"
    ),
    "unknown-field": "a field this parser does not know: ignored",
    "not-a-field": "neither a field, a comment nor a blank line: ignored",
    "markup": "the file looks like a web page: lines that cannot hold a field were skipped",
    "empty-value": "a field without a value: ignored",
    "invalid-value": "a value that is not valid for its field: ignored",
    "typo": "a misspelt field name, accepted as Google's library accepts it",
    "missing-colon": "a field without its colon, accepted as Google's library accepts it",
}
_NAMES = tuple(ISSUE_KINDS)
(
    SIZE_LIMIT,
    LINE_TOO_LONG,
    RULE_OUTSIDE_GROUP,
    SIGNAL_FOR_EVERYONE,
    UNKNOWN_FIELD,
    NOT_A_FIELD,
    MARKUP,
    EMPTY_VALUE,
    INVALID_VALUE,
    TYPO,
    MISSING_COLON,
) = range(len(ISSUE_KINDS))

MAX_ISSUES = 1000  # issues kept in full; all are counted
MAX_TEXT = 200  # characters of a line kept in an issue


@dataclass(frozen=True, slots=True)
class Issue:
    """One line (or the file, line 0) not taken as written."""

    line: int  # 1-based line number; for "size-limit", the line the limit cut
    kind: str  # a key of ISSUE_KINDS
    text: str  # the line as written (cut to MAX_TEXT characters, "…" marks a cut)
    offset: int | None = None  # byte offset in the file, for "size-limit"

    @property
    def message(self) -> str:
        return ISSUE_KINDS[self.kind]

    def as_dict(self) -> dict[str, object]:
        found: dict[str, object] = {"line": self.line, "kind": self.kind, "text": self.text}
        if self.offset is not None:
            found["offset"] = self.offset
        return found


def _text(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace").strip()
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…"


# issues as parsed, texts still raw and compact (a file is kept for as long as its
# origin is crawled, and most never have their issues read): line * 16 + code of the
# first MAX_ISSUES, their raw lines joined by "\n" (lines hold no "\n"), and the size
# limit's (line, offset, partial line); Issue objects are made on demand
Pending: TypeAlias = tuple["array[int]", bytes, "tuple[int, int, bytes] | None"]
_RAW_KEPT = MAX_TEXT + 56  # octets of a line kept for its text


class IssueLog:
    """Issues as the parser records them: codes and line numbers, texts at the end."""

    __slots__ = ("found", "limit")

    def __init__(self) -> None:
        self.found: list[tuple[int, int]] = []  # (line, code) in the order seen
        self.limit: tuple[int, int, bytes] | None = None  # (line, offset, partial line)

    def finish(self, lines: list[bytes]) -> tuple[Pending, dict[str, int] | None]:
        """The issues to keep (see Pending) and, when not all of them are kept, the
        count of each kind (else None: count_issues() counts the kept ones when asked,
        as most parsed files never are)."""
        found = self.found
        counts = None
        if len(found) > MAX_ISSUES:
            counts = _counts(Counter(map(itemgetter(1), found)), self.limit)
        found.sort()
        kept = found[:MAX_ISSUES]
        n = len(lines)
        # (a slice at least as long as the line is the line itself: no copy)
        raws = b"\n".join(
            [lines[line - 1][:_RAW_KEPT] if 0 < line <= n else b"" for line, _ in kept]
        )
        marks = array("q", [line * 16 + code for line, code in kept])
        return (marks, raws, self.limit), counts


def _counts(by_code: Counter[int], limit: object) -> dict[str, int]:
    counts = {kind: by_code[code] for code, kind in enumerate(_NAMES) if by_code[code]}
    return {"size-limit": 1, **counts} if limit is not None else counts


def count_issues(pending: Pending) -> dict[str, int]:
    """The count of each kind of issue (in ISSUE_KINDS order) of a file all of whose
    issues were kept (see IssueLog.finish)."""
    marks, _, limit = pending
    return _counts(Counter(mark & 15 for mark in marks), limit)


def materialise(pending: Pending) -> tuple[Issue, ...]:
    marks, raws, limit = pending
    texts = raws.split(b"\n") if marks else []
    issues = [
        Issue(mark >> 4, _NAMES[mark & 15], _text(raw))
        for mark, raw in zip(marks, texts, strict=True)
    ]
    if limit is not None:
        line, offset, partial = limit
        issues.append(Issue(line, "size-limit", _text(partial), offset))
    return tuple(issues)
