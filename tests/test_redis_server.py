"""The throw-away redis-servers of ``tests/support/redis_server.py`` stay apart under pytest-xdist:
a port another worker's server holds is never mistaken for this one's."""

from __future__ import annotations

import redis

from tests.support.redis_server import PORT_RANGE, RedisServer, require_redis_server


def pid_on(server: RedisServer) -> int:
    client = redis.Redis.from_url(server.url)
    try:
        pid: int = client.info("server")["process_id"]
        return pid
    finally:
        client.close()


def test_a_taken_port_is_left_for_another_and_a_restart_keeps_its_port() -> None:
    executable = require_redis_server()
    theirs = RedisServer(executable)
    ours = RedisServer(executable, password="pw")
    try:
        theirs.start()
        ours.port = theirs.port  # as if another worker's server had bound it first
        ours.start()
        assert ours.port != theirs.port
        assert PORT_RANGE[0] <= ours.port <= PORT_RANGE[1]
        assert pid_on(theirs) != pid_on(ours)

        port, first_pid = ours.port, pid_on(ours)
        ours.stop()
        ours.start()  # an outage's end: the URL tests hold must work again
        assert ours.port == port
        assert pid_on(ours) != first_pid
    finally:
        theirs.cleanup()
        ours.cleanup()
