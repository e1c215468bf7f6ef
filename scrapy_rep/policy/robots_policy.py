"""The robots.txt state machine: pure, with time passed in, no Scrapy and no I/O.

``evaluate(record, now)``: may requests of this origin be decided now, by what copy, and
is a (re)fetch due? ``after_fetch(record, outcome, now)``: the new record after a fetch.

RFC 9309 section 2.3.1 and Google's rules (docs/behaviour.md): 2xx gives rules; 4xx other
than 429 allows all; 429, 5xx and network failures make the origin unreachable, its
requests waiting while robots.txt is retried with backoff; after ``unreachable_wait`` the
last good copy applies if younger than ``stale_max_age``, else ``unreachable_fallback``.
A good copy applies only while fresh (Google caches robots.txt "up to 24 hours"); its
refetch starts ahead, in its last tenth of lifetime, so a steady crawl never waits.
"""

from __future__ import annotations

import email.utils
import re
from collections.abc import Mapping
from dataclasses import dataclass

from scrapy_rep.policy.config import Config
from scrapy_rep.policy.records import ALLOW_ALL, RULES, UNREACHABLE, OriginRecord

DISALLOW_ALL = "disallow-all"

# Where the copy that decides comes from, for logs, meta and the summary.
FRESH = "fresh"  # a good copy within its TTL
EXPIRED = "expired"  # a good copy past its TTL: audit mode records by it while it is refetched
STALE = "stale"  # the last good copy, used after the unreachable wait
FALLBACK = "fallback"  # unreachable for too long with no usable copy

# Retry-After, clamped: a hostile header can neither hammer the site nor park the crawl.
RETRY_AFTER_MIN = 1.0
RETRY_AFTER_MAX = 900.0

# Refresh ahead (docs/behaviour.md, "Caching"): a tenth leaves a 60 s copy 6 s to be
# refetched; the cap keeps a 24 h copy in use for all but its last 5 minutes.
REFRESH_AHEAD_SHARE = 0.1
REFRESH_AHEAD_MAX = 300.0

_MAX_AGE = re.compile(r"(?:^|[,\s])max-age\s*=\s*\"?(\d{1,12})\"?", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class FetchOutcome:
    """How one robots.txt fetch ended, already classified."""

    kind: str  # RULES, ALLOW_ALL or UNREACHABLE
    detail: str  # e.g. "200", "404", "503", "DNSLookupError", "too many redirects"
    body: bytes = b""
    status: int | None = None
    max_age: float | None = None  # from Cache-Control
    retry_after: float | None = None  # from Retry-After, in seconds from now
    truncated: bool = False  # the body was cut at the size limit
    final_url: str | None = None  # where the redirects ended


@dataclass(frozen=True, slots=True)
class Evaluation:
    """What to do with requests of one origin right now."""

    ready: bool  # requests can be decided now
    kind: str | None = None  # RULES, ALLOW_ALL or DISALLOW_ALL when ready
    body: bytes = b""
    source: str = ""  # FRESH, EXPIRED, STALE or FALLBACK when ready
    fetch_due: bool = False  # a (re)fetch should start now (a fresh copy: a refresh ahead)
    wake_at: float | None = None  # when not ready: when to look again


def refresh_ahead_at(record: OriginRecord) -> float:
    """When a request starts the refetch of ``record``'s good copy (at expiry for a
    record without a fetch time)."""
    fetched_at = record.fetched_at if record.fetched_at is not None else record.expires_at
    lifetime = max(record.expires_at - fetched_at, 0.0)
    return record.expires_at - min(lifetime * REFRESH_AHEAD_SHARE, REFRESH_AHEAD_MAX)


def _by_copy(record: OriginRecord, source: str, *, fetch_due: bool) -> Evaluation:
    """Requests decided now by ``record``'s copy (``source``: where it comes from)."""
    return Evaluation(True, record.kind, record.body, source, fetch_due)


def parse_max_age(cache_control: str | None) -> float | None:
    match = _MAX_AGE.search(cache_control or "")
    return float(match.group(1)) if match else None


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait, from delta-seconds or an HTTP-date (RFC 9110 section 10.2.3)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now)


def classify_status(
    status: int, headers: Mapping[str, str], body: bytes, now: float, *, truncated: bool = False
) -> FetchOutcome:
    """Classify a final (non-redirect) robots.txt response (RFC 9309 §2.3.1)."""
    max_age = parse_max_age(headers.get("cache-control"))
    detail = str(status)
    if 200 <= status < 300:
        return FetchOutcome(RULES, detail, body, status, max_age, truncated=truncated)
    if status == 429 or status >= 500 or status < 200:
        # 429 and 5xx: Google treats the site as unreachable and stops crawling it
        # (RFC 9309 2.3.1.4 "MUST assume complete disallow"); 1xx/unknown are not answers.
        retry_after = parse_retry_after(headers.get("retry-after"), now)
        return FetchOutcome(UNREACHABLE, detail, b"", status, None, retry_after)
    # 3xx that could not be followed, and 4xx: RFC 9309 2.3.1.3 "MAY access any resources".
    return FetchOutcome(ALLOW_ALL, detail, b"", status, max_age)


class RobotsPolicy:
    """Decides per-origin state from records; knows every timing rule, nothing else."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def ttl(self, max_age: float | None) -> float:
        """Freshness of a good copy: a ``max-age`` clamped to [min, max], else the default."""
        if max_age is None:
            return self.config.cache_ttl
        return min(max(max_age, self.config.min_ttl), self.config.max_ttl)

    def backoff(self, failures: int, retry_after: float | None) -> float:
        """Delay before the next fetch after ``failures`` consecutive unreachable outcomes."""
        if retry_after is not None:
            return min(max(retry_after, RETRY_AFTER_MIN), RETRY_AFTER_MAX)
        exponent = min(max(failures - 1, 0), 32)  # cap the exponent; the max caps the value
        return min(self.config.retry_backoff * (2.0**exponent), self.config.max_retry_backoff)

    def evaluate(self, record: OriginRecord | None, now: float) -> Evaluation:
        if record is None or (record.kind is None and not record.unreachable):
            return Evaluation(ready=False, fetch_due=True)  # (a record not by after_fetch)
        if not record.unreachable:
            if now < record.expires_at:
                return _by_copy(record, FRESH, fetch_due=now >= refresh_ahead_at(record))
            if self.config.enforce:
                # Never decided by an expired copy: undecided until the refetch answers.
                return Evaluation(ready=False, fetch_due=True)
            # Audit mode waits only for an origin's first answer (docs/behaviour.md,
            # "Audit mode"): it records by the expired copy while that is refetched.
            return _by_copy(record, EXPIRED, fetch_due=True)
        assert record.unreachable_since is not None
        retry_at = record.next_retry_at if record.next_retry_at is not None else now
        fetch_due = now >= retry_at
        give_up_at = record.unreachable_since + self.config.unreachable_wait
        if now < give_up_at:
            return Evaluation(ready=False, fetch_due=fetch_due, wake_at=min(retry_at, give_up_at))
        if (
            record.kind is not None
            and record.fetched_at is not None
            and now - record.fetched_at <= self.config.stale_max_age
        ):
            return _by_copy(record, STALE, fetch_due=fetch_due)
        fallback = ALLOW_ALL if self.config.unreachable_fallback == "allow" else DISALLOW_ALL
        return Evaluation(ready=True, kind=fallback, source=FALLBACK, fetch_due=fetch_due)

    def after_fetch(
        self, record: OriginRecord | None, outcome: FetchOutcome, now: float
    ) -> OriginRecord:
        previous = record or OriginRecord()
        if outcome.kind in (RULES, ALLOW_ALL):
            return OriginRecord(
                kind=outcome.kind,
                body=outcome.body if outcome.kind == RULES else b"",
                fetched_at=now,
                expires_at=now + self.ttl(outcome.max_age),
                last_outcome=outcome.detail,
            )
        failures, since = previous.failures + 1, previous.unreachable_since
        return previous.evolve(
            unreachable_since=now if since is None else since,
            next_retry_at=now + self.backoff(failures, outcome.retry_after),
            failures=failures,
            last_outcome=outcome.detail,
        )
