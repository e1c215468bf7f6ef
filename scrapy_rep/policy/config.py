"""All scrapy-rep settings, read here once into a frozen, validated ``Config``: a bad
value raises ``SettingError``, naming the setting, at start-up, not half-way through."""

from __future__ import annotations

import difflib
import importlib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from scrapy_rep.robotstxt._usage import LABELS

# RFC 9309 section 2.5: crawlers MUST parse at least 500 KiB.
RFC_MIN_PARSE_SIZE = 512_000
DAY = 86_400.0


class SettingError(ValueError):
    """A scrapy-rep (or related Scrapy) setting has a value we cannot use."""


# -- readers: (raw value or None, setting name, default) -> value, or SettingError -----

Reader = Callable[[Any, str, Any], Any]


def number(*, minimum: float = 0.0, positive: bool = False, whole: bool = False) -> Reader:
    """Seconds (or any float) ``>= minimum``, or ``> minimum`` when ``positive``; with
    ``whole``, an int (``2.0`` is 2; ``2.5`` is refused)."""
    kind = "an integer" if whole else "a number"
    bool_refused = "an integer" if whole else "a number of seconds"

    def read(raw: Any, name: str, default: Any) -> float:
        if raw is None or raw == "":
            return int(default) if whole else float(default)
        if isinstance(raw, bool):
            raise SettingError(f"{name} must be {bool_refused}, got {raw!r}")
        try:
            value = int(raw) if whole else float(raw)
            if whole and isinstance(raw, float) and raw != value:
                raise ValueError
        except (TypeError, ValueError):
            raise SettingError(f"{name} must be {kind}, got {raw!r}") from None
        if math.isnan(value) or math.isinf(value):
            raise SettingError(f"{name} must be a finite number, got {raw!r}")
        if value < minimum or (positive and value <= 0):
            bound = f"> {minimum:g}" if positive else f">= {minimum:g}"
            raise SettingError(f"{name} must be {bound}, got {raw!r}")
        return value

    return read


def integer(*, minimum: int) -> Reader:
    return number(minimum=minimum, whole=True)


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def boolean(raw: Any, name: str, default: Any) -> bool | None:
    """True or False; a default of None (the component decides) also stands for ""."""
    if raw is None or (default is None and isinstance(raw, str) and not raw.strip()):
        return default  # type: ignore[no-any-return]
    if isinstance(raw, int) and raw in (0, 1):  # True and False too
        return bool(raw)
    if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
        return raw.strip().lower() in _TRUE
    raise SettingError(f"{name} must be True or False, got {raw!r}")


def choice(*choices: str) -> Reader:
    """One of ``choices``, case-insensitive."""

    def read(raw: Any, name: str, default: Any) -> str:
        if raw is None:
            return str(default)
        value = str(raw).strip().lower()
        if value not in choices:
            raise SettingError(f"{name} must be one of {', '.join(choices)}; got {raw!r}")
        return value

    return read


def optional_text(raw: Any, name: str, default: Any) -> str | None:
    """A string, or ``default`` when unset or empty."""
    if raw is None or raw == "":
        return default  # type: ignore[no-any-return]
    if isinstance(raw, bytes):
        return raw.decode("utf-8", "replace")
    if not isinstance(raw, str):
        raise SettingError(f"{name} must be a string, got {raw!r}")
    return raw


def clock(raw: Any, name: str, default: Any) -> Callable[[], float] | None:
    """A callable, or the import path of one, that returns epoch seconds."""
    if raw is None or raw == "":
        return default  # type: ignore[no-any-return]
    found = raw
    if isinstance(raw, str):
        module, _, attribute = raw.strip().rpartition(".")
        if not module:
            raise SettingError(f"{name} must be a callable or its import path, got {raw!r}")
        try:
            found = getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError, ValueError) as exc:
            raise SettingError(f"{name}: cannot import {raw!r}: {exc}") from None
    if not callable(found):
        raise SettingError(f"{name} must be a callable returning epoch seconds, got {raw!r}")
    return found  # type: ignore[no-any-return]


# A class import path (``mypackage.stores.MyStore``): dotted identifiers only.
_IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
# File names that are SQLite files, not modules, even without a slash (``cache.sqlite``).
_SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
STORAGE_FORMS = (
    "'sqlite' (the project data dir), 'sqlite:PATH', a file path ('/path/x.sqlite', "
    "'./x.sqlite'), 'memory', a redis://, rediss:// or unix:// URL, or a class import path"
)


def storage_spec(raw: Any, name: str = "REP_STORAGE", default: Any = "sqlite") -> str:
    """``REP_STORAGE`` in one canonical form (``StorePlace.spec``), so every reader (the
    crawl and ``scrapy robots``) sees one spelling; or ``SettingError``."""
    if raw is None or raw == "":
        return str(default)
    return StorePlace.parse(raw, name).spec


@dataclass(frozen=True, slots=True)
class StorePlace:
    """``REP_STORAGE`` parsed once: ``kind`` (``memory``, ``sqlite``, ``redis`` or
    ``class``) and ``location`` (the SQLite file after ``sqlite:``, "" for the project
    data dir; the Redis URL, with its password: never log it; the class import path)."""

    kind: str
    location: str = field(default="", repr=False)

    @property
    def shared(self) -> bool:
        """A store that other processes can see (Redis; SQLite for one machine)."""
        return self.kind in ("sqlite", "redis")

    @property
    def spec(self) -> str:
        if self.kind == "sqlite" and self.location:
            return "sqlite:" + self.location
        return self.location or self.kind

    @classmethod
    def parse(cls, raw: Any, name: str = "REP_STORAGE") -> StorePlace:
        """The place ``raw`` names. A bare file path (anything with a slash, starting with
        ``~`` or ``.``, or ending in ``.sqlite``, ``.sqlite3`` or ``.db``) is a SQLite file;
        whether it can be opened is the store's business (storage.factory)."""
        if not isinstance(raw, str):
            raise SettingError(f"{name} must be a string, got {raw!r}")
        spec = raw.strip()
        lowered = spec.lower()
        if lowered in ("sqlite", "memory"):
            return cls(lowered)
        if lowered.startswith("sqlite:"):
            rest = spec[len("sqlite:") :]
            if rest in ("", "//", "///"):
                raise SettingError(f"{name}: no file name in {raw!r}")
            return cls("sqlite", rest)
        if lowered.startswith(("redis://", "rediss://", "unix://")):
            return cls("redis", spec)
        if "://" in spec:  # a URL of a scheme we do not know: never a file path
            raise SettingError(f"{name} must be {STORAGE_FORMS}; got {raw!r}")
        if "/" in spec or "\\" in spec or spec.startswith(("~", ".")):
            return cls("sqlite", spec)
        if lowered.endswith(_SQLITE_SUFFIXES):
            return cls("sqlite", spec)
        if _IMPORT_PATH.fullmatch(spec):
            return cls("class", spec)
        raise SettingError(f"{name} must be {STORAGE_FORMS}; got {raw!r}")


# What the crawl does with usage preferences (REP_USAGE_MODE, crawl/usage.py) and with
# page-level directives (REP_PAGE_MODE, page_directives.py).
MODES = ("off", "record", "audit", "enforce")


RECORD_PLACEHOLDERS = {"name": "spider", "time": "2026-01-01T00-00-00", "pid": 1}


def record_path_template(raw: Any, name: str, default: Any) -> str | None:
    """``REP_RECORD``: unset, or a path whose only placeholders are ``%(name)s``,
    ``%(time)s`` and ``%(pid)s`` (as Scrapy's FEEDS URIs spell them)."""
    if raw is None or raw == "" or raw is False:
        return default  # type: ignore[no-any-return]
    if hasattr(raw, "__fspath__"):
        raw = str(raw)
    if not isinstance(raw, str):
        raise SettingError(f"{name} must be a file path, got {raw!r}")
    try:
        raw % RECORD_PLACEHOLDERS
    except (KeyError, ValueError, TypeError) as exc:
        raise SettingError(
            f"{name}: {raw!r} may only use the placeholders %(name)s, %(time)s and "
            f"%(pid)s (write %% for a literal %): {exc!r}"
        ) from None
    return raw


def purposes_from(raw: Any, name: str, default: Any = ()) -> tuple[str, ...]:
    """Validated purposes: a list of labels, or one string of comma-separated labels."""
    if raw is None or raw == "":
        return default  # type: ignore[no-any-return]
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


def setting(
    name: str, default: Any, read: Reader, *, fallback: str | None = None, repr: bool = True
) -> Any:
    """A ``Config`` field read from the setting ``name`` by ``read``; when unset, from
    ``fallback`` (a setting read the same way, for its value only), else ``default``."""
    return field(default=default, repr=repr, metadata={"setting": (name, read, fallback)})


@dataclass(frozen=True, slots=True)
class Config:
    """Every setting scrapy-rep reads (docs/settings.md), declared once: field, name,
    default and reader. A rule between two settings goes in ``_check_together``."""

    obey: bool = setting("ROBOTSTXT_OBEY", False, boolean)  # Scrapy's default
    enforce: bool = setting("REP_ENFORCE", True, boolean)
    robotstxt_user_agent: str | None = setting("ROBOTSTXT_USER_AGENT", None, optional_text)
    user_agent: str = setting("USER_AGENT", "Scrapy", optional_text)
    max_size: int = setting("REP_MAX_SIZE", RFC_MIN_PARSE_SIZE, integer(minimum=RFC_MIN_PARSE_SIZE))
    # 180: Scrapy's default DOWNLOAD_TIMEOUT
    fetch_timeout: float = setting(
        "REP_FETCH_TIMEOUT", 180.0, number(positive=True), fallback="DOWNLOAD_TIMEOUT"
    )
    max_redirects: int = setting("REP_MAX_REDIRECTS", 5, integer(minimum=0))
    retry_backoff: float = setting("REP_RETRY_BACKOFF", 10.0, number(positive=True))
    max_retry_backoff: float = setting("REP_MAX_RETRY_BACKOFF", 900.0, number(positive=True))
    unreachable_wait: float = setting("REP_UNREACHABLE_WAIT", 12 * 3600.0, number())
    stale_max_age: float = setting("REP_STALE_MAX_AGE", 30 * DAY, number())
    unreachable_fallback: str = setting(
        "REP_UNREACHABLE_FALLBACK", "allow", choice("allow", "disallow")
    )
    cache_ttl: float = setting("REP_CACHE_TTL", DAY, number(positive=True))
    min_ttl: float = setting("REP_MIN_TTL", 60.0, number())
    max_ttl: float = setting("REP_MAX_TTL", DAY, number(positive=True))
    crawl_delay: bool = setting("REP_CRAWL_DELAY", True, boolean)
    max_crawl_delay: float = setting("REP_MAX_CRAWL_DELAY", 30.0, number())
    # A Redis URL may carry a password: kept out of repr(config), which logs may print.
    storage: str = setting("REP_STORAGE", "sqlite", storage_spec, repr=False)
    memory_max_origins: int = setting("REP_MEMORY_MAX_ORIGINS", 100_000, integer(minimum=1))
    # Estimated bytes of robots.txt copies kept in RAM. 64 MiB: about 8,000 origins of
    # the corpus's mean size (4 KB), 30,000 of its median.
    memory_max_bytes: int = setting("REP_MEMORY_MAX_BYTES", 64 * 2**20, integer(minimum=0))
    # A fetch lease in a shared store (docs/storage.md), renewed while the fetch runs: a
    # dead holder blocks its origin this long at most. REP_LEASE_TIMEOUT: its old name.
    lease_ttl: float = setting(
        "REP_LEASE_TTL", 30.0, number(positive=True), fallback="REP_LEASE_TIMEOUT"
    )
    # 0: a third of the lease (lease_renew_every)
    lease_renew_interval: float = setting("REP_LEASE_RENEW_INTERVAL", 0.0, number())
    # None: time.time (RUF009: ``setting`` makes a field, not a shared default value)
    clock: Callable[[], float] | None = setting("REP_CLOCK", None, clock)  # noqa: RUF009
    # what the crawl uses content for
    purposes: tuple[str, ...] = setting("REP_PURPOSES", (), purposes_from)
    usage_mode: str = setting("REP_USAGE_MODE", "record", choice(*MODES))
    # Page-level directives: robots meta tag, X-Robots-Tag, rel=nofollow (docs/page.md).
    page_mode: str = setting("REP_PAGE_MODE", "record", choice(*MODES))
    # How long a spider with nothing to do but wait on robots.txt stays open.
    idle_wait: float = setting("REP_IDLE_WAIT", 1500.0, number())
    # Held requests kept in memory (about 1 KB each); beyond, they spill to disk.
    memory_max_held: int = setting("REP_MEMORY_MAX_HELD", 100_000, integer(minimum=1))
    # robots.txt fetches in flight (engine.download_async bypasses the engine's limit)
    fetch_concurrency: int = setting("CONCURRENT_REQUESTS", 16, integer(minimum=1))
    # How often the "still waiting" INFO line may repeat (0 = never); Scrapy's default.
    logstats_interval: float = setting("LOGSTATS_INTERVAL", 60.0, number())
    # how long a crashed process's parked requests wait before another adopts them
    cluster_heartbeat: float = setting("REP_CLUSTER_HEARTBEAT", 30.0, number(positive=True))
    # Waiting requests also kept in a shared store, so a kill -9 loses none. None: only
    # where the crawl itself persists (docs/waiting.md "When the spider closes").
    durable_waiting: bool | None = setting("REP_DURABLE_WAITING", None, boolean)
    # The compliance record (docs/record.md); unset = no record.
    record: str | None = setting("REP_RECORD", None, record_path_template)
    # ``storage`` parsed (set from it by __post_init__): what every reader uses.
    store_place: StorePlace = field(init=False, repr=False, compare=False)

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
        values: dict[str, Any] = {}  # Config field -> value
        for spec in _SETTINGS:
            name, read, fallback = spec.metadata["setting"]
            default = spec.default
            if fallback is not None:  # read (and checked) even when ``name`` is set
                default = read(settings.get(fallback), fallback, default)
            values[spec.name] = read(settings.get(name), name, default)
        _check_together(values)
        return cls(**values)


_SETTINGS = tuple(spec for spec in fields(Config) if spec.init)
_NAME_OF = {spec.name: spec.metadata["setting"][0] for spec in _SETTINGS}  # field -> setting
#: The names of every setting scrapy-rep reads (the typo check compares against them).
SETTING_NAMES: frozenset[str] = frozenset(
    name for spec in _SETTINGS for name in spec.metadata["setting"][::2] if name
)


def _check_together(values: Mapping[str, Any]) -> None:
    for low, high in (("min_ttl", "max_ttl"), ("retry_backoff", "max_retry_backoff")):
        if values[low] > values[high]:
            raise SettingError(
                f"{_NAME_OF[low]} ({values[low]:g}) must not exceed "
                f"{_NAME_OF[high]} ({values[high]:g})"
            )
    if values["lease_renew_interval"] >= values["lease_ttl"]:
        raise SettingError(
            f"REP_LEASE_RENEW_INTERVAL ({values['lease_renew_interval']:g}) must be shorter "
            f"than REP_LEASE_TTL ({values['lease_ttl']:g}), or the lease runs out between "
            "renewals"
        )


def unknown_settings(settings: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """``REP_*`` names in ``settings`` that scrapy-rep does not read (most are typos),
    each with the closest name it does read, or None."""
    known = sorted(name for name in SETTING_NAMES if name.startswith("REP_"))
    found = []
    for name in sorted(str(key) for key in settings if str(key).startswith("REP_")):
        if name not in SETTING_NAMES:
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            found.append((name, close[0] if close else None))
    return found
