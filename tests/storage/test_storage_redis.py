"""Redis store: URLs and secrets, keys and TTLs, refused keys, outages and recovery.

The contract every backend keeps is in test_storage.py; runs a real redis-server.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from urllib.parse import quote

import pytest
import redis

from scrapy_rep.policy.config import Config, SettingError
from scrapy_rep.storage.base import pack_record, unpack_record
from scrapy_rep.storage.factory import create_storage
from scrapy_rep.storage.redis_store import RedisStorage, mask_url
from tests.storage.test_storage import RECORD, ours
from tests.support import redis_server as redis_helper
from tests.support.redis_server import RedisServer

# The fixtures live in the helper module (tests/conftest.py belongs to the harness).
redis_server = redis_helper.redis_server
private_redis_server = redis_helper.private_redis_server

REDIS_LOGGER = "scrapy_rep.storage.redis_store"


# ---------------------------------------------------------------------------
# Redis
# ---------------------------------------------------------------------------


def test_mask_url() -> None:
    assert mask_url("redis://user:pw@h:6379/0") == "redis://user:***@h:6379/0"
    assert mask_url("rediss://:pw@h/1") == "rediss://:***@h/1"
    assert mask_url("redis://h:6379/0") == "redis://h:6379/0"
    assert mask_url("redis://token@h") == "redis://***@h"
    assert mask_url("unix:///tmp/r.sock?db=2&password=pw") == "unix:///tmp/r.sock?db=2&password=***"


def test_redis_missing_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(SettingError, match=r"pip install scrapy-rep\[redis\]"):
        RedisStorage.from_url("redis://localhost", Config())


def test_redis_bad_url() -> None:
    with pytest.raises(SettingError, match="REP_STORAGE"):
        RedisStorage.from_url("redis://:pw@host:notaport/0", Config())


def test_redis_keys_and_record_ttl(redis_server: RedisServer) -> None:
    config = Config(stale_max_age=1000.0, unreachable_wait=500.0)
    store = create_storage(Config(storage=redis_server.url), None)
    assert isinstance(store, RedisStorage)
    store.close()
    store = RedisStorage.from_url(redis_server.url, config)
    store.put("https://a.test", RECORD)
    assert store.acquire_lease("https://a.test", "p1", 30)
    client = store._client
    assert client.get("scrapy-rep:v1:lease:https://a.test") == b"p1"
    ttl_ms = client.pttl("scrapy-rep:v1:origin:https://a.test")
    assert 1500_000 < ttl_ms <= (1500 + 86_400) * 1000
    store.close()


def test_redis_wrong_type_key_is_a_miss(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    store = RedisStorage.from_url(redis_server.url, Config())
    store._client.flushdb()
    store._client.rpush(store.origin_key("https://a.test"), b"x")
    with caplog.at_level(logging.WARNING, logger=REDIS_LOGGER):
        assert store.get("https://a.test") is None
        assert store.get("https://a.test") is None
    assert len(ours(caplog)) == 1
    assert not store.degraded
    store.close()


def test_redis_outage_falls_back_and_recovers(
    private_redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    server = private_redis_server
    secret = server.password
    assert secret is not None and secret in server.url
    # reconnect_interval=0: probe on every call, so the test needs no sleeping.
    store = RedisStorage.from_url(server.url, Config(), reconnect_interval=0)
    assert secret not in store.describe()
    assert f"redis://:***@127.0.0.1:{server.port}/0" in store.describe()
    store.put("https://before.test", RECORD)
    assert store.get("https://before.test") == RECORD

    caplog.set_level(logging.DEBUG, logger=REDIS_LOGGER)
    server.stop()
    store.put("https://during.test", RECORD)
    for _ in range(5):
        assert store.get("https://during.test") == RECORD
        assert store.get("https://before.test") is None  # only Redis had it
    assert store.acquire_lease("https://x.test", "p1", 60)  # local lease now
    assert not store.acquire_lease("https://x.test", "p2", 60)
    store.release_lease("https://x.test", "p1")
    assert store.degraded
    assert "unreachable" in store.describe() and secret not in store.describe()
    warnings = [r for r in ours(caplog) if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]

    server.start()  # same port, empty data set
    assert store.get("https://during.test") == RECORD  # the outage-era copy survives
    assert not store.degraded
    store.put("https://after.test", RECORD)
    assert store._client.exists(store.origin_key("https://after.test"))
    assert store.acquire_lease("https://after.test", "p1", 60)
    assert not store.acquire_lease("https://after.test", "p2", 60)
    infos = [r for r in ours(caplog) if r.levelno == logging.INFO]
    assert len(infos) == 1 and "reachable again" in infos[0].getMessage()
    assert len([r for r in ours(caplog) if r.levelno >= logging.WARNING]) == 1
    assert secret not in caplog.text
    store.close()


def test_redis_unreachable_at_start_does_not_raise(
    caplog: pytest.LogCaptureFixture, refused_port: int
) -> None:
    url = f"redis://user:topsecret@127.0.0.1:{refused_port}/0"
    with caplog.at_level(logging.WARNING, logger=REDIS_LOGGER):
        store = RedisStorage.from_url(url, Config(), reconnect_interval=3600)
        store.put("https://a.test", RECORD)
        assert store.get("https://a.test") == RECORD
        assert store.acquire_lease("https://a.test", "p1", 60)
    assert len(ours(caplog)) == 1
    assert "topsecret" not in caplog.text and "user:***@" in caplog.text
    store.close()


def test_redis_writes_back_what_it_learned_during_an_outage(
    private_redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Records learned while Redis was down, and while it was back but the reconnection
    probe not yet due, reach Redis when the probe succeeds; a record another process
    stored meanwhile that is newer is kept."""
    server = private_redis_server
    store = RedisStorage.from_url(server.url, Config(), reconnect_interval=3600)
    other = redis.Redis.from_url(server.url)
    server.stop()
    store.put("https://during.test", RECORD)  # finds Redis down
    store.put("https://newer-elsewhere.test", RECORD)  # not even tried: probe not due
    assert store.degraded
    server.start()  # empty: no persistence
    store.put("https://before-probe.test", RECORD)  # Redis is back; the probe is not due
    newer = RECORD.evolve(fetched_at=RECORD.fetched_at + 60, body=b"User-agent: *\n")
    other.set(store.origin_key("https://newer-elsewhere.test"), pack_record(newer))
    assert not other.exists(store.origin_key("https://during.test"))

    store._next_probe = 0.0  # the probe comes due (instead of in an hour)
    with caplog.at_level(logging.INFO, logger=REDIS_LOGGER):
        assert store.get("https://during.test") == RECORD
    assert not store.degraded
    assert "writing back 3 origin(s)" in caplog.text
    for origin in ("https://during.test", "https://before-probe.test"):
        assert unpack_record(other.get(store.origin_key(origin))) == RECORD
        assert other.pttl(store.origin_key(origin)) > 0
    assert unpack_record(other.get(store.origin_key("https://newer-elsewhere.test"))) == newer
    assert store.get("https://newer-elsewhere.test") == newer
    assert len(store._fallback) == 0, "written back: Redis answers again"
    store.close()
    other.close()


def test_redis_close_writes_back(private_redis_server: RedisServer) -> None:
    server = private_redis_server
    store = RedisStorage.from_url(server.url, Config(), reconnect_interval=3600)
    server.stop()
    store.put("https://learned.test", RECORD)
    server.start()
    store.close()  # the crawl ends before any probe was due
    other = redis.Redis.from_url(server.url)
    assert unpack_record(other.get(RedisStorage.origin_key("https://learned.test"))) == RECORD
    other.close()


RESERVED = "Zq9#Xw/7?Yv@8:Uu%"
PIECES = ("Zq9", "Xw", "7?Y", "Yv@8", "Uu%")


@pytest.fixture
def reserved_password_server() -> Iterator[RedisServer]:
    yield from redis_helper.run_redis_server(password=RESERVED)


def test_redis_password_with_reserved_characters_is_never_shown(
    reserved_password_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Percent-encoded, the password works and is masked; written as is (so that
    urllib reads a piece of it as the port), the URL is refused with a masked error."""
    port = reserved_password_server.port
    good = f"redis://:{quote(RESERVED, safe='')}@127.0.0.1:{port}/0"
    store = RedisStorage.from_url(good, Config())
    store.put("https://a.test", RECORD)
    assert store.get("https://a.test") == RECORD and not store.degraded
    assert store.describe() == f"redis redis://:***@127.0.0.1:{port}/0"
    store.close()
    for raw in (
        f"redis://:{RESERVED}@127.0.0.1:{port}/0",
        f"redis://user:{RESERVED}@127.0.0.1:{port}/0",
        f"rediss://{RESERVED}@127.0.0.1:{port}",
        f"redis://127.0.0.1:{port}/0?password={RESERVED}",
    ):
        shown = mask_url(raw)
        assert not any(piece in shown for piece in PIECES), (raw, shown)
        with pytest.raises(SettingError) as info:
            create_storage(Config(storage=raw), None)
        assert not any(piece in str(info.value) for piece in PIECES), str(info.value)
    # an encoded but wrong password: Redis refuses, the warning shows no password
    wrong = f"redis://:{quote(RESERVED[::-1], safe='')}@127.0.0.1:{port}/0"
    with caplog.at_level(logging.DEBUG, logger=REDIS_LOGGER):
        store = RedisStorage.from_url(wrong, Config())
        assert store.get("https://a.test") is None
        store.close()
    assert caplog.text and not any(p in caplog.text or p[::-1] in caplog.text for p in PIECES)
