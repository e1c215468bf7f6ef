"""The robots.txt state machine on a fake clock: no reactor, no I/O."""

from __future__ import annotations

import pytest

from scrapy_rep.policy.config import DAY, Config
from scrapy_rep.policy.records import ALLOW_ALL, RULES, UNREACHABLE, OriginRecord
from scrapy_rep.policy.robots_policy import (
    DISALLOW_ALL,
    EXPIRED,
    FALLBACK,
    FRESH,
    STALE,
    FetchOutcome,
    RobotsPolicy,
    classify_status,
    parse_max_age,
    parse_retry_after,
    refresh_ahead_at,
)

HOUR = 3600.0
T0 = 1_700_000_000.0


class FakeClock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


def ok(body: bytes = b"User-agent: *\nDisallow: /x\n", max_age: float | None = None):
    return FetchOutcome(RULES, "200", body, 200, max_age)


def down(detail: str = "503", retry_after: float | None = None) -> FetchOutcome:
    return FetchOutcome(UNREACHABLE, detail, retry_after=retry_after)


@pytest.fixture
def policy() -> RobotsPolicy:
    return RobotsPolicy(Config())


def test_unknown_origin_must_be_fetched_and_waits(policy):
    evaluation = policy.evaluate(None, T0)
    assert not evaluation.ready
    assert evaluation.fetch_due


def test_fresh_rules_apply_until_ttl_then_requests_wait_for_the_refetch(policy):
    clock = FakeClock()
    record = policy.after_fetch(None, ok(), clock())
    assert record.expires_at == T0 + DAY
    fresh = policy.evaluate(record, clock.advance(DAY - 1))
    assert (fresh.ready, fresh.source) == (True, FRESH)
    # Past its TTL no request is decided by the copy: it waits as for a first fetch.
    expired = policy.evaluate(record, clock.advance(1))
    assert (expired.ready, expired.fetch_due, expired.wake_at) == (False, True, None)
    assert expired.kind is None and expired.body == b""


def test_audit_mode_records_by_the_expired_copy_while_it_is_refetched():
    policy = RobotsPolicy(Config(enforce=False))
    record = policy.after_fetch(None, ok(), T0)
    expired = policy.evaluate(record, T0 + DAY)
    assert (expired.ready, expired.source, expired.fetch_due) == (True, EXPIRED, True)
    assert expired.body == record.body


@pytest.mark.parametrize(
    ("lifetime", "lead"),
    [
        (60.0, 6.0),  # REP_MIN_TTL's default: the last tenth
        (2.0, 0.2),
        (3000.0, 300.0),  # a tenth is exactly the 5-minute cap
        (DAY, 300.0),  # capped: a tenth would be 2.4 h
    ],
)
def test_refresh_ahead_starts_in_the_last_tenth_at_most_five_minutes(lifetime, lead):
    policy = RobotsPolicy(Config(min_ttl=1.0))
    record = policy.after_fetch(None, ok(max_age=lifetime), T0)
    assert record.expires_at == T0 + lifetime
    assert refresh_ahead_at(record) == pytest.approx(T0 + lifetime - lead)
    start = T0 + lifetime - lead
    before = policy.evaluate(record, start - 0.001)
    assert (before.ready, before.source, before.fetch_due) == (True, FRESH, False)
    # From the refresh-ahead time on, the refetch is due and the copy still applies.
    for now in (start, start + lead / 2, T0 + lifetime - 0.001):
        ahead = policy.evaluate(record, now)
        assert (ahead.ready, ahead.source, ahead.fetch_due) == (True, FRESH, True)
        assert ahead.body == record.body
    at_expiry = policy.evaluate(record, T0 + lifetime)
    assert (at_expiry.ready, at_expiry.fetch_due) == (False, True)


def test_refresh_ahead_of_a_record_without_fetch_time_is_its_expiry(policy):
    record = OriginRecord(kind=RULES, body=b"", fetched_at=None, expires_at=T0 + 100)
    assert refresh_ahead_at(record) == T0 + 100
    assert not policy.evaluate(record, T0 + 99.9).fetch_due


@pytest.mark.parametrize(
    ("max_age", "ttl"),
    [(None, DAY), (0, 60.0), (30, 60.0), (600, 600.0), (10 * DAY, DAY)],
)
def test_max_age_is_clamped_to_min_and_max_ttl(policy, max_age, ttl):
    record = policy.after_fetch(None, ok(max_age=max_age), T0)
    assert record.expires_at - T0 == ttl


def test_custom_ttl_bounds():
    policy = RobotsPolicy(Config(cache_ttl=100.0, min_ttl=5.0, max_ttl=200.0))
    assert policy.ttl(None) == 100.0
    assert policy.ttl(1.0) == 5.0
    assert policy.ttl(1000.0) == 200.0


def test_4xx_is_allow_all(policy):
    record = policy.after_fetch(None, classify_status(404, {}, b"Disallow: /", T0), T0)
    evaluation = policy.evaluate(record, T0)
    assert (evaluation.ready, evaluation.kind) == (True, ALLOW_ALL)
    assert record.body == b""  # a 404's body is never parsed as rules


def test_backoff_doubles_from_base_up_to_fifteen_minutes(policy):
    clock = FakeClock()
    record = None
    delays = []
    for _ in range(10):
        record = policy.after_fetch(record, down(), clock())
        assert record.next_retry_at is not None
        delays.append(record.next_retry_at - clock())
        clock.now = record.next_retry_at
    assert delays == [10, 20, 40, 80, 160, 320, 640, 900, 900, 900]
    assert record is not None and record.unreachable_since == T0


@pytest.mark.parametrize(
    ("retry_after", "delay"), [(0, 1.0), (5, 5.0), (120, 120.0), (99999, 900.0)]
)
def test_retry_after_sets_next_retry_clamped(policy, retry_after, delay):
    record = policy.after_fetch(None, down("429", retry_after=retry_after), T0)
    assert record.next_retry_at == T0 + delay


def test_unreachable_waits_until_retry_then_fetch_is_due(policy):
    record = policy.after_fetch(None, down(), T0)
    waiting = policy.evaluate(record, T0 + 5)
    assert (waiting.ready, waiting.fetch_due, waiting.wake_at) == (False, False, T0 + 10)
    due = policy.evaluate(record, T0 + 10)
    assert (due.ready, due.fetch_due) == (False, True)


def test_twelve_hour_window_without_good_copy_falls_back_to_allow(policy):
    record = policy.after_fetch(None, down(), T0)
    assert not policy.evaluate(record, T0 + 12 * HOUR - 1).ready
    after = policy.evaluate(record, T0 + 12 * HOUR)
    assert (after.ready, after.source, after.kind) == (True, FALLBACK, ALLOW_ALL)


def test_rfc_strict_fallback_disallows():
    policy = RobotsPolicy(Config(unreachable_fallback="disallow"))
    record = policy.after_fetch(None, down(), T0)
    after = policy.evaluate(record, T0 + 12 * HOUR)
    assert (after.ready, after.kind) == (True, DISALLOW_ALL)


def test_refetch_that_fails_makes_origin_unreachable_then_last_good_copy_applies(policy):
    clock = FakeClock()
    good = policy.after_fetch(None, ok(b"User-agent: *\nDisallow: /old\n"), clock())
    clock.advance(DAY)  # expired: a refetch starts, old rules apply meanwhile
    failed = policy.after_fetch(good, down(), clock())
    assert failed.body == good.body and failed.fetched_at == T0
    # A 503 is how site owners pause crawlers: requests wait, they do not use the old copy.
    assert not policy.evaluate(failed, clock.advance(HOUR)).ready
    stale = policy.evaluate(failed, T0 + DAY + 12 * HOUR)
    assert (stale.ready, stale.source, stale.body) == (True, STALE, good.body)


def test_last_good_copy_older_than_thirty_days_is_not_used(policy):
    good = policy.after_fetch(None, ok(), T0)
    failed = policy.after_fetch(good, down(), T0 + 29 * DAY)
    at_wait_end = T0 + 29 * DAY + 12 * HOUR
    assert policy.evaluate(failed, at_wait_end).source == STALE
    too_old = policy.evaluate(failed, T0 + 30 * DAY + 1)
    assert (too_old.source, too_old.kind) == (FALLBACK, ALLOW_ALL)


def test_unreachable_spell_keeps_its_start_and_recovery_clears_it(policy):
    first = policy.after_fetch(None, down(), T0)
    second = policy.after_fetch(first, down(), T0 + 10)
    assert second.unreachable_since == T0 and second.failures == 2
    recovered = policy.after_fetch(second, ok(), T0 + 30)
    assert not recovered.unreachable and recovered.failures == 0
    assert policy.evaluate(recovered, T0 + 31).source == FRESH


def test_retries_continue_after_the_wait(policy):
    record = policy.after_fetch(None, down(), T0)
    late = policy.evaluate(record, T0 + 13 * HOUR)
    assert late.ready and late.fetch_due


def test_record_without_kind_is_unknown(policy):
    assert policy.evaluate(OriginRecord(), T0).fetch_due


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (200, RULES),
        (204, RULES),
        (299, RULES),
        (400, ALLOW_ALL),
        (401, ALLOW_ALL),
        (403, ALLOW_ALL),
        (404, ALLOW_ALL),
        (410, ALLOW_ALL),
        (429, UNREACHABLE),
        (500, UNREACHABLE),
        (503, UNREACHABLE),
        (599, UNREACHABLE),
        (100, UNREACHABLE),
        (304, ALLOW_ALL),
        (600, UNREACHABLE),
    ],
)
def test_status_table(status, kind):
    assert classify_status(status, {}, b"x", T0).kind == kind


def test_only_2xx_keeps_the_body():
    assert classify_status(200, {}, b"rules", T0).body == b"rules"
    assert classify_status(500, {}, b"rules", T0).body == b""


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("max-age=600", 600.0),
        ("public, max-age=60", 60.0),
        ('max-age="120"', 120.0),
        ("MAX-AGE = 7", 7.0),
        ("no-store", None),
        ("max-age=-1", None),
        ("s-maxage=5", None),
        ("", None),
        (None, None),
        ("max-age=abc", None),
    ],
)
def test_parse_max_age(header, value):
    assert parse_max_age(header) == value


def test_parse_retry_after():
    assert parse_retry_after("120", T0) == 120.0
    assert parse_retry_after("Tue, 14 Nov 2023 22:14:20 GMT", T0) == pytest.approx(60.0, abs=1)
    assert parse_retry_after("Tue, 14 Nov 2000 22:14:20 GMT", T0) == 0.0
    for junk in ("", None, "soon", "-5", "1.5e9x", "Tue, 99 Foo 2023"):
        assert parse_retry_after(junk, T0) is None


def test_status_classification_reads_retry_after_and_cache_control():
    out = classify_status(503, {"retry-after": "30"}, b"", T0)
    assert out.retry_after == 30.0
    out = classify_status(200, {"cache-control": "max-age=90"}, b"", T0)
    assert out.max_age == 90.0
