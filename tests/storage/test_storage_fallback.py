"""LocalFallback, a shared store's stand-in during an outage: writing back never loses a
record that a later fetch decided while the write-back ran."""

from __future__ import annotations

from scrapy_rep.policy.records import ALLOW_ALL, OriginRecord
from scrapy_rep.storage.base import LocalFallback

ORIGINS = ("http://a.test", "http://b.test")


def test_a_record_kept_during_a_write_back_stays_unsynced_and_is_written_next() -> None:
    fallback = LocalFallback(max_origins=10)
    older = {o: OriginRecord(kind=ALLOW_ALL, fetched_at=100.0) for o in ORIGINS}
    for origin, record in older.items():
        fallback.keep(origin, record, stored=False)
    newer = OriginRecord(kind=ALLOW_ALL, fetched_at=200.0)
    batches: list[dict[str, OriginRecord]] = []

    def write_newer(mine: dict[str, OriginRecord]) -> int:
        batches.append(dict(mine))
        if len(batches) == 1:  # another thread's later fetch fails to reach the store
            fallback.keep(ORIGINS[0], newer, stored=False)
        return len(mine)

    assert fallback.write_back(write_newer) == 2
    assert batches == [older]
    assert fallback.unsynced == {ORIGINS[0]}
    assert fallback.unsynced_copy(ORIGINS[0]) is newer
    assert fallback.unsynced_copy(ORIGINS[1]) is None

    assert fallback.write_back(write_newer) == 1
    assert batches[1] == {ORIGINS[0]: newer}
    assert not fallback.unsynced
    assert fallback.unsynced_copy(ORIGINS[0]) is None
