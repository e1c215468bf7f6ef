"""SQLite store: the embedded default, shared by every Scrapy process on one machine.

``REP_STORAGE = "sqlite"`` puts the file ``scrapy_rep.sqlite3`` in Scrapy's project data
directory: ``<project>/.scrapy/`` inside a Scrapy project (a ``scrapy.cfg`` above the
current directory or ``SCRAPY_SETTINGS_MODULE`` set), otherwise ``.scrapy/`` under the
current directory. ``sqlite:PATH`` (or ``sqlite:///abs/path``) names the file.

Why it is safe for several processes:

* WAL journal: readers never block the writer, and a process killed mid-write leaves
  the last committed state readable (an uncommitted WAL tail is ignored on open).
* ``synchronous=NORMAL``: in WAL mode a power cut may lose the last commits but never
  corrupts the file; losing a cached robots.txt only costs a refetch.
* A lease is a row (origin, holder, wall-clock expiry) written inside ``BEGIN
  IMMEDIATE``, which takes the database write lock before the row is read, so two
  processes cannot both see the lease as free. Wall clock, not monotonic: the expiry
  is compared across processes.

Nothing here raises out of the ``RobotsStorage`` interface. A file that is not a
SQLite database, is corrupted, or carries an unknown schema version is moved aside
(``<name>.corrupt-<timestamp>``) with one WARNING and a fresh store is started. A
runtime ``sqlite3`` error is logged once per kind and answered from a small in-process
fallback, so a full disk degrades to per-process caching instead of a refetch storm.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from scrapy_rep.policy.config import SettingError
from scrapy_rep.policy.records import OriginRecord
from scrapy_rep.storage.base import MemoryStorage
from scrapy_rep.storage.codec import pack_record, unpack_record, unpack_stored

try:  # POSIX only: serialises open/recovery between processes (see _open_lock)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

#: Bumped whenever the table layout changes; a file with another version is replaced.
DB_SCHEMA_VERSION = 1
DEFAULT_FILENAME = "scrapy_rep.sqlite3"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS origins (
    origin TEXT PRIMARY KEY, record BLOB NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS leases (
    origin TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at REAL NOT NULL);
"""
_MAX_LOGGED_KINDS = 64


class _BadDatabase(Exception):
    """The file exists but is not a store we can use as it is."""


class SqliteStorage:
    """One SQLite file; one connection per instance, guarded by a lock."""

    shared = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 3.0,
        fallback_max_origins: int = 10_000,
    ) -> None:
        self.path = Path(path)
        # Long enough to ride out another process's short write; short enough that a
        # stuck writer stalls the reactor for seconds, not minutes.
        self._busy_timeout = busy_timeout
        self._lock = threading.Lock()
        self._logged: set[str] = set()
        self._closed = False
        # Answers for what SQLite could not store or read (disk full, I/O errors).
        self._fallback = MemoryStorage(fallback_max_origins)
        self._conn: sqlite3.Connection | None = self._open()

    # -- construction -------------------------------------------------------------

    @classmethod
    def from_spec(
        cls,
        spec: str,
        settings: Mapping[str, Any] | None = None,
        *,
        fallback_max_origins: int = 10_000,
    ) -> SqliteStorage:
        """``sqlite`` (project data dir), ``sqlite:PATH`` or ``sqlite:///abs/path``."""
        path = cls.path_from_spec(spec)
        assert path is not None  # create=True always finds a place
        return cls(path, fallback_max_origins=fallback_max_origins)

    @staticmethod
    def path_from_spec(spec: str, *, create: bool = True) -> Path | None:
        """The store file ``spec`` names. ``create=False`` creates no directory (for
        read-only callers) and answers None when no project data dir can be found."""
        scheme, _, rest = spec.partition(":")
        if scheme.lower() != "sqlite":
            raise SettingError(f"REP_STORAGE: not a sqlite spec: {spec!r}")
        if not rest:
            if not create:
                data_dir = _project_data_dir_no_create()
                return None if data_dir is None else data_dir / DEFAULT_FILENAME
            from scrapy.utils.project import data_path

            # data_path() creates the *directory* it returns, so ask for the data dir
            # itself and add the file name afterwards.
            return Path(data_path("", createdir=True)).absolute() / DEFAULT_FILENAME
        if rest.startswith("//"):
            # URL form: sqlite:///abs/path -> /abs/path; sqlite://rel/path -> rel/path
            rest = rest[2:]
        if not rest:
            raise SettingError(f"REP_STORAGE: no file name in {spec!r}")
        return Path(rest).expanduser().absolute()

    def _open(self) -> sqlite3.Connection | None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SettingError(f"REP_STORAGE: cannot create {self.path.parent}: {exc}") from None
        with self._open_lock():
            try:
                return self._connect_patiently()
            except _BadDatabase as exc:
                try:
                    aside = self._move_aside()
                except OSError as move_error:
                    self._log_once(f"moving the unusable store aside ({exc})", move_error)
                    return None
                logger.warning(
                    "scrapy-rep: robots.txt store %s is unusable (%s); moved it to %s and "
                    "started a fresh store",
                    self.path,
                    exc,
                    aside,
                )
            except sqlite3.Error as exc:
                # Not corruption (permissions, a directory in the way, ...): nothing to
                # repair, and the crawl must still run.
                self._log_once("open", exc)
                return None
            try:
                return self._connect_patiently()
            except (_BadDatabase, sqlite3.Error) as exc:
                self._log_once("open", exc)
                return None

    @contextlib.contextmanager
    def _open_lock(self) -> Iterator[None]:
        """Keep two processes from both moving a bad file aside (the second would move
        the first one's fresh store)."""
        if fcntl is None:  # pragma: no cover - Windows
            yield
            return
        try:
            handle = open(f"{self.path}.lock", "a")  # noqa: SIM115 - held across the yield
        except OSError:
            yield
            return
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield
        finally:
            handle.close()  # also drops the flock

    def _connect_patiently(self) -> sqlite3.Connection:
        # Switching a new file to WAL needs a moment of exclusive access; another process
        # starting at the same time can make that fail with "locked" past busy_timeout.
        for attempt in range(3):
            try:
                return self._connect()
            except sqlite3.OperationalError as exc:
                if attempt == 2 or "locked" not in str(exc).lower():
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: autocommit, so each statement is its own transaction and
        # the lease code can say BEGIN IMMEDIATE itself.
        conn = sqlite3.connect(
            self.path, timeout=self._busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                self._check_schema(conn)
            except sqlite3.DatabaseError as exc:
                if isinstance(exc, sqlite3.OperationalError) and not _is_corruption(exc):
                    raise  # locked, I/O, permissions: not the file's fault
                raise _BadDatabase(str(exc)) from exc
        except BaseException:
            conn.close()
            raise
        return conn

    def _check_schema(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
            if "meta" in tables:
                row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                if row is None or str(row[0]) != str(DB_SCHEMA_VERSION):
                    found = "none" if row is None else row[0]
                    raise _BadDatabase(f"unknown schema version {found}")
            elif tables - {"origins", "leases"}:
                raise _BadDatabase("not a scrapy-rep store")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(DB_SCHEMA_VERSION),),
            )
            # Leases of processes that died: expired anyway, so drop them.
            conn.execute("DELETE FROM leases WHERE expires_at < ?", (time.time(),))
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    def _move_aside(self) -> Path:
        stamp = time.strftime("%Y%m%dT%H%M%S")
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        # The WAL and shared-memory files belong to the bad database; a stale WAL left
        # next to a fresh file could be replayed into it.
        for suffix in ("", "-wal", "-shm"):
            source = Path(f"{self.path}{suffix}")
            with contextlib.suppress(FileNotFoundError):
                os.replace(source, f"{aside}{suffix}")
        return aside

    # -- errors ---------------------------------------------------------------------

    def _log_once(self, operation: str, exc: BaseException) -> None:
        kind = f"{operation}:{type(exc).__name__}:{exc}"
        if kind in self._logged or len(self._logged) >= _MAX_LOGGED_KINDS:
            logger.debug("scrapy-rep: sqlite %s failed on %s: %s", operation, self.path, exc)
            return
        self._logged.add(kind)
        logger.warning(
            "scrapy-rep: robots.txt store %s: %s failed (%s: %s); using process-local "
            "state for it (further errors of this kind are logged at DEBUG)",
            self.path,
            operation,
            type(exc).__name__,
            exc,
        )

    # -- RobotsStorage ----------------------------------------------------------------

    def get(self, origin: str) -> OriginRecord | None:
        raw: Any = None
        with self._lock:
            if self._conn is not None and not self._closed:
                try:
                    row = self._conn.execute(
                        "SELECT record FROM origins WHERE origin = ?", (origin,)
                    ).fetchone()
                    raw = None if row is None else row[0]
                except sqlite3.Error as exc:
                    self._log_once("read", exc)
        record = unpack_stored(raw, f"sqlite {self.path}")
        return record if record is not None else self._fallback.get(origin)

    def put(self, origin: str, record: OriginRecord) -> None:
        blob = pack_record(record)
        with self._lock:
            if self._conn is not None and not self._closed:
                try:
                    self._conn.execute(
                        "INSERT INTO origins (origin, record, updated_at) VALUES (?, ?, ?) "
                        "ON CONFLICT (origin) DO UPDATE SET record = excluded.record, "
                        "updated_at = excluded.updated_at",
                        (origin, blob, time.time()),
                    )
                except sqlite3.Error as exc:
                    self._log_once("write", exc)
                else:
                    if len(self._fallback):
                        # Keep the fallback copy (from an earlier failure) in step, so it
                        # never answers with something older than what SQLite now holds.
                        self._fallback.put(origin, record)
                    return
        self._fallback.put(origin, record)

    def acquire_lease(self, origin: str, holder: str, ttl: float) -> bool:
        with self._lock:
            if self._conn is not None and not self._closed:
                try:
                    return self._acquire(self._conn, origin, holder, ttl)
                except sqlite3.Error as exc:
                    self._log_once("lease", exc)
        # The shared lease is out of reach: single-flight within this process at least.
        return self._fallback.acquire_lease(origin, holder, ttl)

    @staticmethod
    def _acquire(conn: sqlite3.Connection, origin: str, holder: str, ttl: float) -> bool:
        now = time.time()
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute(
                "SELECT holder, expires_at FROM leases WHERE origin = ?", (origin,)
            ).fetchone()
            if row is not None and row[0] != holder and float(row[1]) > now:
                conn.execute("ROLLBACK")
                return False
            conn.execute(
                "INSERT OR REPLACE INTO leases (origin, holder, expires_at) VALUES (?, ?, ?)",
                (origin, holder, now + ttl),
            )
            conn.execute("COMMIT")
            return True
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    def release_lease(self, origin: str, holder: str) -> None:
        self._fallback.release_lease(origin, holder)
        with self._lock:
            if self._conn is None or self._closed:
                return
            try:
                self._conn.execute(
                    "DELETE FROM leases WHERE origin = ? AND holder = ?", (origin, holder)
                )
            except sqlite3.Error as exc:
                self._log_once("lease release", exc)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.close()
            self._fallback.close()

    def describe(self) -> str:
        state = "" if self._conn is not None else " (unusable: process-local fallback)"
        return f"sqlite {self.path}{state}"


def _is_corruption(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text or "corrupt" in text


def _project_data_dir_no_create() -> Path | None:
    """Where ``scrapy.utils.project.data_path`` would put files, without creating it."""
    import os

    from scrapy.utils.conf import closest_scrapy_cfg, get_config
    from scrapy.utils.project import DATADIR_CFG_SECTION, inside_project

    if not inside_project():
        return Path(".scrapy").absolute()
    project = os.environ.get("SCRAPY_PROJECT", "default")
    cfg = get_config()
    if cfg.has_option(DATADIR_CFG_SECTION, project):
        return Path(cfg.get(DATADIR_CFG_SECTION, project)).absolute()
    scrapy_cfg = closest_scrapy_cfg()
    if not scrapy_cfg:
        return None
    return (Path(scrapy_cfg).parent / ".scrapy").resolve()


def read_records_read_only(path: Path, origins: list[str]) -> dict[str, OriginRecord | None]:
    """Read records without writing anything (no schema set-up, no lease clean-up).

    Without a ``-wal`` file no writer is active and ``immutable`` reads without creating
    ``-wal``/``-shm`` files; with one, ``mode=ro`` sees what the writer has committed.
    Origins without a row are left out; a row that does not decode maps to None.
    Raises ``sqlite3.Error`` when the file is not a store of this schema version.
    """
    flag = "mode=ro" if Path(f"{path}-wal").exists() else "immutable=1"
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?{flag}", uri=True, timeout=3.0)
    try:
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if version is None or str(version[0]) != str(DB_SCHEMA_VERSION):
            raise sqlite3.DatabaseError(f"unknown schema version {version}")
        result: dict[str, OriginRecord | None] = {}
        for origin in origins:
            row = conn.execute("SELECT record FROM origins WHERE origin = ?", (origin,)).fetchone()
            if row is not None:
                result[origin] = unpack_record(row[0])
        return result
    finally:
        conn.close()
