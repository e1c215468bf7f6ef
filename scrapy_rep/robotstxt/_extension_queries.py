"""The questions a parsed robots.txt answers besides allowed(): its extension fields
(Crawl-delay, Request-rate, Content-Signal, Content-Usage and the raw lines of any
other, see _extensions) for the group a crawler obeys, and usage preferences."""

from __future__ import annotations

from typing import TypeAlias

from scrapy_rep.robotstxt._extensions import SIGNAL_KEYS, ExtensionLine, Extensions
from scrapy_rep.robotstxt._urls import as_text as _text
from scrapy_rep.robotstxt._urls import plain_path
from scrapy_rep.robotstxt._usage import Usage, UsageIndex

__all__ = ["ExtensionQueries"]

_Text: TypeAlias = str | bytes | bytearray | memoryview


class ExtensionQueries:
    """RobotsTxt's extension queries (a mixin: RobotsTxt holds the state)."""

    __slots__ = ("_usage",)

    # token -> its extension values; the preamble's (lines before any user-agent
    # line); the raw lines of each (see _extensions); the usage index, built on use
    _extensions: dict[str, Extensions] | None
    _preamble_summary: Extensions | None
    _extension_lines: dict[str, list[list[ExtensionLine]]] | None
    _preamble: list[ExtensionLine] | None
    _usage: UsageIndex | None

    def _token(self, user_agent: _Text) -> str | None:
        raise NotImplementedError

    def allowed(self, url: _Text, user_agent: _Text) -> bool:
        raise NotImplementedError

    def _values(self, user_agent: _Text) -> Extensions | None:
        token = self._token(user_agent)
        if token is None or self._extensions is None:
            return None
        return self._extensions.get(token)

    def crawl_delay(self, user_agent: _Text) -> float | None:
        """Crawl-delay of the obeyed group in seconds, if it gives a valid one."""
        found = self._values(user_agent)
        return None if found is None else found.delay

    def request_rate(self, user_agent: _Text) -> tuple[int, float] | None:
        """Request-rate of the obeyed group as (requests, seconds)."""
        found = self._values(user_agent)
        return None if found is None else found.rate

    def content_signals(self, user_agent: _Text) -> dict[str, bool]:
        """Content-Signal values (``search``, ``ai-input``, ``ai-train``) that apply.

        Signals in the obeyed group win; signals given before any user-agent line
        apply to every crawler as a file-wide default.
        """
        own = self._values(user_agent)
        found = dict(own.signals) if own is not None else {}
        if self._preamble_summary is not None:
            for key, value in self._preamble_summary.signals.items():
                found.setdefault(key, value)
        return {key: found[key] for key in SIGNAL_KEYS if key in found}

    def extension_lines(self, user_agent: _Text | None, field: str) -> list[ExtensionLine]:
        """The *field* lines (a key of _extensions.EXTENSION_FIELDS) of the group
        *user_agent* obeys, in file order (merged same-name groups included); with
        None, those before the first user-agent line."""
        if user_agent is None:
            lines = self._preamble or []
            return [e for e in lines if e.field == field]
        token = self._token(user_agent)
        if token is None or self._extension_lines is None:
            return []
        runs = self._extension_lines.get(token, [])
        return [e for lines in runs for e in lines if e.field == field]

    @property
    def declares_usage(self) -> bool:
        """False when no line of the file can state a usage preference, so ``usage()``
        is all unknown for every URL (a crawl then skips asking, per request)."""
        return not (self._extension_lines is None and self._preamble is None)

    def usage(self, url: _Text, user_agent: _Text) -> Usage:
        """Usage preferences (Content-Usage, Content-Signal) of *url*; see _usage.

        None apply to a URL the crawler may not fetch (draft-ietf-aipref-attach §3.1).
        """
        if (self._extension_lines is None and self._preamble is None) or not self.allowed(
            url, user_agent
        ):
            return Usage()
        index = self._usage
        if index is None:
            lines = dict(self._extension_lines or {})
            lines[""] = [self._preamble or []]
            index = self._usage = UsageIndex(lines)
        return index.usage(self._token(user_agent), plain_path(_text(url)))
