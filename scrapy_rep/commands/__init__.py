"""Scrapy commands (entry-point group ``scrapy.commands``): ``scrapy robots``."""
