"""What a configured store holds per origin, read without writing (for ``scrapy robots``).

The command must never change a crawl's state: an SQLite file is opened read-only and
one that does not exist is not created; other stores are only asked ``get``.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from scrapy_rep.commands.output import StoredState

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from scrapy_rep.policy.config import Config


def read_store(
    settings: BaseSettings, config: Config, origins: list[str]
) -> dict[str, StoredState] | None:
    """What the configured store holds per origin; None when no store is configured.

    A store counts as configured when REP_STORAGE is set (project settings or -s), or
    inside a project, where crawls use the default SQLite store.
    """
    from scrapy.utils.project import inside_project

    if settings.getpriority("REP_STORAGE") is None and not inside_project():
        return None
    spec = config.storage
    lowered = spec.lower()
    if lowered == "memory":
        state = StoredState("memory", note="a memory store keeps nothing between runs")
        return dict.fromkeys(origins, state)
    if lowered == "sqlite" or lowered.startswith("sqlite:"):
        return _read_sqlite(spec, config, origins)
    return _read_other(settings, config, origins)


def _read_sqlite(spec: str, config: Config, origins: list[str]) -> dict[str, StoredState]:
    from scrapy_rep.storage.codec import record_limit
    from scrapy_rep.storage.sqlite_store import SqliteStorage, read_records_read_only

    path = SqliteStorage.path_from_spec(spec, create=False)
    if path is None:
        state = StoredState("sqlite", note="no project data directory")
        return dict.fromkeys(origins, state)
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
        shown = mask_url(spec) if "://" in spec else spec
        state = StoredState(shown, note=f"cannot open the store: {secret_free}")
        return dict.fromkeys(origins, state)
    try:
        found = {origin: store.get(origin) for origin in origins}
        description = store.describe()
        if getattr(store, "degraded", False):
            # Redis answers from an empty process-local fallback during an outage: say
            # so, rather than report that the store holds nothing.
            state = StoredState(description, note="the store is unreachable")
            return dict.fromkeys(origins, state)
        return {origin: StoredState(description, found[origin]) for origin in origins}
    finally:
        store.close()
