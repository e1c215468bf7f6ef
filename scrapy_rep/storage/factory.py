"""``REP_STORAGE`` -> a store. Kept apart from the backends, so that none of them
imports the factory that creates them (imports point down only)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy_rep.policy.config import Config, SettingError
from scrapy_rep.storage.base import (
    BuiltFromConfig,
    ForeignStorage,
    MemoryStorage,
    RobotsStorage,
    StorageProtocol,
    record_limit,
)

if TYPE_CHECKING:
    from collections.abc import Mapping


# How long a crawl retries a store it cannot reach at start before it does not start:
# a Redis that is restarting gets a few seconds, a wrong host or port is an error.
START_REACH_WAIT = 3.0


def create_storage(
    config: Config, settings: Mapping[str, Any] | None = None, *, reach_within: float = 0.0
) -> RobotsStorage:
    """Build the store ``REP_STORAGE`` names (``config.store_place``). ``reach_within`` > 0
    (a crawl starting): a Redis store that does not answer within that many seconds is a
    ``SettingError``; once running, an outage degrades instead (nothing lost, one WARNING)."""
    place = config.store_place
    if place.kind == "memory":
        return MemoryStorage(config.memory_max_origins)
    if place.kind == "sqlite":
        from scrapy_rep.storage.sqlite_store import SqliteStorage

        path = SqliteStorage.path_of(place)  # "sqlite": makes Scrapy's data dir
        assert path is not None
        check_sqlite_place(path, config.storage)
        return SqliteStorage(
            path,
            fallback_max_origins=config.memory_max_origins,
            record_limit=record_limit(config.max_size),
        )
    if place.kind == "redis":
        from scrapy_rep.storage.redis_store import RedisStorage

        store = RedisStorage.from_url(place.location, config)
        if reach_within > 0:
            store.wait_until_reachable(reach_within)
        return store
    return _custom_storage(place.location, config, settings)


def _custom_storage(path: str, config: Config, settings: Mapping[str, Any] | None) -> RobotsStorage:
    """A ``REP_STORAGE`` class: a ``RobotsStorage`` subclass, or a class of the older
    shape (``StorageProtocol``, no base class), wrapped so that it gets the defaults."""
    from scrapy.utils.misc import load_object

    try:
        cls = load_object(path)
    except (ImportError, NameError, ValueError, AttributeError) as exc:
        raise SettingError(f"REP_STORAGE: cannot import {path!r}: {exc}") from None
    # A RobotsStorage subclass has from_config (the base class's default at least).
    store = cls.from_config(config, settings) if isinstance(cls, BuiltFromConfig) else cls()
    if isinstance(store, RobotsStorage):
        return store
    if not isinstance(store, StorageProtocol):
        raise SettingError(f"REP_STORAGE: {path!r} does not implement RobotsStorage")
    return ForeignStorage(store)


def check_sqlite_place(path: Path, spec: str) -> None:
    """Raise ``SettingError`` naming ``REP_STORAGE`` when a SQLite store cannot live at
    ``path``: the crawl does not start (docs/storage.md, "Storage path problems"). A missing
    directory is not created: a typo would otherwise build a tree at ``/``."""
    parent = path.parent
    problem: str | None = None
    if path.is_dir():
        problem = f"{path} is a directory; name a file inside it"
    elif not parent.is_dir():
        problem = f"the directory {parent} does not exist; create it first"
        for ancestor in (parent, *parent.parents):
            if ancestor.exists() and not ancestor.is_dir():
                problem = f"{ancestor} is a file, not a directory"
                break
    elif path.exists() and not path.is_file():
        problem = f"{path} is not a regular file"
    elif path.exists() and not os.access(path, os.R_OK | os.W_OK):
        problem = f"{path} is not readable and writable"
    elif not path.exists():
        try:
            # Can a file be made here? An unnamed temporary file leaves nothing behind.
            with tempfile.TemporaryFile(dir=parent):
                pass
        except OSError as exc:
            problem = f"cannot create a file in {parent} ({exc.strerror or exc})"
    if problem is not None:
        raise SettingError(f"REP_STORAGE = {spec!r}: {problem}")
