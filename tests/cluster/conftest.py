"""Fixtures of the cluster tests: a redis-server of each test's own (the scrapy-redis
queue, dupefilter and the scrapy-rep store of one test never meet another's)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster_helpers import Cluster
from tests.redis_server import RedisServer, run_redis_server


@pytest.fixture
def cluster_redis() -> Iterator[RedisServer]:
    yield from run_redis_server()


@pytest.fixture
def cluster(
    tmp_path: Path, cluster_redis: RedisServer, subprocess_env: dict[str, str]
) -> Iterator[Cluster]:
    with Cluster(tmp_path, cluster_redis, subprocess_env) as running:
        yield running
