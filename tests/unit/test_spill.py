"""``Spill`` on its own, in a directory of the test's: one disk queue per origin, each
origin's requests back in order with the time they started waiting, and nothing left on
disk once taken or closed; ``spill_root`` follows JOBDIR."""

from __future__ import annotations

from pathlib import Path

from scrapy.settings import Settings

from scrapy_rep.crawl.waiting_room import Spill, spill_root

A = "https://a.example"
B = "https://b.example"


def test_pushed_bytes_come_back_per_origin_in_order_with_their_since(tmp_path: Path) -> None:
    spill = Spill(tmp_path / "held")
    for n in range(3):
        spill.push(A, f"a{n}".encode(), float(n))
    spill.push(B, b"b0", 10.0)

    assert (len(spill), spill.count(A), spill.count(B)) == (4, 3, 1)
    assert sorted(spill.origins()) == [A, B]
    assert len(list((tmp_path / "held").iterdir())) == 2  # one queue per origin

    assert spill.pop_all(A) == [(b"a0", 0.0), (b"a1", 1.0), (b"a2", 2.0)]
    assert (len(spill), spill.count(A), spill.pop_all(A)) == (1, 0, [])
    assert len(list((tmp_path / "held").iterdir())) == 1  # A's queue is gone from disk

    spill.close()
    assert (len(spill), spill.origins()) == (0, [])
    assert not (tmp_path / "held").exists()


def test_the_root_is_under_jobdir_when_set_else_a_new_temporary_directory(tmp_path: Path) -> None:
    assert spill_root(Settings({"JOBDIR": str(tmp_path / "job")})) == tmp_path / "job" / "rep-held"
    first, second = spill_root(Settings()), spill_root(Settings())
    try:
        assert first != second and first.is_dir() and second.is_dir()
    finally:
        first.rmdir()
        second.rmdir()
