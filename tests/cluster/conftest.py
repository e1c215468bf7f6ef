"""Fixtures of the cluster tests: a redis-server of each test's own (the scrapy-redis
queue, dupefilter and the scrapy-rep store of one test never meet another's).

Under pytest-xdist the cluster tests run one after another on one worker: each starts
several ``scrapy`` processes, and two clusters starting at once on a 2-core machine
would starve the other workers' crawls of CPU."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import Cluster
from tests.support.redis_server import RedisServer, run_redis_server

CLUSTER_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A conftest's collection hook sees every item of the session: mark only ours.
    for item in items:
        if CLUSTER_DIR in item.path.parents:
            item.add_marker(pytest.mark.xdist_group("cluster"))


@pytest.fixture
def cluster_redis() -> Iterator[RedisServer]:
    yield from run_redis_server()


@pytest.fixture
def cluster(
    tmp_path: Path, cluster_redis: RedisServer, subprocess_env: dict[str, str]
) -> Iterator[Cluster]:
    with Cluster(tmp_path, cluster_redis, subprocess_env) as running:
        yield running
