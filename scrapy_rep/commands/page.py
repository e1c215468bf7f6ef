"""``scrapy robots --page URL``: download pages through Scrapy and show their page-level directives.

The page is fetched by a tiny crawl, so settings, proxies, headers and download
handlers apply as in a crawl, and redirects are followed: the directives shown are the
final response's, for the product token (docs/page.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scrapy import Request, Spider
from scrapy.http import HtmlResponse

from scrapy_rep.robotstxt._page import NofollowLinks, PageDirectives, page_directives

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from scrapy.http import Response
    from scrapy.settings import BaseSettings
    from twisted.python.failure import Failure

# Above every named Scrapy priority ("cmdline" is 40): the internal crawl must not run
# a robots.txt middleware whatever the project or -s says, or it would fetch robots.txt
# itself and could hold the command's own requests.
_FORCED_PRIORITY = 100
EXIT_OK, EXIT_UNREACHABLE = 0, 3
MAX_LISTED_LINKS = 20
_ERROR_STATUSES = list(range(400, 600))  # nofollow-only links listed per page in the text output


@dataclass
class PageResult:
    """One URL given on the command line: what came back and its directives."""

    url: str
    final_url: str | None = None
    status: int | None = None
    content_type: str = ""
    error: str | None = None
    directives: PageDirectives | None = None
    rel_counts: dict[str, int] = field(default_factory=dict)
    nofollow_only: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "final_url": self.final_url,
            "status": self.status,
            "content_type": self.content_type,
            "error": self.error,
            "directives": None if self.directives is None else self.directives.to_json(),
            "rel": dict(self.rel_counts),
            "nofollow_only_links": list(self.nofollow_only),
        }


class OneShotSpider(Spider):
    """The internal spider of a ``scrapy robots`` check: never obeys a robots.txt
    middleware itself (whatever the project or -s says) and opens no ports."""

    @classmethod
    def update_settings(cls, settings: BaseSettings) -> None:
        super().update_settings(settings)
        settings.set("ROBOTSTXT_OBEY", False, priority=_FORCED_PRIORITY)
        # A one-shot check should not open ports; at spider priority, so -s still wins.
        settings.set("TELNETCONSOLE_ENABLED", False, priority="spider")
        settings.set("REMOTE_CONTROL_ENABLED", False, priority="spider")


class PageFetchSpider(OneShotSpider):
    """Downloads the given URLs once each; every answer (any status) is kept."""

    name = "scrapy_rep_page"

    def __init__(self, urls: list[str], responses: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.urls = urls
        self.answers = responses

    async def start(self) -> AsyncIterator[Any]:
        for url in self.urls:
            yield Request(
                url,
                callback=self.keep,
                errback=self.failed,
                dont_filter=True,
                # error pages too (a 404 may carry a header), while redirects are
                # still followed (handle_httpstatus_all would stop them)
                meta={"handle_httpstatus_list": _ERROR_STATUSES, "page_url": url},
            )

    def keep(self, response: Response) -> None:
        self.answers[response.meta["page_url"]] = response

    def failed(self, failure: Failure) -> None:
        request = getattr(failure, "request", None)
        if request is not None:
            self.answers[request.meta["page_url"]] = failure


def result_of(url: str, answer: Any, token: str) -> PageResult:
    """The directives of *answer* (a Response, a Failure or None) for *token*."""
    from scrapy.http import Response

    if not isinstance(answer, Response):
        error = "not downloaded" if answer is None else answer.getErrorMessage()
        return PageResult(url, error=error)
    html = answer if isinstance(answer, HtmlResponse) else None
    found = page_directives(
        answer.headers.getlist(b"X-Robots-Tag"), None if html is None else html.body, token
    )
    result = PageResult(
        url,
        final_url=answer.url,
        status=answer.status,
        content_type=(answer.headers.get(b"Content-Type") or b"").decode("latin-1"),
        directives=found,
    )
    if html is not None:
        from scrapy.utils.response import get_base_url

        links = NofollowLinks(html.body, get_base_url(html)).scan()
        result.rel_counts = dict(links.rel_counts)
        result.nofollow_only = sorted(u for u in links.nofollow if links.nofollow_only(u))
    return result


def exit_status(results: list[PageResult]) -> int:
    return EXIT_UNREACHABLE if any(r.error for r in results) else EXIT_OK


def render_json(token: str, results: list[PageResult]) -> str:
    doc = {
        "version": 1,
        "product_token": token,
        "pages": [result.to_json() for result in results],
    }
    return json.dumps(doc, indent=2)


def render_text(token: str, results: list[PageResult]) -> str:
    lines = [f"Page-level directives for product token {token!r}"]
    for result in results:
        lines.append("")
        if result.error is not None:
            lines.append(f"{result.url}  not downloaded: {result.error}")
            continue
        where = f"{result.status}, {result.content_type or 'no Content-Type'}"
        if result.final_url and result.final_url != result.url:
            where += f", redirected to {result.final_url}"
        lines.append(f"{result.url}  ({where})")
        found = result.directives
        assert found is not None
        if not found.directives:
            lines.append(f"  no directive for {token}: index, follow")
        if found.noindex:
            why = found.why("noindex")
            lines.append(f"  noindex: enforce drops the items this page yields ({why})")
        if found.nofollow:
            why = found.why("nofollow")
            lines.append(f"  nofollow: enforce drops the requests this page yields ({why})")
        for name, sources in sorted(found.directives.items()):
            value = found.values.get(name)
            shown = f"{name}: {value}" if value is not None else name
            for source in sources:
                lines.append(f"  {shown:<28} {source.describe()}")
        for source in found.ignored:
            lines.append(f"  ignored (for {source.scope}): {source.describe()}")
        for issue in found.issues:
            lines.append(f"  issue: {issue}")
        if result.rel_counts:
            counts = ", ".join(f"{rel} {n}" for rel, n in sorted(result.rel_counts.items()))
            lines.append(f"  rel values on links: {counts}")
        if result.nofollow_only:
            lines.append(
                f'  linked only with rel="nofollow" ({len(result.nofollow_only)}), not followed:'
            )
            lines.extend(f"    {url}" for url in result.nofollow_only[:MAX_LISTED_LINKS])
            if len(result.nofollow_only) > MAX_LISTED_LINKS:
                lines.append(f"    ... and {len(result.nofollow_only) - MAX_LISTED_LINKS} more")
    return "\n".join(lines)
