"""Sphinx configuration of the scrapy-rep documentation (``sphinx-build -W docs docs/_build``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

project = "scrapy-rep"
author = "scrapy-rep contributors"
copyright = "scrapy-rep contributors"

extensions = ["myst_parser", "sphinx.ext.intersphinx"]
source_suffix = {".md": "markdown"}
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3
exclude_patterns = ["_build", "_inventories", "_screenshots"]
html_theme = "furo"
html_title = "scrapy-rep"
html_static_path = ["_static"]
html_css_files = ["wrap.css"]
# The JSON examples carry comments for the reader; do not let Pygments fail on them.
highlight_language = "text"
suppress_warnings = ["misc.highlighting_failure"]
# A {setting} or {signal} reference that resolves nowhere is a build error (-W), not a
# silent plain word.
nitpicky = True

# Links to Scrapy's documentation. The build runs without network, so the inventory is
# a small local file listing the Scrapy targets these pages name; regenerate it with
# ``python docs/_inventories/make_inv.py`` after adding one.
_SCRAPY_INVENTORY = str(Path(__file__).parent / "_inventories" / "scrapy.inv")
intersphinx_mapping = {"scrapy": ("https://docs.scrapy.org/en/latest/", _SCRAPY_INVENTORY)}
intersphinx_timeout = 1


def setup(app: Any) -> None:
    """The two cross-reference types Scrapy's own docs define, so that ``{setting}`X```
    and ``{signal}`x``` resolve here (scrapy-rep's settings) or in Scrapy's docs."""
    app.add_crossref_type("setting", "setting", indextemplate="pair: %s; setting")
    app.add_crossref_type("signal", "signal", indextemplate="pair: %s; signal")
