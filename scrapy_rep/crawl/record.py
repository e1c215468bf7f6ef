"""The compliance record (docs/record.md): every robots.txt copy that decided a request
and one line per decision, written as gzip-compressed JSON Lines off the reactor thread.

The reactor thread only appends small tuples to a batch; a worker thread turns them into
JSON, compresses and writes them. Each batch ends with a zlib sync flush, so a file cut
short by ``kill -9`` is readable up to its last whole batch (batches go out every
``BATCH_SECONDS``). Repeated values (a copy, the token, the deciding line) are declared
once on their own line and referred to by a small number, which keeps a decision near
20 bytes once compressed.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import fcntl
import gzip
import hashlib
import itertools
import json
import logging
import os
import pickle
import queue
import socket
import threading
import weakref
import zlib
from importlib import metadata
from operator import itemgetter
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from scrapy import signals
from twisted.internet.task import LoopingCall

from scrapy_rep.crawl.fetcher import FETCH_META_KEY
from scrapy_rep.policy.config import SettingError
from scrapy_rep.policy.origin import origin_of_memo, robots_url
from scrapy_rep.policy.records import RULES
from scrapy_rep.policy.robots_policy import FALLBACK, STALE

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from scrapy_rep.policy.config import Config
    from scrapy_rep.policy.records import OriginRecord
    from scrapy_rep.policy.robots_policy import Evaluation
    from scrapy_rep.robotstxt._usage import Usage

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
SCHEMA_FILE = Path(__file__).resolve().parent.parent / "record.schema.json"

# Verdicts ("v" of a decision line; docs/record.md "Decisions")
ALLOWED, FORBIDDEN, RELEASED, DROPPED_AT_CLOSE, USAGE_REFUSED, PAGE = "AFWDUP"
VERDICTS = (ALLOWED, FORBIDDEN, RELEASED, DROPPED_AT_CLOSE, USAGE_REFUSED, PAGE)
# States of a copy, or of a decision made without one (docs/record.md "Copies")
STATE_RULES, STATE_ALLOW_ALL, STATE_STALE = "rules", "allow-all", "stale"
STATE_FALLBACK, STATE_UNREACHABLE = "fallback", "unreachable"

# A batch goes to the writer at least this often: a kill -9 loses at most this much.
BATCH_SECONDS = 1.0
# ... or as soon as it holds this many entries (a fast crawl's second).
BATCH_ENTRIES = 8192
# Batches waiting for the writer. Beyond this the writer is far behind (a stalled
# disk): a new batch is counted lost (rep/record/lost, one WARNING) instead of
# growing memory without bound. 64 x 8192 entries is about 50 MB at the worst.
QUEUE_BATCHES = 64
# Interned values kept on the reactor side; past this they are declared again under
# new numbers (memory bounded whatever the crawl's size).
MAX_INTERNED = 200_000


def record_path(template: str, spider_name: str, started: float) -> Path:
    when = datetime.datetime.fromtimestamp(started, tz=datetime.timezone.utc)
    # as Scrapy's FEEDS URIs spell %(time)s: no colons, safe in file names
    stamp = when.replace(microsecond=0, tzinfo=None).isoformat().replace(":", "-")
    return Path(template % {"name": spider_name, "time": stamp, "pid": os.getpid()})


def package_version() -> str:
    try:
        return metadata.version("scrapy-rep")
    except metadata.PackageNotFoundError:
        return "unknown"


class NullRecorder:
    """The hooks, doing nothing (REP_RECORD unset); Recorder's run on the reactor thread."""

    enabled = False

    def decided(
        self,
        request: Request,
        decision: Mapping[str, Any],
        evaluation: Evaluation,
        record: OriginRecord | None,
    ) -> None:
        """A robots.txt decision (the request's ``robotstxt_decision`` meta)."""

    def usage(self, request: Request, usage: Usage, purposes: Sequence[str]) -> None:
        """Usage preferences that robots.txt states for the request just decided."""

    def usage_refused(
        self, request: Request, usage: Usage, refused: Sequence[str], cause: str, dropped: bool
    ) -> None:
        pass

    def released(self, request: Request, waited: float) -> None:
        pass

    def dropped_at_close(self, entries: Iterable[tuple[str, Request | bytes, float]]) -> None:
        pass

    def page(
        self,
        url: str,
        token: str,
        directives: Mapping[str, Any],
        dropped_requests: int = 0,
        dropped_items: int = 0,
    ) -> None:
        """Page-level directives (robots meta tag, X-Robots-Tag) that applied to a
        response: ``directives`` maps each directive to its source(s), as
        ``response.meta["rep_page"]`` holds them; what enforcing them dropped."""

    def close(self) -> None:
        pass


class Recorder(NullRecorder):
    """Writes the record of one crawl process."""

    enabled = True

    def __init__(self, crawler: Crawler, config: Config, clock: Callable[[], float]) -> None:
        assert config.record is not None and crawler.stats is not None
        self.stats = crawler.stats
        self.signals = crawler.signals
        self.clock = clock
        self.started = clock()
        name = getattr(crawler.spider, "name", None) or getattr(crawler.spidercls, "name", "") or ""
        self.path = record_path(config.record, name, self.started)
        self._batch: list[tuple[Any, ...]] = []
        # origin -> (fetched-at, expires-at, state, copy number): the copy its decisions
        # point at. (Its times tell a refetched copy apart; holding the OriginRecord
        # itself would keep every origin's body in RAM, past REP_MEMORY_MAX_BYTES.)
        self._copies: dict[str, tuple[float | None, float | None, str, int]] = {}
        self._contexts: dict[tuple[Any, ...], int] = {}
        self._usages: dict[tuple[Any, ...], int] = {}
        self._numbers = itertools.count(1)  # of the copies, contexts and usages declared
        # origin -> (final URL, status) of its last robots.txt response
        self._fetched: dict[str, tuple[str, int]] = {}
        # (id of the request, its context): what the last decision was, for a usage
        # line about the same request that follows at once
        self._last: tuple[int, int] = (0, 0)
        self._lost_warned = False
        self.lost = 0  # decisions counted but not written (reactor side: queue full)
        # Once closed, a hook is a no-op counted nowhere: a spider middleware's page
        # whose output is finished after the close (an abandoned async generator) has
        # no file left to go to.
        self.closed = False
        header = {
            "h": SCHEMA_VERSION,
            "rep": package_version(),
            "spider": name,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "start": round(self.started, 3),
            "enforce": config.enforce,
            "page_mode": config.page_mode,
            "max_size": config.max_size,
            "purposes": list(config.purposes),
        }
        self.writer = _Writer(self.path, header)  # opens the file: may raise SettingError
        self._timer: LoopingCall | None = None
        crawler.signals.connect(self._on_response, signal=signals.response_received)
        crawler.signals.connect(self._on_opened, signal=signals.spider_opened)
        logger.info("compliance record: %s", self.path)

    # -- hooks -------------------------------------------------------------------------

    def decided(
        self,
        request: Request,
        decision: Mapping[str, Any],
        evaluation: Evaluation,
        record: OriginRecord | None,
    ) -> None:
        origin = decision["origin"]
        context = self._context(origin, decision, evaluation, record)
        url = request.url
        rest = url[len(origin) :] if url.startswith(origin) else url
        if not rest.startswith("/"):
            rest = url  # (a full URL never starts with "/": readers tell them apart)
        self._last = (id(request), context)
        verdict = ALLOWED if decision["allowed"] else FORBIDDEN
        elapsed = self.clock() - self.started
        self._add((verdict, elapsed, context, rest, decision["waited"]))

    def usage(self, request: Request, usage: Usage, purposes: Sequence[str]) -> None:
        batch = self._batch
        if not batch or self._last[0] != id(request) or batch[-1][0] != ALLOWED:
            return  # (its batch already went to the writer: a rare split, not recorded)
        decision = batch.pop()
        number = self._usage_number(usage, purposes)  # (declared before it is used)
        self._batch.append((*decision, number))

    def usage_refused(
        self, request: Request, usage: Usage, refused: Sequence[str], cause: str, dropped: bool
    ) -> None:
        context = self._last[1] if self._last[0] == id(request) else None
        elapsed = self.clock() - self.started
        usage_id = self._usage_number(usage, ())
        self._add(
            (USAGE_REFUSED, elapsed, request.url, usage_id, list(refused), cause, dropped, context)
        )

    def released(self, request: Request, waited: float) -> None:
        self._add((RELEASED, self.clock() - self.started, request.url, waited))

    def dropped_at_close(self, entries: Iterable[tuple[str, Request | bytes, float]]) -> None:
        now = self.clock()
        for origin, request, since in entries:
            url = request if isinstance(request, bytes) else request.url
            self._add((DROPPED_AT_CLOSE, now - self.started, url, now - since, origin))

    def page(
        self,
        url: str,
        token: str,
        directives: Mapping[str, Any],
        dropped_requests: int = 0,
        dropped_items: int = 0,
    ) -> None:
        elapsed = self.clock() - self.started
        self._add((PAGE, elapsed, url, token, dict(directives), dropped_requests, dropped_items))

    # -- interning ---------------------------------------------------------------------

    def _context(
        self,
        origin: str,
        decision: Mapping[str, Any],
        evaluation: Evaluation,
        record: OriginRecord | None,
    ) -> int:
        if not evaluation.ready:
            state = STATE_UNREACHABLE
        elif evaluation.source == FALLBACK:
            state = STATE_FALLBACK
        elif evaluation.source == STALE:
            state = STATE_STALE
        else:
            state = STATE_RULES if evaluation.kind == RULES else STATE_ALLOW_ALL
        copy = 0
        if state not in (STATE_FALLBACK, STATE_UNREACHABLE):
            fetched = record.fetched_at if record is not None else None
            expires = record.expires_at if record is not None else None
            known = self._copies.get(origin)
            if known is None or known[0] != fetched or known[1] != expires or known[2] != state:
                declared = next(self._numbers)
                url, status = self._fetched.get(origin) or (robots_url(origin), None)
                outcome = record.last_outcome if record is not None else ""
                if status is None and outcome.isdigit():
                    status = int(outcome)
                body = evaluation.body  # hashed and written by the writer thread
                self._add(
                    ("c", declared, origin, url, status, fetched, expires, state, body, outcome)
                )
                known = _bounded(self._copies)[origin] = (fetched, expires, state, declared)
            copy = known[3]
        token, line, rule, reason, source = _CONTEXT_FIELDS(decision)
        key = (copy or origin, state, token, line, reason, source)
        number = self._contexts.get(key)
        if number is None:
            number = _bounded(self._contexts)[key] = next(self._numbers)
            groups = list(decision["groups"])
            self._add(("x", number, copy, origin, state, token, line, rule, groups, reason, source))
        return number

    def _usage_number(self, usage: Usage, purposes: Sequence[str]) -> int:
        # Asked for every allowed request of an origin that states usage preferences, each
        # with a new but equal Usage: keyed by its (hashable, frozen) preferences, which
        # costs a fraction of serialising it to JSON per request.
        key = (tuple(usage.preferences.items()), usage.use, tuple(purposes))
        number = self._usages.get(key)
        if number is None:
            number = _bounded(self._usages)[key] = next(self._numbers)
            self._add(("p", number, usage.to_json(), list(purposes)))
        return number

    # -- batches -----------------------------------------------------------------------

    def _add(self, entry: tuple[Any, ...]) -> None:
        if self.closed:
            return
        batch = self._batch
        batch.append(entry)
        if len(batch) >= BATCH_ENTRIES:
            self.flush()

    def flush(self) -> None:
        """Hand the batch to the writer thread (never waits for it)."""
        if not self._batch:
            return
        batch, self._batch = self._batch, []
        try:
            self.writer.batches.put_nowait(batch)
        except queue.Full:
            self.lost += _decision_count(batch)
            if not self._lost_warned:
                self._lost_warned = True
                logger.warning(
                    "the compliance record (REP_RECORD) %s is being written "
                    "too slowly; decisions beyond %d waiting batches are not recorded "
                    "(counted in rep/record/lost)",
                    self.path,
                    QUEUE_BATCHES,
                )
            # what the lost batch declared must be declared again when next used
            for table in (self._copies, self._contexts, self._usages):
                table.clear()

    def _on_opened(self, spider: Any) -> None:
        # Closed at spider_closed whichever middleware made it (docs/record.md), connected
        # now to run after every spider_closed receiver connected while the crawl was
        # built: the robots.txt middleware's drops at close are recorded.
        self.signals.connect(self.close, signal=signals.spider_closed)
        self._timer = LoopingCall(self._tick)
        self._timer.start(BATCH_SECONDS, now=False)

    def _tick(self) -> None:
        self.flush()
        self._publish()

    def _publish(self) -> int:
        """The totals into the stats; returns the decisions lost."""
        writer = self.writer
        self.stats.set_value("rep/record/decisions", writer.decisions)
        self.stats.set_value("rep/record/bytes", writer.bytes_written)
        lost = self.lost + writer.lost
        if lost:
            self.stats.set_value("rep/record/lost", lost)
        if writer.failure:
            self.stats.set_value("rep/record/write_failed", 1)
        return lost

    def _on_response(self, response: Response, request: Request, **_: Any) -> None:
        origin = request.meta.get(FETCH_META_KEY)
        if origin is None:
            return
        # a robots.txt fetch: where its redirects ended, and its status
        origin = origin if isinstance(origin, str) else origin_of_memo(request.url)
        if origin is not None and response.status not in (301, 302, 303, 307, 308):
            _bounded(self._fetched)[origin] = (response.url, response.status)

    def close(self) -> None:
        """Write what is left, wait for the writer, and put the totals in the stats."""
        if self.closed:
            return
        if self._timer is not None and self._timer.running:
            self._timer.stop()
        self.flush()
        self.closed = True
        self.writer.close()
        lost = self._publish()
        logger.info(
            "compliance record %s: %d decision(s), %d bytes%s",
            self.path,
            self.writer.decisions,
            self.writer.bytes_written,
            f"; {lost} decision(s) could not be written (rep/record/lost)" if lost else "",
        )


class _Writer:
    """The worker thread: JSON lines, compressed, one sync flush per batch."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = path
        self.batches: queue.Queue[list[tuple[Any, ...]] | None] = queue.Queue(QUEUE_BATCHES)
        self.decisions = 0
        self.bytes_written = 0
        self.lost = 0
        self.failure: str | None = None
        self._bodies: set[str] = set()  # hashes whose body this file holds
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._raw: IO[bytes] = open(path, "ab")  # noqa: SIM115 (closed by the thread)
            try:
                # one writer per file: two processes appending would interleave streams
                fcntl.flock(self._raw.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                self._raw.close()
                raise OSError(
                    f"{path} is being written by another process (use %(pid)s or "
                    "%(time)s in REP_RECORD for one file per process)"
                ) from None
            self._start = self._raw.tell()
            # a new gzip member (a file appended to is still one valid gzip file)
            self._gzip = gzip.GzipFile(fileobj=self._raw, mode="wb", mtime=0)
            self._write_lines([json.dumps(header, separators=(",", ":"))])
        except OSError as exc:
            raise SettingError(
                f"REP_RECORD: cannot write the compliance record {path}: {exc.strerror or exc}"
            ) from None
        self._thread = threading.Thread(target=self._run, name="scrapy-rep-record", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.batches.put(None)
        self._thread.join()

    def _run(self) -> None:
        while (batch := self.batches.get()) is not None:
            count = _decision_count(batch)
            if self.failure is not None:
                self.lost += count
                continue
            try:
                self._write_lines([self._encode(entry) for entry in batch])
                self.decisions += count
            except OSError as exc:
                self.failure = exc.strerror or str(exc)
                self.lost += count
                logger.warning(
                    "the compliance record (REP_RECORD) %s cannot be written "
                    "any more (%s): the crawl goes on without it (rep/record/write_failed)",
                    self.path,
                    self.failure,
                )
            except Exception:  # a bug here must not stop the crawl or its other batches
                self.lost += count
                logger.exception("writing the compliance record failed")
        with contextlib.suppress(OSError):
            if self.failure is None:
                self._gzip.close()  # the member's trailer: the file ends cleanly
                self.bytes_written = self._raw.tell() - self._start
            self._raw.close()

    def _write_lines(self, lines: list[str]) -> None:
        data = ("\n".join(lines) + "\n").encode("utf-8")
        self._gzip.write(data)
        self._gzip.flush(zlib.Z_SYNC_FLUSH)  # readable up to here if the process dies
        self._raw.flush()
        self.bytes_written = self._raw.tell() - self._start

    def _encode(self, entry: tuple[Any, ...]) -> str:
        kind = entry[0]
        if kind in (ALLOWED, FORBIDDEN):
            doc: dict[str, Any] = {"v": kind, "t": round(entry[1], 3), "x": entry[2], "u": entry[3]}
            if entry[4]:
                doc["w"] = round(entry[4], 3)
            if len(entry) > 5:
                doc["p"] = entry[5]
        elif kind == "x":
            _, number, copy, origin, state, token, line, rule, groups, reason, source = entry
            doc = {"x": number, "k": token, "why": reason}
            if copy:
                doc["c"] = copy
            else:
                doc.update(o=origin, state=state)
            if line is not None:
                doc.update(l=line, r=rule)
            if groups:
                doc["g"] = groups
            if source and source != "fresh":
                doc["src"] = source
        elif kind == "c":
            _, number, origin, url, status, fetched, expires, state, body, outcome = entry
            digest = hashlib.sha256(body).hexdigest()
            doc = {
                "c": number,
                "o": origin,
                "url": url,
                "status": status,
                "fetched": fetched,
                "expires": expires,
                "state": state,
                "sha256": digest,
                "outcome": outcome,
            }
            if digest not in self._bodies:
                self._bodies.add(digest)
                try:
                    doc["body"] = body.decode("utf-8")
                except UnicodeDecodeError:
                    doc["body_b64"] = base64.b64encode(body).decode("ascii")
        elif kind == "p":
            doc = {"p": entry[1], "usage": entry[2], "purposes": entry[3]}
        elif kind == USAGE_REFUSED:
            _, t, url, usage, refused, cause, dropped, context = entry
            doc = {"v": kind, "t": round(t, 3), "u": url, "p": usage, "refused": refused}
            doc.update(by=cause, dropped=dropped)
            if context:
                doc["x"] = context
        elif kind == RELEASED:
            doc = {"v": kind, "t": round(entry[1], 3), "u": entry[2], "w": round(entry[3], 3)}
        elif kind == DROPPED_AT_CLOSE:
            _, t, url, waited, origin = entry
            if isinstance(url, bytes):  # held as bytes (crawl/request_codec.py)
                url = _held_url(url)
            doc = {"v": kind, "t": round(t, 3), "u": url, "w": round(waited, 3), "o": origin}
        else:
            assert kind == PAGE
            _, t, url, token, directives, dropped_requests, dropped_items = entry
            doc = {"v": kind, "t": round(t, 3), "u": url, "k": token, "d": directives}
            if dropped_requests or dropped_items:
                doc.update(dr=dropped_requests, di=dropped_items)
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False, default=str)


_CONTEXT_FIELDS = itemgetter("product_token", "line", "rule", "reason", "source")


def _bounded(table: dict[Any, Any]) -> dict[Any, Any]:
    """``table``, emptied first once it holds MAX_INTERNED entries (bounded memory)."""
    if len(table) >= MAX_INTERNED:
        table.clear()
    return table


def _decision_count(batch: Iterable[tuple[Any, ...]]) -> int:
    return sum(1 for entry in batch if entry[0] in VERDICTS)


def _held_url(blob: bytes) -> str | None:
    try:  # our own bytes: a pickled Request.to_dict() (crawl/request_codec.py)
        return str(pickle.loads(blob)["url"])
    except Exception:
        return None


# One recorder per crawler: the downloader middleware (robots.txt decisions) and the
# spider middleware (page directives) write into the same file, whichever is built
# first making it. Weak keys: a finished crawler and its recorder go together.
_RECORDERS: weakref.WeakKeyDictionary[Crawler, NullRecorder] = weakref.WeakKeyDictionary()


def recorder_for(crawler: Crawler, config: Config, clock: Callable[[], float]) -> NullRecorder:
    """The crawl's recorder, made on the first call for ``crawler`` and shared after;
    it closes itself at spider_closed."""
    recorder = _RECORDERS.get(crawler)
    if recorder is None:
        made = NullRecorder() if config.record is None else Recorder(crawler, config, clock)
        recorder = _RECORDERS[crawler] = made
    return recorder
