"""``scrapy robots``: placeholder, replaced by the full command."""

from __future__ import annotations

from scrapy.commands import ScrapyCommand


class RobotsCommand(ScrapyCommand):
    requires_project = False

    def short_desc(self) -> str:
        return "Check URLs against robots.txt (scrapy-rep)"

    def run(self, args: list[str], opts: object) -> None:
        raise NotImplementedError
