"""A local, offline demo site for scrapy-rep: several origins, one per port on 127.0.0.1.

Standard library only. Each origin plays one robots.txt situation from SPEC section 2:

========== ============================================================================
role       robots.txt
========== ============================================================================
rules      200 with a group per product token, so token overrides change verdicts
missing    404: no rules, everything may be crawled
flaky      503, then 200 on the retry (every other robots.txt request is a 503)
redirect   301 to the ``cdn`` port, which 302s to the file that finally answers 200
cdn        only serves the redirect hops above; nobody crawls it
delay      200 with ``Crawl-delay: 1``
slow       200, but only after 2 seconds
========== ============================================================================

Every origin is its own port, so no DNS is needed: ``http://127.0.0.1:<port>``.

Standalone: ``python example_project/demo_site.py [--port-base 8600] [--write FILE]``
prints one JSON line ``{"origins": {role: base_url}}``, writes the same JSON to FILE
(which the spiders read, ``scrapy crawl tour -a site=FILE``) and serves until Ctrl-C.
``run_demo.py`` imports ``DemoSite`` and runs it in-process instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# Fixed order, so ``--port-base N`` gives the same role the same port every time.
ROLES = ("rules", "missing", "flaky", "redirect", "cdn", "delay", "slow")

SLOW_ROBOTS_SECONDS = 2.0

RULES_ROBOTS = """\
# scrapy-rep demo: one site, one group per crawler, different verdicts.

User-agent: *
Disallow: /private/
Disallow: /drafts/
Disallow: /shop/

# The project-wide token: ROBOTSTXT_USER_AGENT = "DemoBot" in demo/settings.py
User-agent: DemoBot
Disallow: /private/
Disallow: /shop/

# Spider attribute robotstxt_user_agent = "NightOwl" (spider "nightowl")
User-agent: NightOwl
Allow: /public/
Allow: /$
Disallow: /

# custom_settings = {"ROBOTSTXT_USER_AGENT": "ArchiveBot"} (spider "archive")
User-agent: ArchiveBot
Disallow: /shop/

# Request.meta["robotstxt_user_agent"] = "PressBot" (one request of spider "tour")
User-agent: PressBot
Allow: /private/report.html
Disallow: /
"""

FLAKY_ROBOTS = "User-agent: *\nDisallow: /tmp/\n"
# Served by the cdn port at the end of the redirect chain; applies to the redirect origin.
REDIRECTED_ROBOTS = "# served via two redirects\nUser-agent: *\nDisallow: /old/\n"
DELAY_ROBOTS = "User-agent: *\nCrawl-delay: 1\n"
SLOW_ROBOTS = "User-agent: *\nDisallow: /admin/\n"


@dataclass
class Hit:
    """One robots.txt-related request, as the site saw it."""

    at: float  # when the request arrived (epoch seconds)
    took: float  # seconds until the answer was ready
    role: str
    path: str
    status: int
    user_agent: str


@dataclass
class DemoSite:
    """All demo origins. ``start()`` binds and serves them; ``stop()`` shuts them down."""

    port_base: int = 0  # 0: every origin on a free port
    origins: dict[str, str] = field(default_factory=dict)
    hits: list[Hit] = field(default_factory=list)
    started_at: float = 0.0
    _servers: list[ThreadingHTTPServer] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _flaky_count: int = 0

    def start(self) -> DemoSite:
        self.started_at = time.time()
        for index, role in enumerate(ROLES):
            port = self.port_base + index if self.port_base else 0
            server = _Server(("127.0.0.1", port), _Handler)
            server.site = self
            server.role = role
            self._servers.append(server)
            self.origins[role] = f"http://127.0.0.1:{server.server_address[1]}"
            threading.Thread(target=server.serve_forever, name=f"demo-{role}", daemon=True).start()
        return self

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self._servers.clear()

    def __enter__(self) -> DemoSite:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def describe(self) -> dict[str, Any]:
        return {"origins": dict(self.origins)}

    def record(self, hit: Hit) -> None:
        with self._lock:
            self.hits.append(hit)

    def next_flaky_status(self) -> int:
        # Alternate 503/200, so every crawl (each one fetches robots.txt once, then
        # retries once) sees a 503 first, however many crawls this site serves.
        with self._lock:
            self._flaky_count += 1
            return 503 if self._flaky_count % 2 else 200

    # -- what each role answers --------------------------------------------------------

    def robots(self, role: str, path: str) -> tuple[int, dict[str, str], str] | None:
        """(status, headers, body) for a robots.txt-related path, or None for a page."""
        if role == "cdn":
            if path == "/moved/robots.txt":
                return 302, {"Location": "/robots/v2.txt"}, ""
            if path == "/robots/v2.txt":
                return 200, {}, REDIRECTED_ROBOTS
            return 404, {}, "not here"
        if path != "/robots.txt":
            return None
        if role == "rules":
            return 200, {}, RULES_ROBOTS
        if role == "missing":
            return 404, {}, "no robots.txt here"
        if role == "flaky":
            status = self.next_flaky_status()
            return status, {}, FLAKY_ROBOTS if status == 200 else "busy, come back later"
        if role == "redirect":
            return 301, {"Location": f"{self.origins['cdn']}/moved/robots.txt"}, ""
        if role == "delay":
            return 200, {}, DELAY_ROBOTS
        if role == "slow":
            time.sleep(SLOW_ROBOTS_SECONDS)
            return 200, {}, SLOW_ROBOTS
        raise AssertionError(role)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    site: DemoSite
    role: str


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        site, role = self.server.site, self.server.role
        path = self.path.split("?", 1)[0]
        arrived = time.time()
        answer = site.robots(role, path)
        if answer is None:
            status, headers = 200, {"Content-Type": "text/html; charset=utf-8"}
            title = escape(f"{role} {path}")
            body = f"<html><head><title>{title}</title></head><body>{title}</body></html>"
        else:
            status, headers, body = answer
            headers.setdefault("Content-Type", "text/plain; charset=utf-8")
            user_agent = self.headers.get("User-Agent", "")
            site.record(Hit(arrived, time.time() - arrived, role, path, status, user_agent))
        data = body.encode("utf-8")
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        # Quiet: the demo prints its own robots.txt log (DemoSite.hits) instead.
        pass


@contextmanager
def running(port_base: int = 0) -> Iterator[DemoSite]:
    site = DemoSite(port_base=port_base).start()
    try:
        yield site
    finally:
        site.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--port-base",
        type=int,
        default=0,
        help=f"serve the {len(ROLES)} origins on this port and the next ones (default: free ports)",
    )
    parser.add_argument("--write", type=Path, help="also write the origins JSON to this file")
    args = parser.parse_args(argv)
    with running(args.port_base) as site:
        line = json.dumps(site.describe())
        if args.write:
            args.write.write_text(line + "\n", encoding="utf-8")
        print(line, flush=True)
        seen = 0
        try:
            while True:
                time.sleep(0.2)
                for hit in site.hits[seen:]:
                    at = hit.at - site.started_at
                    print(f"{at:7.2f}s {hit.role:<8} {hit.path} -> {hit.status}", file=sys.stderr)
                seen = len(site.hits)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
