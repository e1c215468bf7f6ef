"""scrapy-rep: RFC 9309 robots.txt handling for Scrapy.

The Scrapy components are loaded on first attribute access: ``import scrapy_rep`` does
not import Scrapy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from scrapy_rep.robotstxt import Decision, RobotsTxt, Usage, product_token

if TYPE_CHECKING:
    from scrapy_rep.addon import Addon
    from scrapy_rep.middleware import RobotsTxtMiddleware
    from scrapy_rep.robotparser import RobotParser

__all__ = [
    "Addon",
    "Decision",
    "RobotParser",
    "RobotsTxt",
    "RobotsTxtMiddleware",
    "Usage",
    "product_token",
]

# name -> module that defines it; these modules import Scrapy.
_LAZY = {
    "Addon": "scrapy_rep.addon",
    "RobotParser": "scrapy_rep.robotparser",
    "RobotsTxtMiddleware": "scrapy_rep.middleware",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'scrapy_rep' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
