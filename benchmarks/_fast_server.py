"""A small keep-alive HTTP/1.1 server for the crawl benchmarks (standard library only).

The test suite's mock server (``tests/support/mockserver.py``) is built for fidelity: a thread
and a new connection per request, every misbehaviour scriptable.  That makes it the
bottleneck of a throughput benchmark (~450 pages/s here), so a middleware's cost would
drown in the server's.  This one answers from one asyncio loop on persistent
connections, several times faster than Scrapy can ask, so the crawl's own work is what
the benchmark measures.

Run ``python benchmarks/_fast_server.py``: it binds 127.0.0.1 on a free port, prints
``PORT <n>`` and serves until killed.  It speaks the subset of the mock server's
control API the benchmarks use: ``POST /__mock/config`` with
``{"hosts": {"<hostname>": {"robots": {"body": str, "delay": seconds}}}}``.  Unknown
hosts get an empty robots.txt; every other path is a small HTML page.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

PAGE = b"<html><head><title>page</title></head><body>" + b"x" * 512 + b"</body></html>"
HOSTS: dict[str, dict[str, Any]] = {}


def _response(status: str, body: bytes, content_type: bytes) -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n"
        "Connection: keep-alive\r\nContent-Type: "
    ).encode()
    return head + content_type + b"\r\n\r\n" + body


PAGE_RESPONSE = _response("200 OK", PAGE, b"text/html")


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    body = await reader.readexactly(length) if length else b""
    return method, target, headers, body


async def _answer(method: str, target: str, headers: dict[str, str], body: bytes) -> bytes:
    if target.startswith("/__mock/config") and method == "POST":
        for name, spec in json.loads(body)["hosts"].items():
            HOSTS[name.lower()] = spec
        return _response("200 OK", b"{}", b"application/json")
    if target != "/robots.txt":
        return PAGE_RESPONSE
    host = headers.get("host", "").rsplit(":", 1)[0].lower()
    robots = HOSTS.get(host, {}).get("robots", {})
    if robots.get("delay"):
        await asyncio.sleep(float(robots["delay"]))
    return _response("200 OK", str(robots.get("body", "")).encode(), b"text/plain")


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            request = await _read_request(reader)
            writer.write(await _answer(*request))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, ValueError):
        pass
    finally:
        writer.close()


async def main() -> None:
    server = await asyncio.start_server(_serve, "127.0.0.1", 0, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    sys.stdout.write(f"PORT {port}\n")
    sys.stdout.flush()
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
