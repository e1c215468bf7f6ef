"""What the ``scrapy robots`` tests share: a subprocess runner and a sample robots.txt."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.resolver import RESOLVER_SETTING
from tests.support.scrapy_compat import RESOLVER_SETTING_NAME

ROBOTS = (
    "Sitemap: http://example.test/sitemap.xml\n"
    "User-agent: mybot\n"
    "Disallow: /private\n"
    "Crawl-delay: 2\n"
    "Request-rate: 1/5\n"
    "Content-Signal: search=yes, ai-train=no\n"
    "\n"
    "User-agent: *\n"
    "Disallow: /\n"
)


def robots(
    args: list[str],
    env: dict[str, str],
    cwd: Path,
    *,
    online: bool = True,
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "scrapy", "robots", *args]
    if online:
        command += ["-s", f"{RESOLVER_SETTING_NAME}={RESOLVER_SETTING}", "-s", "DOWNLOAD_TIMEOUT=5"]
    return subprocess.run(
        command, env=env, cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


def as_json(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path
