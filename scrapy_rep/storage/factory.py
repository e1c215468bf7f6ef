"""``REP_STORAGE`` -> a store. Kept apart from the backends so that none of them
imports the factory that creates them (the layout issue: arrows point down only)."""

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
)
from scrapy_rep.storage.codec import record_limit

if TYPE_CHECKING:
    from collections.abc import Mapping


def create_storage(config: Config, settings: Mapping[str, Any] | None = None) -> RobotsStorage:
    """Build the store ``REP_STORAGE`` names (``config.store_place``, parsed once)."""
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

        return RedisStorage.from_url(place.location, config)
    return _custom_storage(place.location, config, settings)


def _custom_storage(path: str, config: Config, settings: Mapping[str, Any] | None) -> RobotsStorage:
    """A ``REP_STORAGE`` class: a ``RobotsStorage`` subclass, or a class of the older
    shape (``StorageProtocol``, no base class), wrapped so that it gets the defaults."""
    from scrapy.utils.misc import load_object

    try:
        cls = load_object(path)
    except (ImportError, NameError, ValueError, AttributeError) as exc:
        raise SettingError(f"REP_STORAGE: cannot import {path!r}: {exc}") from None
    if isinstance(cls, type) and issubclass(cls, RobotsStorage):
        return cls.from_config(config, settings)
    store = cls.from_config(config, settings) if isinstance(cls, BuiltFromConfig) else cls()
    if isinstance(store, RobotsStorage):
        return store
    if not isinstance(store, StorageProtocol):
        raise SettingError(f"REP_STORAGE: {path!r} does not implement RobotsStorage")
    return ForeignStorage(store)


def sqlite_place_problem(path: Path) -> str | None:
    """Why a SQLite store cannot live at ``path``, or None when it can.

    One rule for every place problem (docs/storage.md, "Storage path problems"): the
    crawl does not start. A missing directory is not created (a typo would otherwise
    build a tree at ``/``), a file in the way or a place where no file can be made
    (``/proc``, a read-only mount) is named. Damage to an existing store is another
    matter: it is moved aside and replaced (sqlite_store), and failures once running
    degrade to process memory.
    """
    if path.is_dir():
        return f"{path} is a directory; name a file inside it"
    parent = path.parent
    if not parent.is_dir():
        for ancestor in (parent, *parent.parents):
            if ancestor.exists() and not ancestor.is_dir():
                return f"{ancestor} is a file, not a directory"
        return f"the directory {parent} does not exist; create it first"
    if path.exists():
        if not path.is_file():
            return f"{path} is not a regular file"
        if not os.access(path, os.R_OK | os.W_OK):
            return f"{path} is not readable and writable"
        return None
    try:
        # Can a file be made here? An unnamed temporary file leaves nothing behind.
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as exc:
        return f"cannot create a file in {parent} ({exc.strerror or exc})"
    return None


def check_sqlite_place(path: Path, spec: str) -> None:
    """Raise ``SettingError`` naming ``REP_STORAGE`` when ``path`` cannot hold the store."""
    problem = sqlite_place_problem(path)
    if problem is not None:
        raise SettingError(f"REP_STORAGE = {spec!r}: {problem}")
