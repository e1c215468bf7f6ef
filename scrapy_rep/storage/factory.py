"""``REP_STORAGE`` -> a store. Kept apart from the backends so that none of them
imports the factory that creates them (the layout issue: arrows point down only)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy_rep.policy.config import Config, SettingError
from scrapy_rep.storage.base import MemoryStorage, RobotsStorage
from scrapy_rep.storage.codec import record_limit

if TYPE_CHECKING:
    from collections.abc import Mapping


def create_storage(config: Config, settings: Mapping[str, Any] | None = None) -> RobotsStorage:
    """Build the store ``REP_STORAGE`` names."""
    spec = config.storage
    lowered = spec.lower()
    if lowered == "memory":
        return MemoryStorage(config.memory_max_origins)
    if lowered == "sqlite" or lowered.startswith("sqlite:"):
        from scrapy_rep.storage.sqlite_store import SqliteStorage

        return SqliteStorage.from_spec(
            spec,
            settings,
            fallback_max_origins=config.memory_max_origins,
            record_limit=record_limit(config.max_size),
        )
    if lowered.startswith(("redis://", "rediss://", "unix://")):
        from scrapy_rep.storage.redis_store import RedisStorage

        return RedisStorage.from_url(spec, config)
    if "." in spec and "/" not in spec:
        from scrapy.utils.misc import load_object

        try:
            cls = load_object(spec)
        except (ImportError, NameError, ValueError, AttributeError) as exc:
            raise SettingError(f"REP_STORAGE: cannot import {spec!r}: {exc}") from None
        store = cls.from_config(config, settings) if hasattr(cls, "from_config") else cls()
        if not isinstance(store, RobotsStorage):
            raise SettingError(f"REP_STORAGE: {spec!r} does not implement RobotsStorage")
        return store
    raise SettingError(
        "REP_STORAGE must be 'sqlite', 'sqlite:PATH', 'memory', a redis:// URL or a class "
        f"import path; got {spec!r}"
    )
