"""Writes scrapy.inv: the few Scrapy documentation targets these docs link, offline.

The docs build with warnings as errors and without network, so intersphinx cannot
download Scrapy's own objects.inv. This hand-written list of the Scrapy settings and
signals the pages name, with their docs.scrapy.org addresses, is written in Sphinx's
inventory format (version 2: four header lines, then zlib-compressed
"name domain:role priority uri display-name" lines, as Sphinx's intersphinx reads).

Run it after adding a target: ``python docs/_inventories/make_inv.py``. Scrapy's docs
define ``setting`` and ``signal`` as cross-reference types of the ``std`` domain;
``docs/conf.py`` registers the same two so that pages can write ``{setting}`X```.
"""

from __future__ import annotations

import zlib
from pathlib import Path

SCRAPY_DOCS = "https://docs.scrapy.org/en/latest/"

#: Setting name -> the page of Scrapy's docs that defines it.
SETTINGS = {
    "ADDONS": "topics/settings.html",
    "CONCURRENT_REQUESTS": "topics/settings.html",
    "DOWNLOADER_MIDDLEWARES": "topics/settings.html",
    "DOWNLOAD_DELAY": "topics/settings.html",
    "DOWNLOAD_MAXSIZE": "topics/settings.html",
    "DOWNLOAD_TIMEOUT": "topics/settings.html",
    "JOBDIR": "topics/settings.html",
    "LOGSTATS_INTERVAL": "topics/settings.html",
    "ROBOTSTXT_OBEY": "topics/settings.html",
    "ROBOTSTXT_PARSER": "topics/settings.html",
    "ROBOTSTXT_USER_AGENT": "topics/settings.html",
    "USER_AGENT": "topics/settings.html",
}

#: Signal name -> the page of Scrapy's docs that defines it.
SIGNALS = {
    "request_dropped": "topics/signals.html",
    "request_scheduled": "topics/signals.html",
    "robots_parsed": "topics/signals.html",
    "spider_closed": "topics/signals.html",
    "spider_idle": "topics/signals.html",
}

HEADER = (
    "# Sphinx inventory version 2\n"
    "# Project: Scrapy\n"
    "# Version: latest\n"
    "# The remainder of this file is compressed using zlib.\n"
)


def inventory_lines() -> list[str]:
    """One line per target; Sphinx anchors a ``std`` cross-reference type's target
    at ``std-<type>-<name>``, and ``-`` as display name means the name itself."""
    lines = []
    for role, targets in (("setting", SETTINGS), ("signal", SIGNALS)):
        for name, page in sorted(targets.items()):
            lines.append(f"{name} std:{role} -1 {page}#std-{role}-{name} -")
    return lines


def main() -> None:
    body = "".join(line + "\n" for line in inventory_lines()).encode("utf-8")
    target = Path(__file__).with_name("scrapy.inv")
    target.write_bytes(HEADER.encode("utf-8") + zlib.compress(body, 9))
    print(f"wrote {target} ({len(SETTINGS) + len(SIGNALS)} targets)")


if __name__ == "__main__":
    main()
