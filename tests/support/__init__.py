"""Fakes and small builders for direct unit tests of the crawl runtime (tests/unit).

- ``clock``: a ``twisted.internet.task.Clock`` started at a realistic wall time, the
  one place that points the runtime's timers at it, and a wait for the real reactor's
  turns (fetches run as asyncio tasks, a store's worker answers through the reactor).
- ``fake_fetcher``: a robots.txt fetcher that records each fetch and lets the test
  answer it (200, 404, 503, a timeout).
- ``runtime``: the waiting room and the origin coordinator built as the middleware
  builds them, on the real ``memory`` store (or any store), with the fakes above.

Only additions live here; the older helper modules at ``tests/`` root stay where
they are.
"""
