"""Settings are read once and validated; a bad value names its setting."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from scrapy_rep.policy.config import Config, SettingError
from scrapy_rep.policy.origin import origin_of, origin_of_memo


def test_defaults_follow_the_spec():
    config = Config.from_settings(Settings())
    assert config.max_size == 512_000
    assert config.fetch_timeout == 180.0  # DOWNLOAD_TIMEOUT
    assert config.max_redirects == 5
    assert config.retry_backoff == 10.0 and config.max_retry_backoff == 900.0
    assert config.unreachable_wait == 12 * 3600
    assert config.stale_max_age == 30 * 86400
    assert config.unreachable_fallback == "allow"
    assert (config.cache_ttl, config.min_ttl, config.max_ttl) == (86400, 60, 86400)
    assert config.crawl_delay is True and config.max_crawl_delay == 30
    assert config.storage == "sqlite"
    assert config.enforce is True
    assert config.obey is False  # Scrapy's own default for ROBOTSTXT_OBEY


def test_fetch_timeout_defaults_to_download_timeout():
    assert Config.from_settings(Settings({"DOWNLOAD_TIMEOUT": 7})).fetch_timeout == 7.0
    config = Config.from_settings(Settings({"DOWNLOAD_TIMEOUT": 7, "REP_FETCH_TIMEOUT": 2}))
    assert config.fetch_timeout == 2.0


def test_values_from_strings_as_on_the_command_line():
    config = Config.from_settings(
        Settings({"REP_ENFORCE": "false", "REP_CACHE_TTL": "3600", "REP_MAX_REDIRECTS": "3"})
    )
    assert (config.enforce, config.cache_ttl, config.max_redirects) == (False, 3600.0, 3)


def test_config_is_frozen():
    config = Config()
    with pytest.raises(AttributeError):
        config.cache_ttl = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("REP_CACHE_TTL", "abc"),
        ("REP_CACHE_TTL", 0),
        ("REP_CACHE_TTL", float("nan")),
        ("REP_MIN_TTL", -1),
        ("REP_MAX_TTL", 0),
        ("REP_FETCH_TIMEOUT", -3),
        ("REP_MAX_REDIRECTS", -1),
        ("REP_MAX_REDIRECTS", 2.5),
        ("REP_MAX_SIZE", 1000),  # RFC 9309 2.5: at least 500 KiB
        ("REP_MAX_SIZE", "big"),
        ("REP_RETRY_BACKOFF", 0),
        ("REP_UNREACHABLE_WAIT", "12h"),
        ("REP_STALE_MAX_AGE", -5),
        ("REP_UNREACHABLE_FALLBACK", "maybe"),
        ("REP_CRAWL_DELAY", "sometimes"),
        ("REP_MAX_CRAWL_DELAY", "x"),
        ("REP_ENFORCE", 7),
        ("REP_MEMORY_MAX_ORIGINS", 0),
        ("REP_STORAGE", 42),
        ("ROBOTSTXT_USER_AGENT", 42),
        ("ROBOTSTXT_OBEY", "perhaps"),
        ("DOWNLOAD_TIMEOUT", "slow"),
    ],
)
def test_bad_value_names_the_setting(name, value):
    with pytest.raises(SettingError, match=name):
        Config.from_settings(Settings({name: value}))


def test_inconsistent_bounds_name_both_settings():
    with pytest.raises(SettingError, match=r"REP_MIN_TTL.*REP_MAX_TTL"):
        Config.from_settings(Settings({"REP_MIN_TTL": 100, "REP_MAX_TTL": 50}))
    with pytest.raises(SettingError, match=r"REP_RETRY_BACKOFF.*REP_MAX_RETRY_BACKOFF"):
        Config.from_settings(Settings({"REP_RETRY_BACKOFF": 1000}))


def test_lease_settings():
    """Leases are short and renewed, whatever the fetch budget (docs/cluster.md, leases)."""
    config = Config.from_settings(Settings({"DOWNLOAD_TIMEOUT": 900}))
    assert (config.lease_ttl, config.lease_renew_every) == (30.0, 10.0)
    config = Config.from_settings(Settings({"REP_LEASE_TTL": 6, "REP_LEASE_RENEW_INTERVAL": 1}))
    assert (config.lease_ttl, config.lease_renew_every) == (6.0, 1.0)
    # the old name of the setting is still honoured
    assert Config.from_settings(Settings({"REP_LEASE_TIMEOUT": 3})).lease_ttl == 3.0
    with pytest.raises(SettingError, match="REP_LEASE_RENEW_INTERVAL"):
        Config.from_settings(Settings({"REP_LEASE_TTL": 5, "REP_LEASE_RENEW_INTERVAL": 5}))
    with pytest.raises(SettingError, match="REP_LEASE_TTL"):
        Config.from_settings(Settings({"REP_LEASE_TTL": 0}))


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("http://Example.COM/a", "http://example.com"),
        ("http://example.com:80/a", "http://example.com"),
        ("https://example.com:443/", "https://example.com"),
        ("https://example.com:80/", "https://example.com:80"),
        ("http://example.com:8080", "http://example.com:8080"),
        ("HTTP://example.com./x", "http://example.com"),
        ("http://müller.eu/", "http://xn--mller-kva.eu"),
        ("http://xn--mller-kva.eu/", "http://xn--mller-kva.eu"),
        ("http://[::1]:8080/", "http://[::1]:8080"),
        ("http://user:pw@host.test/", "http://host.test"),
        ("ftp://example.com/", None),
        ("data:text/plain,hi", None),
        ("file:///etc/passwd", None),
        ("http://example.com:99999/", None),
        ("http:///nohost", None),
    ],
)
def test_origin_normalisation(url, origin):
    assert origin_of(url) == origin
    # the middleware's memoised form (keyed on "scheme://authority") agrees, twice
    assert origin_of_memo(url) == origin
    assert origin_of_memo(url) == origin


def test_scheme_is_part_of_the_origin():
    assert origin_of("http://a.test/") != origin_of("https://a.test/")


@pytest.mark.parametrize(
    ("raw", "spec"),
    [
        (None, "sqlite"),
        ("SQLite", "sqlite"),
        (" memory ", "memory"),
        ("/srv/cache/x.sqlite", "sqlite:/srv/cache/x.sqlite"),  # a bare path: SQLite
        ("./x.db", "sqlite:./x.db"),
        ("cache.sqlite3", "sqlite:cache.sqlite3"),
        ("~/rep.sqlite", "sqlite:~/rep.sqlite"),
        ("sqlite:///abs/x.db", "sqlite:///abs/x.db"),
        ("redis://localhost:6379/0", "redis://localhost:6379/0"),
        ("myproject.stores.MyStore", "myproject.stores.MyStore"),
    ],
)
def test_storage_spec_forms(raw, spec):
    assert Config.from_settings(Settings({"REP_STORAGE": raw})).storage == spec


def test_clock_from_a_callable_or_an_import_path():
    import time

    assert Config.from_settings(Settings()).clock is None
    assert Config.from_settings(Settings({"REP_CLOCK": "time.time"})).clock is time.time
    assert Config.from_settings(Settings({"REP_CLOCK": time.monotonic})).clock is time.monotonic


@pytest.mark.parametrize("raw", ["no_such_module_x.now", "time.no_such_clock", "now", 3])
def test_clock_rejected(raw):
    with pytest.raises(SettingError, match="REP_CLOCK"):
        Config.from_settings(Settings({"REP_CLOCK": raw}))


@pytest.mark.parametrize("raw", ["carrier-pigeon://x", "mem", "sqlite:", "sqlite://", 3])
def test_storage_spec_rejected(raw):
    with pytest.raises(SettingError, match="REP_STORAGE"):
        Config.from_settings(Settings({"REP_STORAGE": raw}))


def test_repr_keeps_a_redis_password_out():
    config = Config.from_settings(Settings({"REP_STORAGE": "redis://:s3cret@127.0.0.1:6379/0"}))
    assert "s3cret" not in repr(config)
    assert config.storage == "redis://:s3cret@127.0.0.1:6379/0"
