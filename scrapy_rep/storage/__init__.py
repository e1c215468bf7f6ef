"""Where per-origin robots.txt state lives: the interface, memory, SQLite and Redis.

``RobotsStorage`` is the base class of a custom ``REP_STORAGE`` class. Backends import
``base`` and ``cluster``; only ``factory`` knows them all."""

from scrapy_rep.storage.base import MemoryStorage, RobotsStorage

__all__ = ["MemoryStorage", "RobotsStorage"]
