"""The demo spiders: ``tour`` (project-wide token), ``nightowl`` and ``archive`` (overrides)."""
