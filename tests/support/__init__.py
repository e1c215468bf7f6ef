"""The suite's helpers, one module per role; ``tests/conftest.py`` turns some into fixtures.

Real crawls and the servers they talk to:

- ``crawl``: a whole Scrapy crawl in the test's reactor (``run_crawl``), its spiders,
  scrapy-rep's settings for it (``REP``) and readers of the mock server's log.
- ``crawl_storage``: crawls on a real SQLite or Redis store (the ``store`` fixture).
- ``mockserver``: the scriptable multi-origin HTTP server (run as a subprocess) and the
  tests' ``MockServer`` handle on it.
- ``resolver``: the name resolver that sends ``*.test`` to 127.0.0.1 and nothing out.
- ``redis_server``: throw-away ``redis-server`` processes.
- ``scrapy_compat``: what differs between the Scrapy versions the suite runs on.
- ``waits``: bounded waits for a condition, on the reactor or blocking.

Crawler subprocesses:

- ``subprocess_spider``: the spider of ``scrapy runspider`` crawls sharing a store.
- ``cluster_spider`` and ``cluster``: scrapy-redis worker processes on one Redis.
- ``commands``: running ``scrapy robots``.

Direct tests of the parts (``tests/unit``, ``tests/robotstxt``):

- ``clock``: a ``twisted.internet.task.Clock`` started at a realistic wall time, the
  one place that points the runtime's timers at it, and a wait for the real reactor's
  turns (fetches run as asyncio tasks, a store's worker answers through the reactor).
- ``fake_fetcher``: a robots.txt fetcher that records each fetch and lets the test
  answer it (200, 404, 503, a timeout).
- ``runtime``: the waiting room and the origin coordinator built as the middleware
  builds them, on the real ``memory`` store (or any store), with the fakes above.
- ``engine``: a parsed robots.txt with its group compiled ahead of the first check.
"""
