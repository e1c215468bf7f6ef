"""The suite's fixtures; the helpers behind them live in ``tests/support/``.

* ``mockserver`` (session): the running ``tests/support/mockserver.py`` subprocess (a
  ``tests.support.mockserver.MockServer``).
* ``host`` (function): a fresh ``<test-name>-<n>-<hex>.test`` hostname.
* ``run_crawl`` (session): ``await run_crawl(urls, settings=..., ...)`` runs a whole
  Scrapy crawl and returns the finished ``HarnessCrawler``.
* ``list_spider`` (session): the default ``ListSpider`` class, to subclass.
* ``subprocess_env`` (session): environment for ``scrapy`` subprocesses.

An autouse session fixture installs ``tests.support.resolver.LocalResolver`` on the
reactor, so ``*.test`` names reach the mock server and nothing else resolves.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# Make ``tests.support`` importable the same way here and in subprocesses.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.support.crawl import ListSpider, RunCrawl, run_crawl  # noqa: E402
from tests.support.mockserver import MockServer  # noqa: E402
from tests.support.resolver import LocalResolver  # noqa: E402
from tests.support.waits import installed_reactor  # noqa: E402

PROXY_ENV_VARS = (
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
)


@pytest.fixture(scope="session", autouse=True)
def _offline_session() -> Iterator[None]:
    """No proxies from the environment; names resolve only through LocalResolver."""
    reactor = installed_reactor()
    saved = {name: os.environ.pop(name) for name in PROXY_ENV_VARS if name in os.environ}
    previous = reactor.installNameResolver(LocalResolver(reactor))
    yield
    reactor.installNameResolver(previous)
    os.environ.update(saved)


@pytest.fixture(scope="session")
def mockserver() -> Iterator[MockServer]:
    server = MockServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def host(mockserver: MockServer, request: pytest.FixtureRequest) -> str:
    """A fresh hostname named after the test."""
    return mockserver.unique_host(request.node.name.removeprefix("test_"))


@pytest.fixture(scope="session", name="run_crawl")
def run_crawl_fixture() -> RunCrawl:
    return run_crawl


@pytest.fixture(scope="session")
def list_spider() -> type[ListSpider]:
    return ListSpider


@pytest.fixture(scope="session")
def subprocess_env() -> dict[str, str]:
    """Environment for ``scrapy`` subprocesses: repo root on PYTHONPATH, no proxies.

    Pass ``-s TWISTED_DNS_RESOLVER=tests.support.resolver.LocalResolver`` (``DNS_RESOLVER``
    before Scrapy 2.19: ``f"{RESOLVER_SETTING_NAME}={RESOLVER_SETTING}"``) so the
    subprocess resolves ``*.test`` names too.
    """
    env = {k: v for k, v in os.environ.items() if k not in PROXY_ENV_VARS}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    return env


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A local port that refuses connections for the whole test: bound but never
    listening (Linux answers a SYN to it with RST). Kept bound, so no other process,
    e.g. another pytest-xdist worker's server, can take it meanwhile."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        yield port
