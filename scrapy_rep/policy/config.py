"""All scrapy-rep settings, read once into a frozen, validated ``Config``.

Every setting is read here and nowhere else. A bad value raises ``SettingError``,
which names the setting, at start-up rather than half-way through a crawl.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scrapy_rep.robotstxt._usage import LABELS

# RFC 9309 section 2.5: crawlers MUST parse at least 500 KiB.
RFC_MIN_PARSE_SIZE = 512_000
DAY = 86_400.0


class SettingError(ValueError):
    """A scrapy-rep (or related Scrapy) setting has a value we cannot use."""


def _number(
    settings: Mapping[str, Any],
    name: str,
    default: float,
    *,
    minimum: float = 0.0,
    strictly_positive: bool = False,
) -> float:
    raw = settings.get(name)
    if raw is None or raw == "":
        return default
    if isinstance(raw, bool):
        raise SettingError(f"{name} must be a number of seconds, got {raw!r}")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise SettingError(f"{name} must be a number, got {raw!r}") from None
    if math.isnan(value) or math.isinf(value):
        raise SettingError(f"{name} must be a finite number, got {raw!r}")
    if value < minimum or (strictly_positive and value <= 0):
        bound = f"> {minimum:g}" if strictly_positive else f">= {minimum:g}"
        raise SettingError(f"{name} must be {bound}, got {raw!r}")
    return value


def _integer(settings: Mapping[str, Any], name: str, default: int, *, minimum: int) -> int:
    raw = settings.get(name)
    if raw is None or raw == "":
        return default
    if isinstance(raw, bool):
        raise SettingError(f"{name} must be an integer, got {raw!r}")
    try:
        value = int(raw)
        if isinstance(raw, float) and raw != value:
            raise ValueError
    except (TypeError, ValueError):
        raise SettingError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise SettingError(f"{name} must be >= {minimum}, got {raw!r}")
    return value


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _boolean(settings: Mapping[str, Any], name: str, default: bool) -> bool:
    raw = settings.get(name)
    if raw is None:
        return default
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int) and raw in (0, 1):
        return bool(raw)
    if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
        return raw.strip().lower() in _TRUE
    raise SettingError(f"{name} must be True or False, got {raw!r}")


def _optional_boolean(settings: Mapping[str, Any], name: str) -> bool | None:
    """True, False, or None when unset (or set to None or ""): the component decides."""
    raw = settings.get(name)
    if raw is None or (isinstance(raw, str) and raw.strip() == ""):
        return None
    return _boolean(settings, name, False)


def _choice(settings: Mapping[str, Any], name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = settings.get(name)
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value not in choices:
        raise SettingError(f"{name} must be one of {', '.join(choices)}; got {raw!r}")
    return value


def _optional_str(settings: Mapping[str, Any], name: str) -> str | None:
    raw = settings.get(name)
    if raw is None or raw == "":
        return None
    if isinstance(raw, bytes):
        return raw.decode("utf-8", "replace")
    if not isinstance(raw, str):
        raise SettingError(f"{name} must be a string, got {raw!r}")
    return raw


def _clock(settings: Mapping[str, Any], name: str) -> Callable[[], float] | None:
    """A callable, or the import path of one, that returns epoch seconds."""
    raw = settings.get(name)
    if raw is None or raw == "":
        return None
    clock = raw
    if isinstance(raw, str):
        module, _, attribute = raw.strip().rpartition(".")
        if not module:
            raise SettingError(f"{name} must be a callable or its import path, got {raw!r}")
        try:
            clock = getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError, ValueError) as exc:
            raise SettingError(f"{name}: cannot import {raw!r}: {exc}") from None
    if not callable(clock):
        raise SettingError(f"{name} must be a callable returning epoch seconds, got {raw!r}")
    return clock  # type: ignore[no-any-return]


# A class import path (``mypackage.stores.MyStore``): dotted identifiers only.
_IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
# File names that are SQLite files, not modules, even without a slash (``cache.sqlite``).
_SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
STORAGE_FORMS = (
    "'sqlite' (the project data dir), 'sqlite:PATH', a file path ('/path/x.sqlite', "
    "'./x.sqlite'), 'memory', a redis://, rediss:// or unix:// URL, or a class import path"
)


def storage_spec(raw: Any) -> str:
    """``REP_STORAGE`` in one canonical form, or ``SettingError``.

    A bare file path (what most users type) is a SQLite path: anything with a slash,
    starting with ``~`` or ``.``, or ending in ``.sqlite``, ``.sqlite3`` or ``.db``. It
    becomes ``sqlite:PATH``, so every reader (the crawl and ``scrapy robots``) sees one
    spelling, and ``StorePlace.parse`` reads it once. Whether the file can be opened is the
    store's business (storage.factory).
    """
    if raw is None or raw == "":
        return "sqlite"
    if not isinstance(raw, str):
        raise SettingError(f"REP_STORAGE must be a string, got {raw!r}")
    spec = raw.strip()
    lowered = spec.lower()
    if lowered in ("sqlite", "memory"):
        return lowered
    if lowered.startswith("sqlite:"):
        rest = spec[len("sqlite:") :]
        if rest in ("", "//", "///"):
            raise SettingError(f"REP_STORAGE: no file name in {raw!r}")
        return "sqlite:" + rest
    if lowered.startswith(("redis://", "rediss://", "unix://")):
        return spec
    if "://" in spec:  # a URL of a scheme we do not know: never a file path
        raise SettingError(f"REP_STORAGE must be {STORAGE_FORMS}; got {raw!r}")
    if "/" in spec or "\\" in spec or spec.startswith(("~", ".")):
        return "sqlite:" + spec
    if lowered.endswith(_SQLITE_SUFFIXES):
        return "sqlite:" + spec
    if _IMPORT_PATH.fullmatch(spec):
        return spec
    raise SettingError(f"REP_STORAGE must be {STORAGE_FORMS}; got {raw!r}")


@dataclass(frozen=True, slots=True)
class StorePlace:
    """``REP_STORAGE`` parsed once: which kind of store, and where it is.

    ``kind`` is ``memory``, ``sqlite``, ``redis`` or ``class``; ``location`` is the
    SQLite file as written after ``sqlite:`` ("" for the project data dir), the Redis
    URL (with its password: never log it, ``describe()`` masks it) or the class import
    path. The storage factory and the crawl read these and never the setting's text.
    """

    kind: str
    location: str = field(default="", repr=False)

    @property
    def shared(self) -> bool:
        """A store that other processes can see (Redis; SQLite for one machine)."""
        return self.kind in ("sqlite", "redis")

    @classmethod
    def parse(cls, spec: str) -> StorePlace:
        """The place ``spec`` (``storage_spec``'s canonical form) names."""
        lowered = spec.lower()
        if lowered == "memory":
            return cls("memory")
        if lowered == "sqlite" or lowered.startswith("sqlite:"):
            return cls("sqlite", spec.partition(":")[2])
        if lowered.startswith(("redis://", "rediss://", "unix://")):
            return cls("redis", spec)
        if _IMPORT_PATH.fullmatch(spec):
            return cls("class", spec)
        raise SettingError(f"REP_STORAGE must be {STORAGE_FORMS}; got {spec!r}")


# REP_USAGE_MODE: what the crawl does with usage preferences (see crawl/usage.py).
USAGE_MODES = ("off", "record", "audit", "enforce")
# REP_PAGE_MODE: what the crawl does with page-level directives (page_directives.py).
PAGE_MODES = ("off", "record", "audit", "enforce")


RECORD_PLACEHOLDERS = {"name": "spider", "time": "2026-01-01T00-00-00", "pid": 1}


def record_path_template(raw: Any) -> str | None:
    """``REP_RECORD``: unset, or a path whose only placeholders are ``%(name)s``,
    ``%(time)s`` and ``%(pid)s`` (as Scrapy's FEEDS URIs spell them)."""
    if raw is None or raw == "" or raw is False:
        return None
    if hasattr(raw, "__fspath__"):
        raw = str(raw)
    if not isinstance(raw, str):
        raise SettingError(f"REP_RECORD must be a file path, got {raw!r}")
    try:
        raw % RECORD_PLACEHOLDERS
    except (KeyError, ValueError, TypeError) as exc:
        raise SettingError(
            f"REP_RECORD: {raw!r} may only use the placeholders %(name)s, %(time)s and "
            f"%(pid)s (write %% for a literal %): {exc!r}"
        ) from None
    return raw


def purposes_from(raw: Any, name: str = "REP_PURPOSES") -> tuple[str, ...]:
    """Validated purposes: a list of labels, or one string of comma-separated labels."""
    if raw is None or raw == "":
        return ()
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    items = raw.split(",") if isinstance(raw, str) else raw
    if not isinstance(items, (list, tuple, set, frozenset)):
        raise SettingError(f"{name} must be a list of purposes, got {raw!r}")
    purposes: list[str] = []
    for item in items:
        label = item.strip().lower() if isinstance(item, str) else item
        if label not in LABELS:
            hint = " (Content-Signal's ai-train is train-ai)" if label == "ai-train" else ""
            raise SettingError(
                f"{name}: unknown purpose {item!r}{hint}; known: {', '.join(LABELS)}"
            )
        if label not in purposes:
            purposes.append(label)
    return tuple(purposes)


@dataclass(frozen=True, slots=True)
class Config:
    """Every setting scrapy-rep reads, with its default. See docs/settings.md for each."""

    obey: bool = True
    enforce: bool = True
    robotstxt_user_agent: str | None = None
    user_agent: str = "Scrapy"
    max_size: int = RFC_MIN_PARSE_SIZE
    fetch_timeout: float = 180.0
    max_redirects: int = 5
    retry_backoff: float = 10.0
    max_retry_backoff: float = 900.0
    unreachable_wait: float = 12 * 3600.0
    stale_max_age: float = 30 * DAY
    unreachable_fallback: str = "allow"
    cache_ttl: float = DAY
    min_ttl: float = 60.0
    max_ttl: float = DAY
    crawl_delay: bool = True
    max_crawl_delay: float = 30.0
    # A Redis URL may carry a password: keep it out of repr(config), which a log
    # line or a traceback may print (the store modules mask it where they log it).
    storage: str = field(default="sqlite", repr=False)
    # ``storage`` parsed (set from it by __post_init__): what every reader uses.
    store_place: StorePlace = field(init=False, repr=False, compare=False)
    memory_max_origins: int = 100_000
    # Estimated bytes of robots.txt copies (bodies and parsed rules) that origins keep in
    # RAM; beyond it the least recently used idle origins drop theirs and read the store
    # again on their next request. 64 MiB: about 8,000 origins of the corpus's mean size
    # (4 KB), 30,000 of its median; the runtimes themselves stay bounded by count.
    memory_max_bytes: int = 64 * 2**20
    # Fetch leases in a shared store (docs/cluster.md): a lease lasts
    # ``lease_ttl`` seconds and the running fetch renews it every
    # ``lease_renew_every``, so a holder that dies blocks its origin for at most
    # ``lease_ttl`` whatever DOWNLOAD_TIMEOUT is.
    lease_ttl: float = 30.0
    lease_renew_interval: float = 0.0  # 0 = a third of lease_ttl
    clock: Callable[[], float] | None = None  # REP_CLOCK; None = time.time
    purposes: tuple[str, ...] = ()  # REP_PURPOSES: what the crawl uses content for
    usage_mode: str = "record"  # REP_USAGE_MODE, one of USAGE_MODES
    page_mode: str = "record"  # REP_PAGE_MODE, one of PAGE_MODES
    # How long a spider with nothing to do but wait on robots.txt stays open: 25 min, so
    # a batch crawl ends within 30 min of its last other work (idle checks run every 5 s).
    idle_wait: float = 1500.0
    # Held requests kept in memory (about 1 KB each, so about 100 MB at the bound);
    # beyond this they spill to disk (Scrapy's disk queues, about 230 us each).
    memory_max_held: int = 100_000
    # robots.txt fetches in flight at once: CONCURRENT_REQUESTS (engine.download_async
    # bypasses the engine's own limit: it is not counted by the scheduler's slots).
    fetch_concurrency: int = 16
    # How often the "still waiting" INFO line may repeat: LOGSTATS_INTERVAL (0 = never).
    logstats_interval: float = 60.0
    # how long a crashed process's parked requests wait before another adopts them
    cluster_heartbeat: float = 30.0
    # Waiting requests also recorded in a shared store (Redis, SQLite), so a kill -9
    # loses none and the next run adopts what a stopped one kept. None (the default):
    # only where the crawl itself persists (JOBDIR, a persistent scheduler), as Scrapy
    # keeps its own queue only there (docs/waiting.md "When the spider closes").
    durable_waiting: bool | None = None
    # REP_RECORD: where the compliance record goes (docs/record.md), a path that may hold
    # %(name)s, %(time)s and %(pid)s; None = no record
    record: str | None = None

    def __post_init__(self) -> None:
        # Frozen: the derived field is set the way dataclasses set fields themselves.
        object.__setattr__(self, "store_place", StorePlace.parse(self.storage))

    @property
    def lease_renew_every(self) -> float:
        """Seconds between renewals: a third of the lease, so two renewals in a row
        can fail (a slow store, a busy reactor) before the lease runs out."""
        if self.lease_renew_interval > 0:
            return min(self.lease_renew_interval, self.lease_ttl)
        return self.lease_ttl / 3

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Config:
        """Read and validate. ``settings`` is Scrapy ``Settings`` or any mapping."""
        download_timeout = _number(settings, "DOWNLOAD_TIMEOUT", 180.0, strictly_positive=True)
        min_ttl = _number(settings, "REP_MIN_TTL", 60.0)
        max_ttl = _number(settings, "REP_MAX_TTL", DAY, strictly_positive=True)
        if min_ttl > max_ttl:
            raise SettingError(
                f"REP_MIN_TTL ({min_ttl:g}) must not exceed REP_MAX_TTL ({max_ttl:g})"
            )
        backoff = _number(settings, "REP_RETRY_BACKOFF", 10.0, strictly_positive=True)
        max_backoff = _number(settings, "REP_MAX_RETRY_BACKOFF", 900.0, strictly_positive=True)
        if backoff > max_backoff:
            raise SettingError(
                f"REP_RETRY_BACKOFF ({backoff:g}) must not exceed REP_MAX_RETRY_BACKOFF "
                f"({max_backoff:g})"
            )
        storage = storage_spec(settings.get("REP_STORAGE"))
        user_agent = _optional_str(settings, "USER_AGENT") or "Scrapy"
        # REP_LEASE_TIMEOUT is the old name of REP_LEASE_TTL (then a lease was never
        # renewed); it is still honoured when REP_LEASE_TTL is not set.
        lease_ttl = _number(
            settings,
            "REP_LEASE_TTL",
            _number(settings, "REP_LEASE_TIMEOUT", 30.0, strictly_positive=True),
            strictly_positive=True,
        )
        lease_renew = _number(settings, "REP_LEASE_RENEW_INTERVAL", 0.0)
        if lease_renew >= lease_ttl:
            raise SettingError(
                f"REP_LEASE_RENEW_INTERVAL ({lease_renew:g}) must be shorter than "
                f"REP_LEASE_TTL ({lease_ttl:g}), or the lease runs out between renewals"
            )
        return cls(
            obey=_boolean(settings, "ROBOTSTXT_OBEY", False),
            enforce=_boolean(settings, "REP_ENFORCE", True),
            robotstxt_user_agent=_optional_str(settings, "ROBOTSTXT_USER_AGENT"),
            user_agent=user_agent,
            max_size=_integer(
                settings, "REP_MAX_SIZE", RFC_MIN_PARSE_SIZE, minimum=RFC_MIN_PARSE_SIZE
            ),
            fetch_timeout=_number(
                settings, "REP_FETCH_TIMEOUT", download_timeout, strictly_positive=True
            ),
            max_redirects=_integer(settings, "REP_MAX_REDIRECTS", 5, minimum=0),
            retry_backoff=backoff,
            max_retry_backoff=max_backoff,
            unreachable_wait=_number(settings, "REP_UNREACHABLE_WAIT", 12 * 3600.0),
            stale_max_age=_number(settings, "REP_STALE_MAX_AGE", 30 * DAY),
            unreachable_fallback=_choice(
                settings, "REP_UNREACHABLE_FALLBACK", "allow", ("allow", "disallow")
            ),
            cache_ttl=_number(settings, "REP_CACHE_TTL", DAY, strictly_positive=True),
            min_ttl=min_ttl,
            max_ttl=max_ttl,
            crawl_delay=_boolean(settings, "REP_CRAWL_DELAY", True),
            max_crawl_delay=_number(settings, "REP_MAX_CRAWL_DELAY", 30.0),
            storage=storage,
            memory_max_origins=_integer(settings, "REP_MEMORY_MAX_ORIGINS", 100_000, minimum=1),
            memory_max_bytes=_integer(settings, "REP_MEMORY_MAX_BYTES", 64 * 2**20, minimum=0),
            lease_ttl=lease_ttl,
            lease_renew_interval=lease_renew,
            clock=_clock(settings, "REP_CLOCK"),
            purposes=purposes_from(settings.get("REP_PURPOSES")),
            usage_mode=_choice(settings, "REP_USAGE_MODE", "record", USAGE_MODES),
            page_mode=_choice(settings, "REP_PAGE_MODE", "record", PAGE_MODES),
            idle_wait=_number(settings, "REP_IDLE_WAIT", 1500.0),
            memory_max_held=_integer(settings, "REP_MEMORY_MAX_HELD", 100_000, minimum=1),
            fetch_concurrency=_integer(settings, "CONCURRENT_REQUESTS", 16, minimum=1),
            logstats_interval=_number(settings, "LOGSTATS_INTERVAL", 60.0),
            cluster_heartbeat=_number(
                settings, "REP_CLUSTER_HEARTBEAT", 30.0, strictly_positive=True
            ),
            durable_waiting=_optional_boolean(settings, "REP_DURABLE_WAITING"),
            record=record_path_template(settings.get("REP_RECORD")),
        )
