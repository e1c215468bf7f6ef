"""Deprecated import path of the storage interface (documented before 0.2).

Use ``scrapy_rep.storage.RobotsStorage``; this module only keeps old ``REP_STORAGE``
classes that import it working.
"""

import warnings

from scrapy_rep.storage.base import MemoryStorage, RobotsStorage

warnings.warn(
    "scrapy_rep._storage is deprecated; import RobotsStorage from scrapy_rep.storage",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["MemoryStorage", "RobotsStorage"]
