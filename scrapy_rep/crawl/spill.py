"""Held requests beyond the memory bound, on disk with Scrapy's own disk queues.

The waiting room already holds requests as bytes that Scrapy's ``request_from_dict``
restores (``RequestCodec``: a pickled dict of the kind ``Request.to_dict`` gives, as
``scrapy.squeues.PickleFifoDiskQueue`` writes under ``JOBDIR``), so a spilled request
comes back as the scheduler's own would, callbacks and all. Those bytes go as they are
into ``queuelib``'s ``FifoDiskQueue``, the queue that ``PickleFifoDiskQueue`` wraps,
after the time the request started waiting (8 bytes):
serialising again would double the cost. One queue per origin that has spilled
requests, under ``spill_root``: ``JOBDIR/rep-held`` when JOBDIR is set, else a temporary
directory.
A request that cannot be serialised (its callback is not a spider method) never gets
here: the room keeps it in memory, as the scheduler does.
"""

from __future__ import annotations

import hashlib
import shutil
import struct
import tempfile
from pathlib import Path
from typing import Any

# The time a spilled request started waiting, before its bytes.
_SINCE = struct.Struct("<d")


def spill_root(settings: Any) -> Path:
    """``JOBDIR/rep-held`` when JOBDIR is set, else a new temporary directory."""
    from scrapy.utils.job import job_dir

    jobdir = job_dir(settings)
    if jobdir:
        return Path(jobdir) / "rep-held"
    return Path(tempfile.mkdtemp(prefix="scrapy-rep-held-"))


class Spill:
    """One disk queue per origin under ``root``, which ``close`` removes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._queues: dict[str, Any] = {}
        self._counts: dict[str, int] = {}
        self.total = 0

    def __len__(self) -> int:
        return self.total

    def count(self, origin: str) -> int:
        return self._counts.get(origin, 0)

    def _queue(self, origin: str) -> Any:
        queue = self._queues.get(origin)
        if queue is None:
            from queuelib.queue import FifoDiskQueue

            path = self._path(origin)
            if path.exists():  # left over by a killed run: its contents were handed back
                shutil.rmtree(path, ignore_errors=True)
            path.parent.mkdir(parents=True, exist_ok=True)
            queue = self._queues[origin] = FifoDiskQueue(str(path))
        return queue

    def _path(self, origin: str) -> Path:
        key = hashlib.sha1(origin.encode("utf-8"), usedforsecurity=False).hexdigest()[:20]
        return self.root / key

    def push(self, origin: str, blob: bytes, since: float) -> None:
        self._queue(origin).push(_SINCE.pack(since) + blob)
        self._counts[origin] = self._counts.get(origin, 0) + 1
        self.total += 1

    def pop_all(self, origin: str) -> list[tuple[bytes, float]]:
        queue = self._queues.pop(origin, None)
        count = self._counts.pop(origin, 0)
        if queue is None:
            return []
        self.total -= count
        taken: list[tuple[bytes, float]] = []
        size = _SINCE.size
        while (data := queue.pop()) is not None:
            taken.append((data[size:], _SINCE.unpack_from(data)[0]))
        queue.close()
        shutil.rmtree(self._path(origin), ignore_errors=True)
        return taken

    def origins(self) -> list[str]:
        return list(self._queues)

    def close(self) -> None:
        for queue in self._queues.values():
            queue.close()
        self._queues.clear()
        self._counts.clear()
        self.total = 0
        # Everything spilled has left the room by now (released, handed back to the
        # scheduler, or dropped), so nothing here is worth keeping, under JOBDIR too.
        shutil.rmtree(self.root, ignore_errors=True)
