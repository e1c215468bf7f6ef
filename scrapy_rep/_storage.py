"""Deprecated import path of the storage interface, kept for old ``REP_STORAGE`` classes."""

import warnings

from scrapy_rep.storage.base import MemoryStorage, RobotsStorage

warnings.warn(
    "scrapy_rep._storage is deprecated; import RobotsStorage from scrapy_rep.storage",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["MemoryStorage", "RobotsStorage"]
