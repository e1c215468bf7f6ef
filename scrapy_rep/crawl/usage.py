"""Usage preferences in a crawl: recorded on every response, counted, and (opt-in) obeyed.

Preferences never decide fetching; they say what the crawl may do with content
(docs/usage.md: ``REP_USAGE_MODE``, ``REP_PURPOSES``, ``meta["rep_purposes"]``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import IgnoreRequest
from scrapy.http.headers import Headers

from scrapy_rep.crawl.decide import DECISION_META_KEY
from scrapy_rep.crawl.fetcher import FETCH_META_KEY
from scrapy_rep.crawl.record import NullRecorder
from scrapy_rep.crawl.report import log_usage_refusals
from scrapy_rep.policy.config import SettingError, purposes_from
from scrapy_rep.policy.origin import origin_of_memo
from scrapy_rep.policy.records import RULES
from scrapy_rep.robotstxt._usage import LABELS, UNKNOWN, Usage, header_statement

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from scrapy_rep.crawl.decide import Decider
    from scrapy_rep.crawl.origins import OriginRuntime
    from scrapy_rep.policy.config import Config
    from scrapy_rep.policy.robots_policy import Evaluation

logger = logging.getLogger(__name__)

META_KEY = "rep_usage"  # the preferences that apply (see Usage.to_json), and more
PURPOSES_META_KEY = "rep_purposes"  # overrides REP_PURPOSES for one request
ROBOTS, HEADER = "robots", "header"  # what refused: in stats keys and the summary
COUNT_BATCH = 256  # responses counted between two writes of the usage stats


class UsageKeeper:
    """Records usage preferences on requests and responses; drops refused ones on request."""

    def __init__(
        self, crawler: Crawler, config: Config, decider: Decider, recorder: NullRecorder
    ) -> None:
        self.mode = config.usage_mode
        self.recorder = recorder
        self.purposes = config.purposes
        self.decider = decider
        assert crawler.stats is not None
        self.stats = crawler.stats
        # origin -> {ROBOTS: n, HEADER: n}: requests refused (dropped, or would be)
        self.refusals: dict[str, dict[str, int]] = {}
        self._bad_meta_warned: set[str] = set()
        # (values per label, use= value or None) -> responses not yet in the stats
        self._pending: dict[tuple[tuple[str, ...], str | None], int] = {}
        self._pending_total = 0
        if self.mode == "off":
            return
        crawler.signals.connect(self._on_spider_closed, signal=signals.spider_closed)
        if not self.purposes and self.mode == "record":
            # Nothing declared and nothing to refuse: recording stays quiet.
            return
        logger.info(
            "usage preferences: %s; purposes: %s",
            {
                "record": "recorded (REP_USAGE_MODE = 'record')",
                "audit": "recorded, refusals counted but nothing dropped (audit)",
                "enforce": "refused purposes are dropped (enforce)",
            }[self.mode],
            ", ".join(self.purposes) or "none declared (REP_PURPOSES)",
        )

    def purposes_for(self, request: Request) -> tuple[str, ...]:
        raw = request.meta.get(PURPOSES_META_KEY)
        if raw is None:
            return self.purposes
        try:
            return purposes_from(raw, f"meta[{PURPOSES_META_KEY!r}]")
        except SettingError as exc:
            # A bad per-request value must not lose the request: said once per mistake.
            self.stats.inc_value("rep/usage/bad_purposes_meta")
            if str(exc) not in self._bad_meta_warned:
                self._bad_meta_warned.add(str(exc))
                logger.warning("%s; REP_PURPOSES applies instead", exc)
            return self.purposes

    def on_request(self, request: Request, rt: OriginRuntime, evaluation: Evaluation) -> None:
        """After robots.txt allowed *request*: its robots.txt preferences (IgnoreRequest
        when enforcing one that refuses a declared purpose)."""
        if self.mode == "off":
            return
        usage = None
        if evaluation.ready and evaluation.kind == RULES:
            # the copy decide() just used: a large file is not parsed again at once
            robots = self.decider.parsed(rt, evaluation.body)
            if robots.declares_usage:
                usage = robots.usage(request.url, decided_token(request, self.decider.token_for))
        purposes = self.purposes_for(request)
        if usage is None:  # most files state no preference: nothing to refuse
            request.meta[META_KEY] = unknown_doc(purposes, request.url)
            return
        refused = usage.refused(purposes)
        request.meta[META_KEY] = doc = _doc(usage, purposes, refused, request.url)
        self.recorder.usage(request, usage, purposes)
        if refused and self.mode != "record":
            if self.mode == "enforce":
                self._count(doc)  # its preferences are final: it is never fetched
            self._refuse(request, rt.origin, usage, refused, ROBOTS)

    def on_response(self, request: Request, response: Response) -> Response:
        """Add the ``Content-Usage`` header's preferences (IgnoreRequest when enforcing one
        that refuses a declared purpose)."""
        meta = request.meta
        if self.mode == "off" or FETCH_META_KEY in meta:
            return response
        doc = meta.get(META_KEY)
        if not isinstance(doc, dict) or doc.get("url") != request.url:
            doc = None  # (a redirect copies the meta of the hop before: not this URL's)
        header = header_statement(header_lines(response.headers, _CONTENT_USAGE))
        if header is None and doc is not None:
            # The common case: no header, robots.txt's preferences (in the meta) are final.
            self._count(doc)
            return response
        robots = Usage() if doc is None else Usage.from_json(doc)
        usage = robots if header is None else robots.merged(Usage.of([header]))
        purposes = self.purposes_for(request) if doc is None else tuple(doc["purposes"])
        refused = usage.refused(purposes)
        request.meta[META_KEY] = doc = _doc(usage, purposes, refused, request.url)
        self._count(doc)
        if refused and self.mode != "record" and not robots.refused(purposes):
            origin = origin_of_memo(request.url) or request.url
            self._refuse(request, origin, usage, refused, HEADER)
        return response

    # -- bookkeeping -------------------------------------------------------------------

    # Ten per-label stats per response at about 2 us a call: summed by combination of
    # values, written every COUNT_BATCH responses and when the spider closes.

    def _count(self, doc: dict[str, Any]) -> None:
        """Counts the preferences a ``META_KEY`` doc (``Usage.to_json``) states."""
        given, sources = doc["preferences"], doc["sources"]
        if not sources and given == _UNKNOWN_PREFERENCES:  # most files and pages
            return  # nothing stated: nothing to count
        values = tuple(given.get(label, UNKNOWN) for label in LABELS)
        combination = (values, (doc["use"] or UNKNOWN) if "use" in sources else None)
        if combination == _NOTHING_STATED:
            return
        pending = self._pending
        pending[combination] = pending.get(combination, 0) + 1
        self._pending_total += 1
        if self._pending_total >= COUNT_BATCH:
            self.flush_counts()

    def flush_counts(self) -> None:
        pending, self._pending = self._pending, {}
        self._pending_total = 0
        inc = self.stats.inc_value
        for (values, use), count in pending.items():
            for label, value in zip(LABELS, values, strict=True):
                if value != UNKNOWN:  # counted: what a site declared, not its silence
                    inc(f"rep/usage/{label}/{value}", count)
            if use is not None and use != UNKNOWN:
                inc(f"rep/usage/use/{use}", count)

    def _refuse(
        self, request: Request, origin: str, usage: Usage, refused: list[str], cause: str
    ) -> None:
        counts = self.refusals.setdefault(origin, {ROBOTS: 0, HEADER: 0})
        counts[cause] += 1
        self.recorder.usage_refused(request, usage, refused, cause, self.mode == "enforce")
        why = "; ".join(
            f"{label}=n from {source.describe()}"
            for label in refused
            for source in usage.preferences[label].sources
        )
        if self.mode == "audit":
            self.stats.inc_value(f"rep/usage/audit/would_drop/{cause}")
            logger.debug("Would be dropped, usage refused (audit mode): %s (%s)", request, why)
            return
        self.stats.inc_value(f"rep/usage/dropped/{cause}")
        logger.debug("Dropped, usage refused: %s (%s)", request, why)
        raise IgnoreRequest(f"Usage refused by {cause}: {', '.join(refused)}")

    def _on_spider_closed(self, spider: Spider, reason: str) -> None:
        self.flush_counts()
        log_usage_refusals(self.refusals, audit=self.mode == "audit", stats=self.stats)


_UNKNOWN_PREFERENCES = {label: UNKNOWN for label in LABELS}
# a doc that states nothing (every label unknown, no use=): not counted
_NOTHING_STATED: tuple[tuple[str, ...], str | None] = (tuple(UNKNOWN for _ in LABELS), None)
_CONTENT_USAGE = b"Content-Usage"  # (as Headers.normkey spells it: title case)


def header_lines(headers: Headers, title_cased_name: bytes) -> Sequence[bytes]:
    """``headers.getlist(name)`` without its cost when the header is absent (nearly every
    response): Scrapy's Headers is a dict keyed by the title-cased name, and an absent
    header is the shared empty tuple, not a new list per response."""
    if type(headers) is Headers:
        return dict.get(headers, title_cased_name) or ()
    return headers.getlist(title_cased_name)  # (a subclass: its own lookup)


def decided_token(request: Request, token_for: Callable[[Request], str]) -> str:
    """The product token robots.txt used for ``request``, else ``token_for``'s."""
    decision = request.meta.get(DECISION_META_KEY)
    if isinstance(decision, dict) and decision.get("product_token"):
        return str(decision["product_token"])
    return token_for(request)


def unknown_doc(purposes: tuple[str, ...], url: str) -> dict[str, Any]:
    """``_doc(Usage(), purposes, [], url)``, built without the Usage (per request)."""
    return {
        "preferences": dict(_UNKNOWN_PREFERENCES),
        "use": None,
        "sources": {},
        "purposes": list(purposes),
        "refused": [],
        "url": url,
    }


def _doc(usage: Usage, purposes: tuple[str, ...], refused: list[str], url: str) -> dict[str, Any]:
    return {**usage.to_json(), "purposes": list(purposes), "refused": refused, "url": url}
