"""Held requests beyond the memory bound, on disk with Scrapy's own disk queues.

``scrapy.squeues.PickleFifoDiskQueue`` is what the scheduler uses under ``JOBDIR``: it
serialises with ``Request.to_dict`` (``request_to_dict``), so a spilled request comes back
as the scheduler's own would, callbacks and all. One queue per origin that has spilled
requests, under ``JOBDIR/rep-held`` when JOBDIR is set, else in a temporary directory.
A request that cannot be serialised (its callback is not a spider method) raises
``ValueError`` there, as in the scheduler, and the caller keeps it in memory.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

# Where a spilled request keeps the time it started waiting.
SINCE_META_KEY = "rep_held_since"


class Spill:
    def __init__(self, crawler: Crawler) -> None:
        from scrapy.utils.job import job_dir

        self.crawler = crawler
        jobdir = job_dir(crawler.settings)
        if jobdir:
            self.root = Path(jobdir) / "rep-held"
        else:
            self.root = Path(tempfile.mkdtemp(prefix="scrapy-rep-held-"))
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
            from scrapy import squeues

            queue_class: Any = squeues.PickleFifoDiskQueue

            path = self._path(origin)
            if path.exists():  # left over by a killed run: its contents were handed back
                shutil.rmtree(path, ignore_errors=True)
            queue = self._queues[origin] = queue_class.from_crawler(self.crawler, str(path))
        return queue

    def _path(self, origin: str) -> Path:
        key = hashlib.sha1(origin.encode("utf-8"), usedforsecurity=False).hexdigest()[:20]
        return self.root / key

    def push(self, origin: str, request: Request, since: float) -> bool:
        """False when the request cannot be serialised (it then stays in memory)."""
        request.meta[SINCE_META_KEY] = since
        try:
            self._queue(origin).push(request)
        except ValueError:
            del request.meta[SINCE_META_KEY]
            return False
        self._counts[origin] = self._counts.get(origin, 0) + 1
        self.total += 1
        return True

    def pop_all(self, origin: str) -> list[tuple[Request, float]]:
        queue = self._queues.pop(origin, None)
        count = self._counts.pop(origin, 0)
        if queue is None:
            return []
        self.total -= count
        taken: list[tuple[Request, float]] = []
        while (request := queue.pop()) is not None:
            since = request.meta.pop(SINCE_META_KEY, 0.0)
            taken.append((request, since))
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
