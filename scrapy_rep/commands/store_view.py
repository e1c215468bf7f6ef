"""The configured store, as ``scrapy robots`` sees it: read without writing, except for
``--refresh`` and ``--forget``, which say so.

Reading never changes a crawl's state: an SQLite file is opened read-only and one that
does not exist is not created; other stores are only asked ``get``. A storage place the
crawl would refuse (storage.factory.check_sqlite_place) is refused here too.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from scrapy_rep.commands.output import StoredState
from scrapy_rep.policy.config import SettingError
from scrapy_rep.policy.records import OriginRecord

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from scrapy_rep.policy.config import Config
    from scrapy_rep.storage.base import RobotsStorage


def store_configured(settings: BaseSettings) -> bool:
    """REP_STORAGE is set (project settings or -s), or we are inside a project, where
    crawls use the default SQLite store."""
    from scrapy.utils.project import inside_project

    return settings.getpriority("REP_STORAGE") is not None or inside_project()


def read_store(
    settings: BaseSettings, config: Config, origins: list[str]
) -> dict[str, StoredState] | None:
    """What the configured store holds per origin; None when no store is configured."""
    if not store_configured(settings):
        return None
    kind = config.store_place.kind
    if kind == "memory":
        state = StoredState("memory", note="a memory store keeps nothing between runs")
        return dict.fromkeys(origins, state)
    if kind == "sqlite":
        return _read_sqlite(config, origins)
    return _read_other(settings, config, origins)


def _read_sqlite(config: Config, origins: list[str]) -> dict[str, StoredState]:
    from scrapy_rep.storage.codec import record_limit
    from scrapy_rep.storage.factory import check_sqlite_place
    from scrapy_rep.storage.sqlite_store import SqliteStorage, read_records_read_only

    spec, place = config.storage, config.store_place
    path = SqliteStorage.path_of(place, create=False)
    if path is None:
        state = StoredState("sqlite", note="no project data directory")
        return dict.fromkeys(origins, state)
    if place.location or path.parent.exists():
        # As the crawl would refuse it; only the default's data dir is made by Scrapy.
        check_sqlite_place(path, spec)
    description = f"sqlite {path}"
    if not path.exists():
        # Opening it with SqliteStorage would create it: the command must not.
        state = StoredState(description, note=f"{path} does not exist")
        return dict.fromkeys(origins, state)
    try:
        records = read_records_read_only(path, origins, record_limit(config.max_size))
    except (sqlite3.Error, ValueError, OverflowError) as exc:
        state = StoredState(description, note=f"cannot read the store: {exc}")
        return dict.fromkeys(origins, state)
    result: dict[str, StoredState] = {}
    for origin in origins:
        if origin not in records:
            result[origin] = StoredState(description)
        else:
            record = records[origin]
            result[origin] = StoredState(description, record, "" if record else "unreadable entry")
    return result


def _read_other(
    settings: BaseSettings, config: Config, origins: list[str]
) -> dict[str, StoredState]:
    """Redis or a custom class: through the store interface, calling only ``get``."""
    from scrapy_rep.storage.factory import create_storage

    try:
        store = create_storage(config, settings)
    except Exception as exc:  # a broken store must not hide the robots.txt verdicts
        # Never the raw setting: a redis URL holds a password (masked whatever it holds).
        from scrapy_rep.storage.redis_url import mask_url, scrub, secrets_of

        secret_free = scrub(str(exc), secrets_of(config.storage))
        spec = config.storage
        shown = mask_url(spec) if config.store_place.kind == "redis" else spec
        state = StoredState(shown, note=f"cannot open the store: {secret_free}")
        return dict.fromkeys(origins, state)
    try:
        found = {origin: store.get(origin) for origin in origins}
        description = store.describe()
        if store.degraded:
            # Redis answers from an empty process-local fallback during an outage: say
            # so, rather than report that the store holds nothing.
            state = StoredState(description, note="the store is unreachable")
            return dict.fromkeys(origins, state)
        return {origin: StoredState(description, found[origin]) for origin in origins}
    finally:
        store.close()


def open_for_writing(settings: BaseSettings, config: Config, option: str) -> RobotsStorage:
    """The store a crawl would use, opened as the crawl opens it (--refresh, --forget)."""
    from scrapy_rep.storage.factory import create_storage

    if not store_configured(settings):
        raise SettingError(
            f"{option} needs a store: set REP_STORAGE (-s REP_STORAGE=...) or run it "
            "inside the Scrapy project whose store it is"
        )
    if config.store_place.kind == "memory":
        raise SettingError(f"{option}: a memory store keeps nothing between runs")
    return create_storage(config, settings)


def forget(store: RobotsStorage, origin: str) -> OriginRecord | None:
    """Remove what ``store`` holds for ``origin``; returns what it held.

    ``RobotsStorage.forget``: by default an empty record, which a crawl reads as unknown
    (it fetches robots.txt first); a store may delete the entry for real.
    """
    held = store.get(origin)
    store.forget(origin)
    return held
