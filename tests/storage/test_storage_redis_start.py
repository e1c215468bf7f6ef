"""The start-up check of a Redis store (a crawl starting): an authentication error stops
the crawl at once, naming REP_STORAGE, instead of being retried like an outage."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from scrapy_rep.policy.config import Config, SettingError
from scrapy_rep.storage.factory import create_storage
from tests.support import redis_server as redis_helper
from tests.support.redis_server import RedisServer

private_redis_server = redis_helper.private_redis_server

#: Long enough that a check retrying an authentication error would try many times.
REACH_WITHIN = 30.0


@pytest.fixture
def server_and_admin(
    private_redis_server: RedisServer,
) -> Iterator[tuple[RedisServer, redis.Redis]]:
    admin = redis.Redis.from_url(private_redis_server.url)
    yield private_redis_server, admin
    admin.close()


def connections(admin: redis.Redis) -> int:
    return int(admin.info("stats")["total_connections_received"])


@pytest.mark.parametrize("password", ["wrong-pw", None], ids=["wrong password", "no password"])
def test_an_authentication_error_at_start_is_not_retried(
    server_and_admin: tuple[RedisServer, redis.Redis], password: str | None
) -> None:
    server, admin = server_and_admin
    auth = f":{password}@" if password else ""
    url = f"redis://{auth}127.0.0.1:{server.port}/0"
    before = connections(admin)
    with pytest.raises(SettingError) as info:
        create_storage(Config(storage=url), None, reach_within=REACH_WITHIN)
    # (the admin client reuses its connection) one try: refused once, not retried
    assert connections(admin) - before == 1
    message = str(info.value)
    masked = f"redis://{':***@' if password else ''}127.0.0.1:{server.port}/0"
    assert message.startswith(f"REP_STORAGE = '{masked}': the store does not answer (")
    assert "AuthenticationError" in message and "an authentication error, not retried" in message
    assert "tried for" not in message
    assert (password or "never") not in message and server.password not in message


def test_the_right_password_passes_the_start_check(
    server_and_admin: tuple[RedisServer, redis.Redis],
) -> None:
    server, _ = server_and_admin
    store = create_storage(Config(storage=server.url), None, reach_within=REACH_WITHIN)
    assert not store.degraded
    store.close()
