"""The test-side handle on the ``tests/mockserver.py`` subprocess: start, addresses, control.

The ``mockserver`` fixture of ``tests/conftest.py`` starts one per test session.
"""

from __future__ import annotations

import itertools
import json
import re
import secrets
import select
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

MOCKSERVER_SCRIPT = Path(__file__).resolve().parent / "mockserver.py"


class MockServer:
    """Handle on the ``tests/mockserver.py`` subprocess (one per test session)."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, str(MOCKSERVER_SCRIPT)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        ready, _, _ = select.select([self._proc.stdout], [], [], 20)
        line = self._proc.stdout.readline() if ready else ""
        match = re.fullmatch(r"PORT (\d+)\s*", line)
        if not match:
            self._proc.kill()
            raise RuntimeError(f"mock server did not start (first line {line!r})")
        self.port: int = int(match.group(1))
        self._counter = itertools.count(1)
        # Never let a proxy setting route control calls elsewhere.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    # -- lifecycle -----------------------------------------------------------

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()

    # -- addresses -----------------------------------------------------------

    def unique_host(self, prefix: str = "h") -> str:
        """A hostname no other test uses, ending in ``.test``.

        A prefix starting with ``nxdomain`` gives a name that fails to resolve.
        """
        slug = re.sub(r"[^a-z0-9-]+", "-", prefix.lower()).strip("-")[:30].strip("-") or "h"
        return f"{slug}-{next(self._counter)}-{secrets.token_hex(2)}.test"

    def origin(self, host: str) -> str:
        return f"http://{host}:{self.port}"

    def url(self, host: str, path: str = "/") -> str:
        if not path.startswith("/"):
            path = "/" + path
        return f"http://{host}:{self.port}{path}"

    # -- control API -----------------------------------------------------------

    def _call(self, method: str, action: str, payload: Any = None, query: str = "") -> Any:
        url = f"http://127.0.0.1:{self.port}/__mock/{action}"
        if query:
            url += "?" + query
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(request, timeout=10) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise ValueError(f"mock server rejected {action}: {exc.read().decode()}") from exc

    def configure(self, host: str, spec: dict[str, Any]) -> None:
        """Set the HostSpec of ``host`` (replacing any previous one, counters restart)."""
        self.configure_many({host: spec})

    def configure_many(self, hosts: dict[str, dict[str, Any]]) -> None:
        self._call("POST", "config", {"hosts": hosts})

    def open_gate(self, name: str) -> float:
        """Release the responses held on gate ``name`` (spec key ``hold``); returns
        the server's ``time.monotonic()`` when it opened."""
        return float(self._call("POST", "open", {"gate": name})["t"])

    def reset(self) -> None:
        """Forget every host spec and log entry (affects other tests' hosts too)."""
        self._call("POST", "reset", {})

    def log(self, host: str | None = None) -> list[dict[str, Any]]:
        """Requests received (all hosts, or one), in arrival order."""
        query = "" if host is None else urllib.parse.urlencode({"host": host})
        result: list[dict[str, Any]] = self._call("GET", "log", query=query)
        return result

    def paths(self, host: str) -> list[str]:
        """Paths (with ``?query``) received for ``host``, in arrival order."""
        return [entry["path"] for entry in self.log(host)]

    def count(self, host: str, path: str) -> int:
        """How many times ``host`` received ``path`` (exact, with query)."""
        return self.paths(host).count(path)

    def time(self) -> float:
        """The server's ``time.monotonic()`` (comparable to log ``t`` values)."""
        return float(self._call("GET", "time")["t"])
