"""Page-level directives: the robots meta tag, ``X-Robots-Tag`` and ``rel`` link values.

robots.txt decides what is *fetched*; these decide what a fetched page's links and
content may be used for, as Google's "Robots meta tag, data-nosnippet, and X-Robots-Tag
specifications" and the HTML ``rel`` keywords say (the rules in full: docs/page.md).
What applies is a union, so the more restrictive directive always wins.

Pure and bounded: bytes in, no Scrapy import. Cheap by default: no tag is parsed
unless a byte search of the head finds ``<meta`` and ``robots`` or the token, and the
link scan (``NofollowLinks``) runs only when asked, in steps of bounded size.
"""

from __future__ import annotations

import datetime as dt
import html
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit, urlunsplit

from scrapy_rep.robotstxt._normalise import as_text as _text

HEADER, META = "header", "meta"
# Only the first 2 MiB of a page are searched for its head: a head is a few KiB, and a
# hostile one (10,000 meta tags) is well inside; lower-casing 2 MiB costs about 2 ms.
HEAD_LIMIT = 2 * 2**20
# The link scan's step: a few ms of work on a busy core (a reactor turn stays short).
LINK_STEP_BYTES = 32 * 1024
# The quick check's step (lower-case and search): about 1 ms a MiB.
SEARCH_STEP_BYTES = 1024 * 1024
MAX_TEXT = 200  # characters of a header line or a meta tag kept as a source's text
MAX_NAMES = 64  # distinct directive names kept per page (the rest are reported)
MAX_SOURCES = 8  # sources kept per directive (all agree: one is enough to say why)
MAX_META_TAGS = 100  # robots/token meta tags read per page (the rest are reported)
MAX_NAME = 64  # a longer "directive" is noise, not a directive
MAX_ISSUES = 20
# Directives read per header line or meta tag: real ones hold a handful; a hostile
# 16 KiB line of thousands costs bounded time this way.
MAX_ITEMS = 100

# Directives that carry a value after a colon: ``name: value`` with one of these names is
# a directive, any other ``name: ...`` in a header line names a product token.
VALUED = frozenset({"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"})
NOINDEX, NOFOLLOW, NONE = "noindex", "nofollow", "none"
UNAVAILABLE_AFTER = "unavailable_after"
_NAME = re.compile(r"[a-z0-9_-]+")
_WEEKDAY = re.compile(r"[A-Za-z]+")
_META_OR_SKIP = re.compile(rb"<!--|<script\b|<style\b|<meta[\s/>]")
_SKIP_END = {b"<!--": b"-->", b"<script": b"</script", b"<style": b"</style"}
_ATTRIBUTE = re.compile(
    rb"""([^\s"'<>/=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+)))?""", re.DOTALL
)
_TAG_NAME_END = re.compile(rb"[ \t\n\r\f/]")
_HEAD_ENDS = (b"</head", b"<body", b"</HEAD", b"<BODY")
_LINK = re.compile(rb"<(?:a|area)[\s/][^>]*>")
_HREF = re.compile(rb"""[\s/]href\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class PageSource:
    """Where a directive came from: one header line or one meta tag, as written."""

    where: str  # HEADER or META
    text: str  # the field value or the tag, cut to MAX_TEXT characters
    scope: str  # "" (a token-less header line), "robots", or the product token as written

    def describe(self) -> str:
        return f"X-Robots-Tag: {self.text}" if self.where == HEADER else f"meta tag {self.text}"

    def to_json(self) -> dict[str, Any]:
        return {"from": self.where, "scope": self.scope or "*", "text": self.text}


@dataclass(frozen=True, slots=True)
class PageDirectives:
    """The directives that apply to one crawler on one page, each with its sources."""

    # directive name (lower case) -> the sources that gave it (at most MAX_SOURCES)
    directives: dict[str, tuple[PageSource, ...]] = field(default_factory=dict)
    # valued directives: name -> the last value given (``max-snippet`` -> ``"20"``)
    values: dict[str, str] = field(default_factory=dict)
    # the earliest ``unavailable_after`` date that parsed, as UTC
    unavailable_after: dt.datetime | None = None
    expired: bool = False  # unavailable_after is in the past: noindex
    ignored: tuple[PageSource, ...] = ()  # lines and tags for other crawlers (a few)
    issues: tuple[str, ...] = ()  # bad dates, limits reached

    @property
    def noindex(self) -> bool:
        return NOINDEX in self.directives or NONE in self.directives or self.expired

    @property
    def nofollow(self) -> bool:
        return NOFOLLOW in self.directives or NONE in self.directives

    def effective(self) -> tuple[str, ...]:
        """The directives as recorded and counted: ``none`` also counts as ``noindex``
        and ``nofollow``, a past ``unavailable_after`` as ``noindex``."""
        names = set(self.directives)
        if self.noindex:
            names.add(NOINDEX)
        if self.nofollow:
            names.add(NOFOLLOW)
        return tuple(sorted(names))

    def why(self, name: str) -> str:
        """The sources of ``noindex`` or ``nofollow`` (derived ones too), for a log line."""
        sources = list(self.directives.get(name, ())) + list(self.directives.get(NONE, ()))
        if name == NOINDEX and self.expired:
            sources += self.directives.get(UNAVAILABLE_AFTER, ())
        return "; ".join(dict.fromkeys(s.describe() for s in sources))

    def to_json(self) -> dict[str, Any]:
        return {
            "directives": list(self.effective()),
            "noindex": self.noindex,
            "nofollow": self.nofollow,
            "sources": {
                name: [s.to_json() for s in sources]
                for name, sources in sorted(self.directives.items())
            },
            "values": dict(self.values),
            "unavailable_after": (
                None if self.unavailable_after is None else self.unavailable_after.isoformat()
            ),
            "ignored": [s.to_json() for s in self.ignored],
            "issues": list(self.issues),
        }


# -- dates -----------------------------------------------------------------------------


def parse_unavailable_after(text: str) -> dt.datetime | None:
    """The ``unavailable_after`` date as an aware UTC datetime, or None.

    Google accepts "all widely adopted formats, including RFC 822, RFC 850 and ISO 8601".
    A date without a zone is read as UTC.
    """
    text = text.strip()
    if not text:
        return None
    iso = text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text
    try:  # (Python 3.10's fromisoformat takes no "Z")
        when = dt.datetime.fromisoformat(iso)
    except ValueError:
        try:  # RFC 822 (and 1123, 2822), and RFC 850 after its weekday
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    try:
        return when.astimezone(dt.timezone.utc)
    except (OverflowError, ValueError):
        return None


# -- directive lists -------------------------------------------------------------------


def _items(value: str) -> Iterator[str]:
    """The comma-separated items of *value*; an ``unavailable_after`` whose value is only
    a weekday (``Wednesday, 25-Jun-10 ...``) takes the next item as the rest of its date."""
    pieces = value.split(",")
    i = 0
    while i < len(pieces):
        item = pieces[i]
        i += 1
        name, colon, rest = item.partition(":")
        if colon and name.strip().lower() != UNAVAILABLE_AFTER:
            # "token: unavailable_after: Wed, ...": the date follows a second colon
            inner, colon, rest = rest.partition(":")
            if inner.strip().lower() != UNAVAILABLE_AFTER:
                colon = ""
        if colon and _WEEKDAY.fullmatch(rest.strip()) and i < len(pieces):
            item = f"{item},{pieces[i]}"
            i += 1
        yield item


def _split_directives(value: str, *, tokens: bool) -> Iterator[tuple[str | None, str, str | None]]:
    """(product token or None, directive name, its value or None) per item of *value*.

    With *tokens* (a header line), ``name: rest`` where *name* is not a valued directive
    names the crawler that this and the following items are for (Google's
    ``X-Robots-Tag: otherbot: noindex``)."""
    scope: str | None = None
    for raw in _items(value):
        item = raw.strip()
        if not item:
            continue
        name, colon, rest = item.partition(":")
        lowered = name.strip().lower()
        if tokens and colon and lowered not in VALUED:
            scope = name.strip()
            item = rest.strip()
            if not item:
                continue
            name, colon, rest = item.partition(":")
            lowered = name.strip().lower()
        yield scope, lowered, rest.strip() if colon else None


class _Collector:
    """Gathers directives for one crawler from headers and meta tags (bounded)."""

    def __init__(self, token: str, now: dt.datetime) -> None:
        self.token = token.strip().lower()
        self.now = now
        self.directives: dict[str, list[PageSource]] = {}
        self.values: dict[str, str] = {}
        self.unavailable_after: dt.datetime | None = None
        self.ignored: list[PageSource] = []
        self.issues: list[str] = []

    def issue(self, text: str) -> None:
        if len(self.issues) < MAX_ISSUES and text not in self.issues:
            self.issues.append(text)

    def add_items(self, value: str, where: str, text: str, scope: str = "") -> None:
        """The directives of one header line or meta tag, shown as *text*."""
        header = where == HEADER
        sources: dict[str | None, PageSource] = {}  # one per product token in the line
        for count, (token, name, argument) in enumerate(_split_directives(value, tokens=header)):
            if count >= MAX_ITEMS:
                kind = "line" if header else "tag"
                self.issue(f"more than {MAX_ITEMS} directives in one {kind}: the rest ignored")
                return
            source = sources.get(token)
            if source is None:
                source = sources[token] = PageSource(where, text, token or scope)
            if token is not None and token.lower() not in ("robots", self.token):
                if len(self.ignored) < MAX_SOURCES and source not in self.ignored:
                    self.ignored.append(source)
                continue
            self.add(name, argument, source)

    def add(self, name: str, argument: str | None, source: PageSource) -> None:
        if len(name) > MAX_NAME or not _NAME.fullmatch(name):
            self.issue(f"not a directive: {name[:MAX_NAME]!r} in {source.describe()}")
            return
        if name == UNAVAILABLE_AFTER:
            when = parse_unavailable_after(argument or "")
            if when is None:
                self.issue(f"unavailable_after: unparseable date {argument!r}, ignored")
                return
            if self.unavailable_after is None or when < self.unavailable_after:
                self.unavailable_after = when
        sources = self.directives.get(name)
        if sources is None:
            if len(self.directives) >= MAX_NAMES:
                self.issue(f"more than {MAX_NAMES} directive names: the rest are ignored")
                return
            sources = self.directives[name] = []
        if len(sources) < MAX_SOURCES and source not in sources:
            sources.append(source)
        if argument is not None and name in VALUED:
            self.values[name] = argument[:MAX_TEXT]

    def result(self) -> PageDirectives:
        expired = self.unavailable_after is not None and self.unavailable_after <= self.now
        return PageDirectives(
            directives={name: tuple(sources) for name, sources in self.directives.items()},
            values=self.values,
            unavailable_after=self.unavailable_after,
            expired=expired,
            ignored=tuple(self.ignored),
            issues=tuple(self.issues),
        )


# -- the head's meta tags --------------------------------------------------------------


def _head(body: bytes) -> bytes:
    """The head of *body*, lower-cased: up to ``</head`` or ``<body`` (the first
    ``HEAD_LIMIT`` bytes at most). Lower-casing keeps every byte offset."""
    limit = min(len(body), HEAD_LIMIT)
    # The end of the head as most pages spell it, found in the bytes as they are, so
    # that only the head is lower-cased (not a whole 100 KB page, on every page).
    end = limit
    for marker in _HEAD_ENDS:
        at = body.find(marker, 0, end)
        if at >= 0:
            end = at
    if end < limit:
        return body[:end].lower()
    prefix = body[:limit].lower()  # (no end in either case: look in any case)
    for marker in (b"</head", b"<body"):
        at = prefix.find(marker, 0, end)
        if at >= 0:
            end = at
    return prefix[:end]


def _attributes(tag: bytes) -> dict[bytes, bytes]:
    """The attributes of one tag (its bytes from ``<`` to ``>``), names lower-cased;
    the first of a repeated attribute wins, as in HTML."""
    found: dict[bytes, bytes] = {}
    inner = tag[1:-1]
    name_end = _TAG_NAME_END.search(inner)  # (skip the tag's own name)
    if name_end is None:
        return found
    for match in _ATTRIBUTE.finditer(inner, name_end.start()):
        name = match.group(1).lower()
        if name not in found:
            found[name] = _quoted_value(match, 2)
    return found


def _quoted_value(match: re.Match[bytes], first: int) -> bytes:
    """An attribute's value from groups *first* ("..."), *first* + 1 ('...') and
    *first* + 2 (unquoted) of *match*: the one that matched, or b"" for none."""
    for group in (first, first + 1):
        value = match.group(group)
        if value is not None:
            return value
    return match.group(first + 2) or b""


def head_may_name(body: bytes, token: str) -> bool:
    """The byte search: whether *body*'s head has ``<meta`` and says ``robots`` or
    *token*. False for nearly every page, and then no tag is parsed at all."""
    return _head_may_name(_head(body), token.strip().lower().encode("utf-8", "replace"))


def _head_may_name(head: bytes, token: bytes) -> bool:
    if b"<meta" not in head:
        return False
    return b"robots" in head or bool(token and token in head)


def _meta_tags(body: bytes, token: bytes) -> Iterator[tuple[str, str]]:
    """(name, content) of the meta tags in *body*'s head that name ``robots`` or
    *token* (lower-cased), their values decoded."""
    head = _head(body)
    if not _head_may_name(head, token):
        return  # the common case: no meta tag can name us
    wanted = {b"robots", token}
    pos = 0
    search = _META_OR_SKIP.search
    while True:
        match = search(head, pos)
        if match is None:
            return
        opener = match.group()
        if opener in _SKIP_END:  # a comment, script or style: its text holds no tags
            end = head.find(_SKIP_END[opener], match.end())
            if end < 0:
                return
            pos = end + len(_SKIP_END[opener])
            continue
        end = head.find(b">", match.end() - 1)
        if end < 0:
            return
        pos = end + 1
        lowered = head[match.start() : pos]
        if b"robots" not in lowered and (not token or token not in lowered):
            continue
        attributes = _attributes(body[match.start() : pos])
        name = html.unescape(_text(attributes.get(b"name", b""))).strip()
        if name.lower().encode("utf-8", "replace") in wanted:
            yield name, html.unescape(_text(attributes.get(b"content", b"")))


# -- everything ------------------------------------------------------------------------


def page_directives(
    header_lines: Iterable[bytes | str],
    body: bytes | None,
    token: str,
    *,
    now: dt.datetime | None = None,
    meta_tags: Iterable[tuple[str, str]] | None = None,
) -> PageDirectives:
    """The directives for crawler *token*: the ``X-Robots-Tag`` *header_lines* and, when
    *body* is given (an HTML page), its head's robots meta tags, combined.

    *meta_tags* (name, content) pairs, when given, are the head's meta tags as an HTML
    parser already found them (the spider's own selector): *body* is then not read.
    At most ``MAX_META_TAGS`` of them that name ``robots`` or the token are read."""
    collector = _Collector(token, now or dt.datetime.now(dt.timezone.utc))
    for line in header_lines:
        value = _text(line)
        collector.add_items(value, HEADER, value.strip()[:MAX_TEXT])
    if meta_tags is None:
        meta_tags = _meta_tags(body, collector.token.encode("utf-8", "replace")) if body else ()
    read = 0
    for name, content in meta_tags:
        name = name.strip()
        scope = name.lower()
        if scope not in ("robots", collector.token):
            continue
        read += 1
        if read > MAX_META_TAGS:
            collector.issue(f"more than {MAX_META_TAGS} robots meta tags: the rest are ignored")
            break
        tag = f'<meta name="{name}" content="{content.strip()}">'[:MAX_TEXT]
        collector.add_items(content, META, tag, "robots" if scope == "robots" else name)
    return collector.result()


# -- rel="nofollow" links --------------------------------------------------------------


class NofollowLinks:
    """The ``rel`` values of a page's ``<a>`` and ``<area>`` links: which URLs the page
    links *only* with ``rel="nofollow"`` (a URL also linked without it is followed).

    ``scan_step`` reads at most about ``LINK_STEP_BYTES`` of the page per call, so a
    caller that runs on an event loop can give it back between steps; ``scan`` runs to
    the end. Linear in the page's size: a page that never says ``nofollow`` is not
    scanned at all; a link without ``rel`` costs one regex search for its ``href``, kept
    as written (resolving 100,000 hrefs would cost half a second), and only the links
    with ``rel`` are parsed and resolved against the page's URL.
    """

    def __init__(
        self, body: bytes, base_url: str, normalise: Callable[[str], str] | None = None
    ) -> None:
        self.body = body
        self.base_url = base_url
        # how the caller spells URLs (a crawler escapes them): applied to both sides
        self.normalise = normalise
        # First the quick check, a step at a time: a page that never says "nofollow"
        # (in any case) has no link to scan. ``searched`` is how far it has looked.
        self.searched = 0
        self.found_nofollow = False
        self.pos = 0  # how far the link scan has read
        # absolute URL (no fragment) -> the hrefs, as written, that link it with nofollow
        self.nofollow: dict[str, set[bytes]] = {}
        self.followed_hrefs: set[bytes] = set()  # hrefs as written, of links without it
        self.rel_counts: dict[str, int] = {}  # nofollow, ugc, sponsored -> links

    @property
    def done(self) -> bool:
        return self.pos >= len(self.body)

    def scan(self) -> NofollowLinks:
        while not self.scan_step():
            pass
        return self

    def scan_step(self, max_bytes: int = LINK_STEP_BYTES) -> bool:
        """Do the next bounded piece of work; True when the whole page has been read."""
        body = self.body
        if self.done:
            return True
        if not self.found_nofollow:
            # (a window overlaps the one before by 7 bytes: a "nofollow" across the cut)
            begin = max(0, self.searched - 7)
            self.searched = min(len(body), self.searched + SEARCH_STEP_BYTES)
            if b"nofollow" in body[begin : self.searched].lower():
                self.found_nofollow = True
            elif self.searched >= len(body):
                self.pos = len(body)  # nothing says nofollow: nothing to scan
            return self.done
        start = self.pos
        stop = min(len(body), start + max_bytes)
        if stop < len(body):
            # End the window just after a ">" so that no tag is cut in two.
            cut = body.rfind(b">", start, stop)
            if cut < 0:
                return self._no_tag_end(start, stop)
            stop = cut + 1
        window = body[start:stop].lower()
        followed, href_of = self.followed_hrefs, _HREF.search
        for match in _LINK.finditer(window):
            begin, end = match.span()
            if b"rel" in match.group():
                self._rel_link(body[start + begin : start + end])
                continue
            found = href_of(body, start + begin, start + end)
            if found is not None:
                # (kept without its fragment: a link to /a#x is a link to /a)
                followed.add(_quoted_value(found, 1).partition(b"#")[0].strip())
        self.pos = stop
        return self.done

    def _no_tag_end(self, start: int, stop: int) -> bool:
        """A window in which no tag ends (10 MB of text, or one enormous tag): skip to
        the last "<" in it, where a tag may start, so no step reads more than about
        ``max_bytes``; a window that starts a tag longer than that is that one tag."""
        body = self.body
        opener = body.rfind(b"<", start + 1, stop)
        if opener > 0:
            self.pos = opener
            return False
        if body[start : start + 1] != b"<":
            self.pos = stop
            return False
        end = body.find(b">", stop)  # (memchr: fast even over megabytes)
        end = len(body) - 1 if end < 0 else end
        if _LINK.match(body[start : start + 6].lower() + b">"):
            self._rel_link(body[start : end + 1])
        self.pos = end + 1
        return self.done

    def _rel_link(self, tag: bytes) -> None:
        attributes = _attributes(tag)
        href = attributes.get(b"href")
        if href is None:
            return
        rels = set(_text(attributes.get(b"rel", b"")).lower().split())
        for rel in ("nofollow", "ugc", "sponsored"):
            if rel in rels:
                self.rel_counts[rel] = self.rel_counts.get(rel, 0) + 1
        href = href.strip()
        if "nofollow" not in rels:
            self.followed_hrefs.add(href.partition(b"#")[0])
            return
        url = self._url_key(urljoin(self.base_url, html.unescape(_text(href)).strip()))
        self.nofollow.setdefault(url, set()).add(href.partition(b"#")[0])

    def _url_key(self, url: str) -> str:
        """*url* without its fragment, spelt as the caller spells URLs."""
        url = urldefrag(url).url
        return url if self.normalise is None else self.normalise(url)

    def nofollow_only(self, url: str) -> bool:
        """Whether the page links *url* (absolute) only with ``rel="nofollow"``; the scan
        must be done. A followed link to the same URL counts when it is written as one
        of the nofollow links writes it, as the absolute URL, or as its path."""
        url = self._url_key(url)
        hrefs = self.nofollow.get(url)
        followed = self.followed_hrefs
        if hrefs is None or not followed.isdisjoint(hrefs):
            return False
        parts = urlsplit(url)
        forms = {url, urlunsplit(("", "", parts.path, parts.query, ""))}
        forms.add(urlunsplit(("", parts.netloc, parts.path, parts.query, "")))
        for form in forms:
            raw = form.encode("utf-8", "replace")
            if raw in followed or html.escape(form, quote=False).encode() in followed:
                return False
        return True
