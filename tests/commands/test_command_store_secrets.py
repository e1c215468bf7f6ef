"""``scrapy robots`` never prints a Redis password, whatever characters it holds.

A real subprocess, text and ``--json`` output, three URLs: the password percent-encoded
but wrong (Redis refuses it), written as is with reserved characters (the URL is
refused), and in the query string."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from tests.support import redis_server as redis_helper
from tests.support.commands import robots, workdir
from tests.support.mockserver import MockServer
from tests.support.redis_server import RedisServer

__all__ = ["workdir"]  # a fixture used below

RESERVED = "Zq9#Xw/7?Yv@8:Uu%"
PIECES = ("Zq9", "Xw/", "7?Y", "Yv@8", "Uu%", "Xw%2F")


@pytest.fixture(scope="module")
def guarded_redis() -> object:
    yield from redis_helper.run_redis_server(password="the-right-one")


@pytest.mark.parametrize(
    "form",
    [
        "encoded-wrong",
        pytest.param("raw", marks=pytest.mark.slow),
        pytest.param("query", marks=pytest.mark.slow),
    ],
)
def test_robots_output_never_shows_the_password(
    mockserver: MockServer,
    host: str,
    subprocess_env: dict[str, str],
    workdir: Path,
    guarded_redis: RedisServer,
    form: str,
) -> None:
    mockserver.configure(host, {"robots": {"body": "User-agent: *\nDisallow: /p\n"}})
    port = guarded_redis.port
    url = {
        "encoded-wrong": f"redis://:{quote(RESERVED, safe='')}@127.0.0.1:{port}/0",
        "raw": f"redis://user:{RESERVED}@127.0.0.1:{port}/0",
        "query": f"redis://127.0.0.1:{port}/0?password={quote(RESERVED, safe='')}",
    }[form]
    for extra in ([], ["--json"]):
        result = robots(
            [mockserver.url(host, "/p"), "-s", f"REP_STORAGE={url}", *extra],
            subprocess_env,
            workdir,
        )
        shown = result.stdout + result.stderr
        assert f"127.0.0.1:{port}" in shown, shown[-2000:]  # the store is described
        leaked = [piece for piece in PIECES if piece in shown]
        assert not leaked, (leaked, shown[-2000:])
