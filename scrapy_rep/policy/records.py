"""The per-origin record every store keeps, and its versioned, pickle-free encoding.

Nothing read from a store is trusted: a record that is corrupt, of an unknown schema
version, or of the wrong shape decodes to ``None`` (a cache miss), never an exception.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import asdict, dataclass, replace
from typing import Any

SCHEMA_VERSION = 1

# What the last good copy of an origin's robots.txt says.
RULES = "rules"  # a 2xx body: its rules apply
ALLOW_ALL = "allow-all"  # 4xx (not 429), or too many redirects: no restrictions
UNREACHABLE = "unreachable"  # 429, 5xx, network error: the origin is not to be crawled yet
KINDS = (RULES, ALLOW_ALL)


@dataclass(frozen=True, slots=True)
class OriginRecord:
    """What we know about one origin's robots.txt.

    The good copy (``kind``/``body``/``fetched_at``) survives failed refetches: Google
    keeps using the last good copy for up to 30 days of unreachability.
    """

    kind: str | None = None  # RULES or ALLOW_ALL; None until one fetch succeeded
    body: bytes = b""  # the robots.txt body (already cut to the size limit)
    fetched_at: float | None = None  # when the good copy was fetched
    expires_at: float = 0.0  # when the good copy is due for a refetch
    unreachable_since: float | None = None  # start of the current unreachable spell
    next_retry_at: float | None = None  # earliest next fetch while unreachable
    failures: int = 0  # consecutive unreachable outcomes, for the backoff
    last_outcome: str = ""  # what the last fetch returned, for logs and reports

    @property
    def unreachable(self) -> bool:
        return self.unreachable_since is not None

    def evolve(self, **changes: Any) -> OriginRecord:
        return replace(self, **changes)


def encode_record(record: OriginRecord) -> bytes:
    """A compact JSON document; the body travels as base64 because it is raw bytes."""
    body = base64.b64encode(record.body).decode("ascii")
    doc = {"v": SCHEMA_VERSION, **asdict(record), "body": body}
    return json.dumps(doc, separators=(",", ":")).encode("ascii")


def _opt_time(value: Any) -> float | None:
    return None if value is None else _time(value)


def _time(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError("not a finite number")
    return float(value)


def decode_record(raw: bytes | str) -> OriginRecord | None:
    """Decode ``encode_record`` output; anything unexpected is a miss (None)."""
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict) or doc.get("v") != SCHEMA_VERSION:
            return None
        kind, failures, last_outcome = doc["kind"], doc["failures"], doc["last_outcome"]
        if (kind is not None and kind not in KINDS) or not isinstance(last_outcome, str):
            return None
        if isinstance(failures, bool) or not isinstance(failures, int) or failures < 0:
            return None
        return OriginRecord(
            kind=kind,
            body=base64.b64decode(doc["body"], validate=True),
            fetched_at=_opt_time(doc["fetched_at"]),
            expires_at=_time(doc["expires_at"]),
            unreachable_since=_opt_time(doc["unreachable_since"]),
            next_retry_at=_opt_time(doc["next_retry_at"]),
            failures=failures,
            last_outcome=last_outcome,
        )
    except (ValueError, TypeError, KeyError, binascii.Error, RecursionError):
        return None
