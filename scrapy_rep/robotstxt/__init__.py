"""The robots.txt engine: bytes in, verdicts out (RFC 9309 with Google's rules).

This layer is pure: it imports nothing from Scrapy, Twisted or the rest of scrapy_rep,
so it can be used (and tested) as a library on its own.
"""

from scrapy_rep.robotstxt._extensions import EXTENSION_FIELDS, ExtensionLine
from scrapy_rep.robotstxt._issues import ISSUE_KINDS, MAX_ISSUES, Issue
from scrapy_rep.robotstxt._lines import product_token
from scrapy_rep.robotstxt._page import (
    NofollowLinks,
    PageDirectives,
    PageSource,
    page_directives,
)
from scrapy_rep.robotstxt._robotstxt import DEFAULT_MAX_SIZE, Decision, RobotsTxt
from scrapy_rep.robotstxt._usage import Usage

__all__ = [
    "DEFAULT_MAX_SIZE",
    "EXTENSION_FIELDS",
    "ISSUE_KINDS",
    "MAX_ISSUES",
    "Decision",
    "ExtensionLine",
    "Issue",
    "NofollowLinks",
    "PageDirectives",
    "PageSource",
    "RobotsTxt",
    "Usage",
    "page_directives",
    "product_token",
]
