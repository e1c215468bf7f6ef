"""Scriptable multi-origin HTTP server for scrapy-rep's real-crawl tests.

Standalone (standard library only). Run ``python tests/support/mockserver.py``: it
binds 127.0.0.1 on a free port, prints ``PORT <n>`` on stdout and serves until killed.
``MockServer`` (at the end) is the tests' handle on that subprocess: it starts it, names
its addresses and drives the control API; the ``mockserver`` fixture starts one per
test session.

Every origin lives on the same port and is chosen by the hostname in the ``Host``
header, so each test can use its own ``<unique>.test`` hostnames. A control API,
reachable on any host, configures the origins and reads back what was received:

* ``POST /__mock/config`` with ``{"hosts": {"<hostname>": HostSpec}}``: replace the
  spec of each named host (other hosts are kept) and restart its fetch counters.
* ``GET /__mock/log[?host=<hostname>]``: JSON list of received requests
  ``{"host", "method", "path", "t", "headers"}`` in arrival order (``t`` is the
  server's ``time.monotonic()`` when the request head had been read).
* ``GET /__mock/time``: ``{"t": time.monotonic()}`` of the server.
* ``POST /__mock/reset``: forget all specs, counters and logs.
* ``POST /__mock/open`` with ``{"gate": "<name>"}``: open the named gate, releasing every
  response held on it (and any later one); answers ``{"t": time.monotonic()}``.

HostSpec: ``{"robots": ResponseSpec | [ResponseSpec, ...], "pages": {"/path":
ResponseSpec | [...]}, "default": ResponseSpec}``. With a list, the n-th request of
that path gets the n-th item and the last item repeats. A page key may include the
query string (``/a?b=1``); an exact match wins over a match on the path alone.

ResponseSpec keys (all optional): ``status``, ``body``, ``body_b64``, ``headers``,
``gzip``, ``size``, ``tail``, ``delay``, ``stall_after``, ``stall``, ``reset_after``,
``truncate_after``, ``bad_chunking``, ``redirect``, ``links``, ``hold`` (a gate name:
the response waits until the test opens that gate, so a test waits on a condition
instead of a clock) with ``hold_max`` (at most this many seconds, default 60),
``stream_size`` (announce that many bytes and generate them while sending: ``body``,
then filler rules, until the client hangs up) and ``bomb`` (``{"coding": "gzip" |
"deflate" | "br" | "zstd", "size": n}``: ``body`` then newlines up to ``n`` decoded
bytes, compressed in bounded memory). See ``build_response`` and ``send_response`` for
their exact meaning.

Page-level directives (robots meta tags, ``X-Robots-Tag``, ``rel`` links): ``meta``
(a list of ``[name, content]``: meta tags in the page's head), ``body_meta`` (the same,
in its body), ``rel_links`` (a list of ``[href, rel]``: ``<a>`` links with that ``rel``),
``header_lines`` (a list of ``[name, value]`` sent as one field line each, so a header
can repeat) and ``content_type``. See ``directives_page``.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import html
import itertools
import json
import re
import secrets
import select
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

CONTROL_PREFIX = "/__mock/"
FILLER_LINE = "Disallow: /filler-{:06d}\n"


class State:
    """Shared, lock-protected server state."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.hosts: dict[str, dict[str, Any]] = {}
        self.counters: dict[tuple[str, str], int] = {}
        self.log: list[dict[str, Any]] = []
        self.gates: dict[str, threading.Event] = {}

    def gate(self, name: str) -> threading.Event:
        with self.lock:
            return self.gates.setdefault(name, threading.Event())

    def configure(self, hosts: dict[str, dict[str, Any]]) -> None:
        with self.lock:
            for name, spec in hosts.items():
                host = name.lower().rstrip(".")
                self.hosts[host] = spec
                for key in [k for k in self.counters if k[0] == host]:
                    del self.counters[key]

    def reset(self) -> None:
        with self.lock:
            self.hosts.clear()
            self.counters.clear()
            self.log.clear()

    def record(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.log.append(entry)

    def entries(self, host: str | None) -> list[dict[str, Any]]:
        with self.lock:
            if host is None:
                return list(self.log)
            host = host.lower().rstrip(".")
            return [e for e in self.log if e["host"] == host]

    def pick(self, host: str, path: str) -> tuple[dict[str, Any] | None, str]:
        """Return the ResponseSpec to use for this request and its kind."""
        with self.lock:
            spec = self.hosts.get(host, {})
            bare = path.split("?", 1)[0]
            if bare == "/robots.txt":
                if "robots" not in spec:
                    return {"status": 404, "body": ""}, "robots"
                return self._nth(spec["robots"], (host, "/robots.txt")), "robots"
            pages = spec.get("pages", {})
            for key in (path, bare):
                if key in pages:
                    return self._nth(pages[key], (host, key)), "page"
            return spec.get("default"), "page"

    def _nth(self, item: Any, counter_key: tuple[str, str]) -> dict[str, Any]:
        count = self.counters.get(counter_key, 0)
        self.counters[counter_key] = count + 1
        if isinstance(item, list):
            if not item:
                return {}
            chosen: dict[str, Any] = item[min(count, len(item) - 1)]
            return chosen
        result: dict[str, Any] = item
        return result


STATE = State()


def filler(size: int, head: str = "", tail: str = "") -> bytes:
    """A valid robots.txt of exactly ``size`` bytes: head, filler rules, then tail."""
    head_b = head.encode("utf-8")
    if head_b and not head_b.endswith(b"\n"):
        head_b += b"\n"
    tail_b = tail.encode("utf-8")
    room = size - len(head_b) - len(tail_b)
    if room < 0:
        raise ValueError(f"body and tail are longer than size={size}")
    parts = [head_b]
    index = 0
    line_len = len(FILLER_LINE.format(0))
    while room >= line_len:
        line = FILLER_LINE.format(index).encode("ascii")
        parts.append(line)
        room -= len(line)
        index += 1
    if room == 1:
        parts.append(b"\n")
    elif room > 1:
        parts.append(b"#" + b"x" * (room - 2) + b"\n")
    parts.append(tail_b)
    data = b"".join(parts)
    assert len(data) == size
    return data


def anchors(links: list[str] | None) -> str:
    return "".join(
        f'<a href="{html.escape(link, quote=True)}">{html.escape(link)}</a>\n'
        for link in links or []
    )


def default_page(path: str, links: list[str] | None = None) -> bytes:
    if not links:
        return f"<html><body>{html.escape(path)}</body></html>".encode()
    return f"<html><body>{html.escape(path)}\n{anchors(links)}</body></html>".encode()


def directives_page(spec: dict[str, Any], path: str) -> bytes:
    """An HTML page with ``spec``'s meta tags in its head (and ``body_meta`` in its body),
    its ``links`` as plain anchors and its ``rel_links`` as anchors with a ``rel``."""
    esc = html.escape

    def metas(pairs: list[list[str]]) -> str:
        return "".join(f'<meta name="{esc(n)}" content="{esc(c)}">\n' for n, c in pairs)

    rel_anchors = "".join(
        f'<a href="{esc(href)}" rel="{esc(rel)}">{esc(href)}</a>\n'
        for href, rel in spec.get("rel_links", [])
    )
    return (
        f"<!DOCTYPE html>\n<html><head><title>{esc(path)}</title>\n"
        f"{metas(spec.get('meta', []))}</head>\n<body>{esc(path)}\n"
        f"{metas(spec.get('body_meta', []))}{anchors(spec.get('links'))}{rel_anchors}"
        "</body></html>"
    ).encode()


def build_response(
    spec: dict[str, Any] | None, kind: str, path: str
) -> tuple[int, dict[str, str], bytes]:
    """Turn a ResponseSpec into (status, headers, wire body)."""
    spec = spec or {}
    headers: dict[str, str] = {}
    status = int(spec.get("status", 301 if "redirect" in spec else 200))
    if "body_b64" in spec:
        body = base64.b64decode(spec["body_b64"])
        headers["Content-Type"] = "application/octet-stream"
    elif "size" in spec:
        body = filler(int(spec["size"]), spec.get("body", ""), spec.get("tail", ""))
        headers["Content-Type"] = "text/plain"
    elif "body" in spec:
        body = str(spec["body"]).encode("utf-8")
        headers["Content-Type"] = "text/plain" if kind == "robots" else "text/html"
    elif DIRECTIVE_PAGE_KEYS & set(spec):
        body = directives_page(spec, path)
        headers["Content-Type"] = "text/html; charset=utf-8"
    elif kind == "robots" or "redirect" in spec:
        body = b""
        headers["Content-Type"] = "text/plain"
    else:
        body = default_page(path, spec.get("links"))
        headers["Content-Type"] = "text/html; charset=utf-8"
    if "content_type" in spec:
        headers["Content-Type"] = str(spec["content_type"])
    if "links" in spec and "body" in spec:
        body += anchors(spec["links"]).encode("utf-8")
    if "redirect" in spec:
        headers["Location"] = str(spec["redirect"])
    if spec.get("gzip"):
        body = gzip.compress(body)
        headers["Content-Encoding"] = "gzip"
    if "bomb" in spec:
        coding = str(spec["bomb"]["coding"])
        body = bomb(coding, body, int(spec["bomb"]["size"]))
        headers["Content-Encoding"] = coding
    if "stream_size" in spec:
        headers["Content-Length"] = str(int(spec["stream_size"]))
    headers.update({str(k): str(v) for k, v in spec.get("headers", {}).items()})
    return status, headers, body


_BOMBS: dict[tuple[str, bytes, int], bytes] = {}
_BOMB_STEP = 1024 * 1024


def _deflate_bomb(coding: str, head: bytes, size: int) -> bytes:
    """gzip (RFC 1952) or zlib (RFC 1950) wrapping of raw deflate. Each MiB of newlines is
    compressed once: after a full flush the compressor starts afresh, so every full MiB
    compresses to the same bytes, which are repeated (the checksum is computed apart)."""
    codec = zlib.compressobj(9, zlib.DEFLATED, -15)
    parts = [codec.compress(head), codec.flush(zlib.Z_FULL_FLUSH)]
    step = b"\n" * _BOMB_STEP
    full, rest = divmod(size - len(head), _BOMB_STEP)
    segment = codec.compress(step) + codec.flush(zlib.Z_FULL_FLUSH) if full else b""
    parts.append(segment * full)
    parts.append(codec.compress(step[:rest]) + codec.flush())
    checksum = zlib.crc32 if coding == "gzip" else zlib.adler32
    value = checksum(head)
    for _ in range(full):
        value = checksum(step, value)
    value = checksum(step[:rest], value)
    deflated = b"".join(parts)
    if coding == "gzip":
        header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
        return header + deflated + struct.pack("<II", value, size & 0xFFFFFFFF)
    return b"\x78\x01" + deflated + struct.pack(">I", value)


def _compressor(coding: str) -> tuple[Any, Any]:
    """(compress(chunk) -> bytes, finish() -> bytes) for brotli or zstd."""
    if coding == "br":
        import brotli

        codec = brotli.Compressor(quality=1)
        return codec.process, codec.finish
    if coding == "zstd":
        try:
            from compression import zstd
        except ImportError:
            from backports import zstd
        codec = zstd.ZstdCompressor()
        return codec.compress, lambda: codec.flush(zstd.ZstdCompressor.FLUSH_FRAME)
    raise ValueError(f"unknown bomb coding {coding!r}")


def bomb(coding: str, head: bytes, size: int) -> bytes:
    """``head`` then newlines up to ``size`` bytes, compressed with ``coding``: made one
    MiB at a time (the decoded file never exists in memory) and kept for the next call."""
    key = (coding, head, size)
    if key not in _BOMBS:
        if coding in ("gzip", "deflate"):
            _BOMBS[key] = _deflate_bomb(coding, head, size)
        else:
            compress, finish = _compressor(coding)
            parts = [compress(head)]
            step = b"\n" * _BOMB_STEP
            left = size - len(head)
            while left > 0:
                parts.append(compress(step[: min(left, _BOMB_STEP)]))
                left -= _BOMB_STEP
            parts.append(finish())
            _BOMBS[key] = b"".join(parts)
    return _BOMBS[key]


def streamed_chunks(head: bytes, size: int) -> Any:
    """``head`` then filler rules, ``size`` bytes in all, generated 64 KiB at a time."""
    yield head
    sent = len(head)
    index = 0
    while sent < size:
        lines = [FILLER_LINE.format(i).encode("ascii") for i in range(index, index + 2900)]
        index += 2900
        chunk = b"".join(lines)[: size - sent]
        yield chunk
        sent += len(chunk)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def version_string(self) -> str:
        return "scrapy-rep-mockserver"

    timeout = 120  # idle connections do not live forever

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_GET(self) -> None:
        self.dispatch()

    do_POST = do_HEAD = do_PUT = do_DELETE = do_OPTIONS = do_PATCH = do_GET

    # -- routing ---------------------------------------------------------------

    def dispatch(self) -> None:
        arrived = time.monotonic()
        host = (self.headers.get("Host") or "").strip().lower()
        if host.startswith("["):
            host = host[: host.find("]") + 1]
        else:
            host = host.rsplit(":", 1)[0] if ":" in host else host
        host = host.rstrip(".")
        length = int(self.headers.get("Content-Length") or 0)
        request_body = self.rfile.read(length) if length else b""
        if self.path.startswith(CONTROL_PREFIX):
            self.control(request_body)
            return
        STATE.record(
            {
                "host": host,
                "method": self.command,
                "path": self.path,
                "t": arrived,
                "headers": {k: v for k, v in self.headers.items()},
            }
        )
        spec, kind = STATE.pick(host, self.path)
        if spec is None and kind == "page":
            spec = {}
        status, headers, body = build_response(spec, kind, self.path.split("?", 1)[0])
        self.send_spec(spec or {}, status, headers, body)

    def control(self, request_body: bytes) -> None:
        parts = urlsplit(self.path)
        action = parts.path[len(CONTROL_PREFIX) :]
        try:
            if action == "config" and self.command == "POST":
                data = json.loads(request_body or b"{}")
                for host_spec in data.get("hosts", {}).values():
                    validate_host_spec(host_spec)
                STATE.configure(data.get("hosts", {}))
                result: Any = {"ok": True}
            elif action == "reset" and self.command == "POST":
                STATE.reset()
                result = {"ok": True}
            elif action == "log":
                host = parse_qs(parts.query).get("host", [None])[0]
                result = STATE.entries(host)
            elif action == "time":
                result = {"t": time.monotonic()}
            elif action == "open" and self.command == "POST":
                STATE.gate(str(json.loads(request_body or b"{}")["gate"])).set()
                result = {"t": time.monotonic()}
            else:
                self.send_plain(404, json.dumps({"error": f"unknown control {action!r}"}))
                return
        except (ValueError, TypeError, KeyError) as exc:
            self.send_plain(400, json.dumps({"error": repr(exc)}))
            return
        self.send_plain(200, json.dumps(result))

    def send_plain(self, status: int, text: str) -> None:
        data = text.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    # -- response with fault injection ------------------------------------------

    def send_spec(
        self, spec: dict[str, Any], status: int, headers: dict[str, str], body: bytes
    ) -> None:
        if spec.get("delay"):
            time.sleep(float(spec["delay"]))
        if spec.get("hold"):
            STATE.gate(str(spec["hold"])).wait(float(spec.get("hold_max", 60)))
        if int(spec.get("reset_after", 0)) < 0:
            self.reset_connection()  # RST before the status line: no response at all
            return
        body_to_send = b"" if self.command == "HEAD" else body
        self.send_response(status)
        lowered = {k.lower() for k in headers}
        for name, value in headers.items():
            self.send_header(name, value)
        for name, value in spec.get("header_lines", []):
            self.send_header(str(name), str(value))
        if spec.get("bad_chunking"):
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            half = body_to_send[: max(1, len(body_to_send) // 2)]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(half), half))
            # A chunk-size line that is not hexadecimal, then a hang-up.
            self.wfile.write(b"zz-not-a-size\r\nxxxx\r\n")
            self.wfile.flush()
            self.hang_up()
            return
        if "content-length" not in lowered:
            self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.flush()
        if "reset_after" in spec:
            self.wfile.write(body_to_send[: int(spec["reset_after"])])
            self.wfile.flush()
            self.reset_connection()
            return
        if "truncate_after" in spec:
            self.wfile.write(body_to_send[: int(spec["truncate_after"])])
            self.wfile.flush()
            self.hang_up()
            return
        if "stream_size" in spec and self.command != "HEAD":
            for chunk in streamed_chunks(body_to_send, int(spec["stream_size"])):
                self.wfile.write(chunk)  # an OSError once the client hangs up ends it
            self.wfile.flush()
            self.close_connection = True
            return
        if "stall_after" in spec or "stall" in spec:
            cut = int(spec.get("stall_after", 0))
            self.wfile.write(body_to_send[:cut])
            self.wfile.flush()
            time.sleep(float(spec.get("stall", 0)))
            self.wfile.write(body_to_send[cut:])
        else:
            self.wfile.write(body_to_send)
        self.wfile.flush()
        self.close_connection = True

    def hang_up(self) -> None:
        """Close the connection normally (FIN) without finishing the response."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def reset_connection(self) -> None:
        """Abort the connection with a TCP RST (SO_LINGER 0)."""
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()


ALLOWED_KEYS = {
    "status",
    "body",
    "body_b64",
    "headers",
    "gzip",
    "size",
    "tail",
    "delay",
    "stall_after",
    "stall",
    "reset_after",
    "truncate_after",
    "bad_chunking",
    "redirect",
    "links",
    "hold",
    "hold_max",
    "stream_size",
    "bomb",
    "meta",
    "body_meta",
    "rel_links",
    "header_lines",
    "content_type",
}
# Keys that make the default page a page built by directives_page.
DIRECTIVE_PAGE_KEYS = {"meta", "body_meta", "rel_links"}


def validate_response_spec(spec: Any) -> None:
    items = spec if isinstance(spec, list) else [spec]
    for item in items:
        if not isinstance(item, dict):
            raise TypeError(f"ResponseSpec must be an object, got {item!r}")
        unknown = set(item) - ALLOWED_KEYS
        if unknown:
            raise ValueError(f"unknown ResponseSpec keys {sorted(unknown)}")
        if "size" in item:
            filler(int(item["size"]), item.get("body", ""), item.get("tail", ""))


def validate_host_spec(spec: Any) -> None:
    if not isinstance(spec, dict):
        raise TypeError(f"HostSpec must be an object, got {spec!r}")
    unknown = set(spec) - {"robots", "pages", "default"}
    if unknown:
        raise ValueError(f"unknown HostSpec keys {sorted(unknown)}")
    if "robots" in spec:
        validate_response_spec(spec["robots"])
    if "default" in spec:
        validate_response_spec(spec["default"])
    for page in spec.get("pages", {}).values():
        validate_response_spec(page)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # bursts of connections must not hit the backlog

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError, OSError)):
            return  # the client went away (timeouts, cancellations): expected in tests
        super().handle_error(request, client_address)


# -- the tests' handle on the server subprocess -----------------------------

MOCKSERVER_SCRIPT = Path(__file__).resolve()


class MockServer:
    """Handle on this module run as a subprocess (one per test session)."""

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


def main() -> None:
    server = Server(("127.0.0.1", 0), Handler)
    print(f"PORT {server.server_address[1]}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever(poll_interval=0.1)


if __name__ == "__main__":
    main()
