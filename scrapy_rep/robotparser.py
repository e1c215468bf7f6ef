"""``ROBOTSTXT_PARSER = "scrapy_rep.RobotParser"``: this engine behind Scrapy's own
``RobotsTxtMiddleware`` (the parser interface of ``scrapy.robotstxt``)."""

from __future__ import annotations

from scrapy_rep.crawl.parser_plugin import RobotParser

__all__ = ["RobotParser"]
