"""The package layout is the architecture: each folder is one layer, arrows point down.

Layers, lowest first (docs/architecture.md): ``robotstxt`` (the pure engine) <
``policy`` (settings, records, the state machine) < ``storage`` < ``crawl`` (the Scrapy
runtime) < ``commands`` < the top-level glue (``middleware``, ``addon``, ``robotparser``).
A module may import its own layer and the layers below it, never above; and no two
modules import each other, even only for type checking.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "scrapy_rep"
LAYERS = ["robotstxt", "policy", "storage", "crawl", "commands", ""]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    parts = module.split(".")
    sub = parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else ""
    return LAYERS.index(sub if sub in LAYERS else "")


def imports_of(path: Path) -> set[str]:
    """Every scrapy_rep module ``path`` imports, at any depth (functions, TYPE_CHECKING)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("scrapy_rep"):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("scrapy_rep"))
    return found


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
GRAPH = {name: imports_of(path) for name, path in MODULES.items()}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module: str) -> None:
    if module == "scrapy_rep._storage":  # the deprecated re-export of an old path
        return
    upward = [dst for dst in GRAPH[module] if layer_of(dst) > layer_of(module)]
    assert not upward, f"{module} imports a higher layer: {upward}"


def test_no_import_cycles() -> None:
    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [d for d in GRAPH[start] if d in GRAPH and d != "scrapy_rep"]
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(d for d in GRAPH.get(node, ()) if d != "scrapy_rep")
        return seen

    cycles = sorted(m for m in GRAPH if m != "scrapy_rep" and m in reach(m))
    assert not cycles, f"modules in an import cycle: {cycles}"


def test_engine_and_policy_import_nothing_from_scrapy() -> None:
    code = (
        "import sys, scrapy_rep, scrapy_rep.robotstxt, scrapy_rep.policy.robots_policy, "
        "scrapy_rep.policy.origin; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('scrapy', 'twisted')]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_backends_do_not_import_the_factory() -> None:
    for name in ("scrapy_rep.storage.sqlite_store", "scrapy_rep.storage.redis_store"):
        assert "scrapy_rep.storage.factory" not in GRAPH[name]


def test_documented_import_paths_still_work() -> None:
    import scrapy_rep
    from scrapy_rep.middleware import RobotsTxtMiddleware
    from scrapy_rep.storage import RobotsStorage

    assert scrapy_rep.RobotsTxtMiddleware is RobotsTxtMiddleware
    assert {"Addon", "RobotParser", "RobotsTxt", "Usage"} <= set(scrapy_rep.__all__)
    # The type RobotsTxt.usage() returns is public, so callers can annotate with it.
    usage = scrapy_rep.RobotsTxt.parse(b"Content-Usage: train-ai=n").usage("/", "bot")
    assert isinstance(usage, scrapy_rep.Usage)
    with pytest.warns(DeprecationWarning):
        sys.modules.pop("scrapy_rep._storage", None)
        from scrapy_rep._storage import RobotsStorage as Old
    assert Old is RobotsStorage


#: Scrapy's private names and undocumented attributes and behaviours that scrapy-rep
#: depends on (what each pattern finds in source text). Every one is reached through
#: scrapy_rep/crawl/compat.py only, where tests/crawl/test_scrapy_internals.py checks it
#: against each Scrapy release CI runs; a new one belongs there too, with its test.
SCRAPY_INTERNALS = {
    "ExecutionEngine._slot": r"(?<!self)[.\"'`]_slot\b",
    "ExecutionEngine._schedule_request": r"\b_schedule_request\b",
    "the engine slot's nextcall": r"\bnextcall\b",
    "the engine slot's closing": r"slot\.closing\b|[\"']closing[\"']",
    "Scheduler.df": r"\.df\b|[\"']df[\"']",
    "scrapy-redis's Scheduler.persist": r"\.persist\b|[\"']persist[\"']",
    "a scheduler's close wrapped": r"\.close\s*=(?!=)",
    "OffsiteMiddleware.host_regex / _update_host_regex": r"\bhost_regex\b|_update_host_regex",
    "DownloaderMiddlewareManager.middlewares": r"\.middlewares\b|[\"']middlewares[\"']",
    "Downloader._delay / _jitter": r"(?<!self)[.\"'`]_(delay|jitter)\b",
    "Downloader.slots": r"\.slots\b|[\"']slots[\"']",
    "Downloader.per_slot_settings": r"\bper_slot_settings\b",
    "Slot.lastseen": r"\blastseen\b",
    "Slot.randomize_delay / jitter": r"\brandomize_delay\b|slot\.jitter\b",
    "StatsCollector._stats": r"(?<!self)[.\"'`]_stats\b|object\.__getattribute__",
    "Request's lazy fields": (
        r"(?<!self)[.\"'`]_(headers|meta|cookies|flags|cb_kwargs)\b|[\"']_[\"']\s*\+"
    ),
    "pydispatch's receivers": r"getAllReceivers|liveReceivers|from pydispatch",
    "sys.orig_argv": r"\borig_argv\b",
    "SitemapSpider._parse_sitemap": r"\b_parse_sitemap\b",
    "ScrapyHelpFormatter._join_parts": r"ScrapyHelpFormatter|\b_join_parts\b",
}
DOOR = PACKAGE / "crawl" / "compat.py"


def test_scrapy_internals_are_reached_through_one_module() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{number}: {name}"
        for path in MODULES.values()
        if path != DOOR
        for number, line in enumerate(path.read_text().splitlines(), 1)
        for name, pattern in SCRAPY_INTERNALS.items()
        if re.search(pattern, line)
    ]
    assert not found, (
        "Scrapy internals outside scrapy_rep/crawl/compat.py (move each access into a "
        "function there, with its why and a check in tests/crawl/test_scrapy_internals.py):"
        "\n" + "\n".join(found)
    )


def test_the_internals_pattern_finds_each_in_the_door() -> None:
    # Each pattern still finds its name in compat.py, so none has silently stopped
    # matching the code it guards.
    door = DOOR.read_text()
    missing = [name for name, pattern in SCRAPY_INTERNALS.items() if not re.search(pattern, door)]
    assert not missing, f"not found in scrapy_rep/crawl/compat.py: {missing}"


def test_test_helpers_live_in_tests_support() -> None:
    # One home per helper (tests/support/): the tests' root holds only the suite's
    # fixtures and its own test modules.
    root = Path(__file__).resolve().parent
    loose = sorted(
        path.name
        for path in root.glob("*.py")
        if path.name not in {"__init__.py", "conftest.py"} and not path.name.startswith("test_")
    )
    assert not loose, f"helper modules outside tests/support/: {loose}"
