"""The SQLite store's file and its SQL: where the file lives, whether it is ours, moving
it aside, reading it without writing; its tables and lease rows (read defensively, taken
inside one write transaction). Nothing here keeps a connection open (``sqlite_store`` does).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from scrapy_rep.policy.config import SettingError, StorePlace
from scrapy_rep.policy.records import OriginRecord
from scrapy_rep.storage.base import MAX_DECODED, lease_blocks, unpack_record

try:  # POSIX only: serialises open/recovery between processes (see open_lock)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

DEFAULT_FILENAME = "scrapy_rep.sqlite3"
#: Bumped whenever the table layout changes; a file with another version is replaced.
DB_SCHEMA_VERSION = 1
SQLITE_MAGIC = b"SQLite format 3\x00"
#: The tables of a store of ours (older builds had no ``meta``) and their columns.
TABLES = {
    "meta": "key TEXT PRIMARY KEY, value TEXT NOT NULL",
    "origins": "origin TEXT PRIMARY KEY, record BLOB NOT NULL, updated_at REAL NOT NULL",
    "leases": "origin TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at REAL NOT NULL",
}


def path_of(place: StorePlace, *, create: bool = True) -> Path | None:
    """The store file ``place`` names. ``create=False`` creates no directory (for
    read-only callers) and answers None when no project data dir can be found."""
    rest = place.location
    if not rest:
        if not create:
            data_dir = _project_data_dir_no_create()
            return None if data_dir is None else data_dir / DEFAULT_FILENAME
        from scrapy.utils.project import data_path

        # data_path() creates the *directory* it returns, so ask for the data dir
        # itself and add the file name afterwards.
        return Path(data_path("", createdir=True)).absolute() / DEFAULT_FILENAME
    # URL form: sqlite:///abs/path -> /abs/path; sqlite://rel/path -> rel/path
    rest = rest.removeprefix("//")
    if not rest:
        raise SettingError(f"REP_STORAGE: no file name in 'sqlite:{place.location}'")
    return Path(rest).expanduser().absolute()


def _project_data_dir_no_create() -> Path | None:
    """Where ``scrapy.utils.project.data_path`` would put files, without creating it."""
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


def lock_path(path: Path) -> Path:
    return Path(f"{path}.lock")


#: A store's files: the database, its WAL and shared memory, the open lock, the cluster file.
_STORE_SUFFIXES = ("", "-wal", "-shm", ".lock", ".cluster", ".cluster-wal", ".cluster-shm")


def check_trusted(path: Path) -> None:
    """Raise ``SettingError`` when another user owns or can write a file of the store:
    parked requests are pickled (as Scrapy's JOBDIR and scrapy-redis store them), so whoever
    can write the store can run code in the next crawl (docs/storage.md, "Trust"). POSIX."""
    if os.name != "posix":  # pragma: no cover - Windows
        return
    for suffix in _STORE_SUFFIXES:
        name = f"{path}{suffix}"
        try:
            stat = os.stat(name)
        except OSError:
            continue  # not there (yet): created by this process, with its own mode
        if stat.st_uid != os.geteuid():
            reason = f"{name} is owned by another user (uid {stat.st_uid})"
        elif stat.st_mode & 0o022:
            who = "its group" if stat.st_mode & 0o020 else "every user"
            reason = f"{name} can be written by {who} (mode {stat.st_mode & 0o777:o})"
        else:
            continue
        raise SettingError(
            f"REP_STORAGE: refusing the robots.txt store {path}: {reason}. The store holds "
            "requests serialised with pickle, so another user who can write it could run "
            "code in this crawl; make it writable by its owner only (chmod go-w), or point "
            "REP_STORAGE at a file of your own."
        )


def is_sqlite_file(path: Path) -> bool:
    """False for a file that exists, is not empty and lacks SQLite's header."""
    try:
        with open(path, "rb") as fh:
            header = fh.read(len(SQLITE_MAGIC))
    except OSError:
        return True  # missing or unreadable: SQLite creates it, or the open reports it
    return not header or header == SQLITE_MAGIC


def file_id(path: Path) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


@contextlib.contextmanager
def open_lock(path: Path) -> Iterator[None]:
    """Keep two processes from both moving a bad file aside (the second would move the
    first one's fresh store). The lock file also marks the path as ours."""
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    try:
        # Owner-writable only, whatever the umask (the trust check refuses others).
        descriptor = os.open(lock_path(path), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError:
        yield
        return
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # also drops the flock


def move_aside(path: Path) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    # The WAL and shared-memory files belong to the bad database; a stale WAL left
    # next to a fresh file could be replayed into it.
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.replace(f"{path}{suffix}", f"{aside}{suffix}")
    return aside


def read_records_read_only(
    path: Path, origins: list[str], limit: int = MAX_DECODED
) -> dict[str, OriginRecord | None]:
    """Read records without writing anything: origins without a row are left out, a row
    that does not decode maps to None; ``sqlite3.Error`` when it is no store of this version.
    Without a ``-wal`` file no writer is active and ``immutable`` creates no ``-wal``/``-shm``
    files; with one, ``mode=ro`` sees what the writer has committed."""
    flag = "mode=ro" if Path(f"{path}-wal").exists() else "immutable=1"
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?{flag}", uri=True, timeout=3.0)
    try:
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if version is None or str(version[0]) != str(DB_SCHEMA_VERSION):
            raise sqlite3.DatabaseError(f"unknown schema version {version}")
        result: dict[str, OriginRecord | None] = {}
        for origin in origins:
            raw = read_record(conn, origin)
            if raw is not None:
                result[origin] = unpack_record(raw, limit)
        return result
    except (ValueError, OverflowError) as exc:  # UnicodeDecodeError from a damaged schema
        raise sqlite3.DatabaseError(f"damaged store ({type(exc).__name__})") from exc
    finally:
        conn.close()


# -- SQL ------------------------------------------------------------------------------


def connect(
    path: Path, timeout: float, setup: str | Callable[[sqlite3.Connection], object]
) -> sqlite3.Connection:
    """An autocommit connection (a write says BEGIN IMMEDIATE itself) for any thread, set up
    by a script or a function; closed again when that raises."""
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        if isinstance(setup, str):
            conn.executescript(setup)
        else:
            setup(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def close_quietly(conn: sqlite3.Connection | None) -> None:
    if conn is not None:
        with contextlib.suppress(sqlite3.Error):
            conn.close()


class BadDatabase(Exception):
    """The file exists but is not a store we can use as it is."""

    def __init__(self, reason: str, *, foreign: str = "", certain: bool = False) -> None:
        super().__init__(reason)
        self.foreign = foreign  # what the file looks like, when not a store at all
        # A readable database with tables of its own: never a damaged store of ours,
        # whatever marks the path carries.
        self.certain = certain


def prepare(conn: sqlite3.Connection) -> None:
    """Make the file a store of this version, or raise ``BadDatabase``; an
    ``OperationalError`` that is not the file's fault (locked, I/O, permissions) passes."""
    try:
        # Identify the file before anything writes to it (WAL mode rewrites the header):
        # a database that is not ours must be left as it is.
        identify(conn)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        with write_transaction(conn):
            identify(conn)  # again, inside the write lock: another process may have won
            for table, columns in TABLES.items():
                conn.execute(f"CREATE TABLE IF NOT EXISTS {table} ({columns})")
                # CREATE TABLE IF NOT EXISTS leaves a table of ours with other columns as
                # it is, and every query on it would fail: damage, repaired.
                found = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
                if found != [column.split()[0] for column in columns.split(", ")]:
                    raise BadDatabase(f"table {table} has columns {', '.join(map(str, found))}")
            conn.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(DB_SCHEMA_VERSION),),
            )
            # Leases that are over, or that cannot be read: nobody can be waiting on them.
            conn.execute(
                "DELETE FROM leases WHERE typeof(expires_at) NOT IN ('integer', 'real') "
                "OR typeof(holder) != 'text' OR expires_at < ?",
                (time.time(),),
            )
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and not is_damage(exc):
            raise
        raise BadDatabase(str(exc)) from exc
    except (ValueError, OverflowError) as exc:
        # UnicodeDecodeError: a flipped byte in the schema text
        raise BadDatabase(f"damaged schema ({type(exc).__name__})") from exc


def identify(conn: sqlite3.Connection) -> None:
    """Raise ``BadDatabase`` unless the file is empty or a store of this version."""
    # Every text column: a flipped byte anywhere in the schema shows up here, at open.
    rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    tables = {row[1] for row in rows if row[0] == "table"}
    if "meta" in tables:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None or str(row[0]) != str(DB_SCHEMA_VERSION):
            found = "none" if row is None else row[0]
            raise BadDatabase(f"unknown schema version {found}")
    elif tables - TABLES.keys():
        names = ", ".join(sorted(tables)[:5])
        raise BadDatabase(
            "not a scrapy-rep store",
            foreign=f"a SQLite database with tables {names}",
            certain=True,
        )


def read_lease(conn: sqlite3.Connection, origin: str) -> tuple[str, float] | None:
    """The lease row, or None when there is none or it cannot be read (a damaged
    row is nobody's lease: it is overwritten by the next taker)."""
    row = conn.execute(
        "SELECT CAST(holder AS BLOB), typeof(expires_at), expires_at FROM leases WHERE origin = ?",
        (origin,),
    ).fetchone()
    if row is None or row[1] not in ("integer", "real") or not isinstance(row[0], bytes):
        return None
    try:
        return row[0].decode("utf-8"), float(row[2])
    except (UnicodeDecodeError, ValueError, OverflowError):
        return None


def take_lease(
    conn: sqlite3.Connection,
    origin: str,
    holder: str,
    ttl: float,
    *,
    renewing: bool = False,
    read: bool = False,
) -> tuple[bool, object]:
    """Take (or, ``renewing``, extend) the lease in one write transaction, and when taken
    and ``read``, read the record's raw value in it (one commit for a fetch's start)."""
    with write_transaction(conn):
        now = time.time()
        current = read_lease(conn, origin)
        if renewing and (current is None or current[0] != holder):
            return False, None  # no longer ours: a renewal never takes a lease
        if lease_blocks(current, holder, now, ttl):
            return False, None  # another's live lease (never when renewing: returned above)
        conn.execute(
            "INSERT OR REPLACE INTO leases (origin, holder, expires_at) VALUES (?, ?, ?)",
            (origin, holder, now + ttl),
        )
        return True, read_record(conn, origin) if read else None


def store_and_release(conn: sqlite3.Connection, origin: str, blob: bytes, holder: str) -> None:
    """Write the record and give up our lease in one transaction (one commit)."""
    with write_transaction(conn):
        write_record(conn, origin, blob)
        conn.execute(RELEASE_LEASE, (origin, holder))


def read_record(conn: sqlite3.Connection, origin: str) -> object:
    row = conn.execute("SELECT record FROM origins WHERE origin = ?", (origin,)).fetchone()
    return None if row is None else row[0]


def write_record(conn: sqlite3.Connection, origin: str, blob: bytes) -> None:
    conn.execute(
        "INSERT INTO origins (origin, record, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (origin) DO UPDATE SET record = excluded.record, "
        "updated_at = excluded.updated_at",
        (origin, blob, time.time()),
    )


RELEASE_LEASE = "DELETE FROM leases WHERE origin = ? AND holder = ?"


@contextlib.contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE (the write lock is taken before anything is read); ROLLBACK on error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise


def is_damage(exc: BaseException) -> bool:
    """Whether a driver error says the file is damaged."""
    if isinstance(exc, UnicodeDecodeError):
        return True  # undecodable text in a table
    text = str(exc).lower()
    # "could not decode to UTF-8": how Python 3.11's sqlite3 reports invalid text
    # (later versions raise UnicodeDecodeError).
    return isinstance(exc, sqlite3.DatabaseError) and any(
        mark in text for mark in ("malformed", "not a database", "corrupt", "could not decode")
    )
