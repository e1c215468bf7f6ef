"""Where per-origin robots.txt state lives: the interface, memory, SQLite and Redis.

``RobotsStorage`` is the interface a custom ``REP_STORAGE`` class implements. Backends
import ``base`` and ``codec``; only ``factory`` knows them all.
"""

from scrapy_rep.storage.base import MemoryStorage, RobotsStorage

__all__ = ["MemoryStorage", "RobotsStorage"]
