"""Sphinx configuration of the scrapy-rep documentation (``sphinx-build -W docs docs/_build``)."""

from __future__ import annotations

project = "scrapy-rep"
author = "scrapy-rep contributors"
copyright = "scrapy-rep contributors"

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = "scrapy-rep"
# The JSON examples carry comments for the reader; do not let Pygments fail on them.
highlight_language = "text"
suppress_warnings = ["misc.highlighting_failure"]
