"""The cluster settings: REP_CLUSTER_HEARTBEAT and REP_DURABLE_WAITING, and which stores
get a durable ledger and cluster-wide Crawl-delay turns."""

from __future__ import annotations

from pathlib import Path

import pytest
import scrapy
from scrapy.utils.test import get_crawler

from scrapy_rep.crawl.durable_waiting import (
    StoreWaiting,
    make_durable_waiting,
    make_store_waiting,
    waiting_fate_line,
)
from scrapy_rep.policy.config import Config, SettingError


class NamedSpider(scrapy.Spider):
    name = "named"


def test_heartbeat_default_and_validation() -> None:
    assert Config.from_settings({}).cluster_heartbeat == 30.0
    assert Config.from_settings({"REP_CLUSTER_HEARTBEAT": "2.5"}).cluster_heartbeat == 2.5
    for bad in ("0", "-1", "soon"):
        with pytest.raises(SettingError, match="REP_CLUSTER_HEARTBEAT"):
            Config.from_settings({"REP_CLUSTER_HEARTBEAT": bad})


def test_durable_waiting_default_and_validation() -> None:
    assert Config.from_settings({}).durable_waiting is None  # auto: where the crawl persists
    assert Config.from_settings({"REP_DURABLE_WAITING": ""}).durable_waiting is None
    assert Config.from_settings({"REP_DURABLE_WAITING": "false"}).durable_waiting is False
    assert Config.from_settings({"REP_DURABLE_WAITING": "True"}).durable_waiting is True
    with pytest.raises(SettingError, match="REP_DURABLE_WAITING"):
        Config.from_settings({"REP_DURABLE_WAITING": "sometimes"})


def test_which_stores_get_a_durable_ledger(tmp_path: Path) -> None:
    crawler = get_crawler(NamedSpider, {})
    sqlite = Config.from_settings({"REP_STORAGE": f"sqlite:{tmp_path / 's.db'}"})
    ledger = make_store_waiting(crawler, sqlite)
    assert isinstance(ledger, StoreWaiting)
    ledger.close(handed_back=False)
    assert (tmp_path / "s.db.cluster").exists()  # beside the store, not inside it
    assert make_store_waiting(crawler, Config.from_settings({"REP_STORAGE": "memory"})) is None
    off = Config.from_settings(
        {"REP_STORAGE": f"sqlite:{tmp_path / 's.db'}", "REP_DURABLE_WAITING": False}
    )
    assert make_store_waiting(crawler, off) is None


@pytest.mark.parametrize(
    ("settings", "durable"),
    [
        ({}, False),  # the default: a crawl that starts afresh each run keeps nothing
        ({"REP_DURABLE_WAITING": True}, True),
        ({"JOBDIR": "job"}, True),
        ({"JOBDIR": "job", "REP_DURABLE_WAITING": False}, False),
        (
            {"SCHEDULER": "scrapy_redis.scheduler.Scheduler", "SCHEDULER_PERSIST": True},
            True,
        ),
        ({"SCHEDULER": "scrapy_redis.scheduler.Scheduler", "SCHEDULER_PERSIST": False}, False),
        ({"SCHEDULER_PERSIST": True}, False),  # Scrapy's own scheduler does not read it
    ],
)
def test_waiting_requests_outlive_the_run_only_where_the_crawl_persists(
    tmp_path: Path, settings: dict[str, object], durable: bool
) -> None:
    """REP_DURABLE_WAITING unset: the ledger is durable exactly when the crawl persists
    (JOBDIR, a persistent scheduler); True or False is the user's explicit choice."""
    store = {"REP_STORAGE": f"sqlite:{tmp_path / 's.db'}"}
    crawler = get_crawler(NamedSpider, {**store, **settings})
    config = Config.from_settings({**store, **settings})
    ledger = make_durable_waiting(crawler, config, None)
    try:
        assert ledger.durable is durable
        line = waiting_fate_line(config, crawler.settings, ledger)
        assert ("outlive this run" in line) is (durable or "JOBDIR" in settings)
    finally:
        ledger.close(handed_back=False)
