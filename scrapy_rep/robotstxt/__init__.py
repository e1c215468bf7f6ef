"""The robots.txt engine: bytes in, verdicts out (RFC 9309 with Google's rules).

This layer is pure: it imports nothing from Scrapy, Twisted or the rest of scrapy_rep,
so it can be used (and tested) as a library on its own.
"""

from scrapy_rep.robotstxt._robotstxt import DEFAULT_MAX_SIZE, Decision, RobotsTxt
from scrapy_rep.robotstxt._useragent import product_token

__all__ = ["DEFAULT_MAX_SIZE", "Decision", "RobotsTxt", "product_token"]
