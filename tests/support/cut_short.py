"""``CutShort``: a downloader middleware that ends a run's contact with the sites after
``CUT_SHORT_AFTER`` responses: every later request is refused (``IgnoreRequest``) before it is
sent, so a test can stop a run part way through its walk without a kill and without a request in
flight (the server's log then shows exactly the pages the run fetched)."""

from __future__ import annotations

from typing import Any

from scrapy.exceptions import IgnoreRequest


class CutShort:
    def __init__(self, after: int) -> None:
        self.after = after
        self.responses = 0

    @classmethod
    def from_crawler(cls, crawler: Any) -> CutShort:
        return cls(crawler.settings.getint("CUT_SHORT_AFTER"))

    def process_request(self, request: Any, spider: Any = None) -> None:
        if self.responses >= self.after and not request.url.endswith("/robots.txt"):
            raise IgnoreRequest(f"cut short after {self.after} responses")

    def process_response(self, request: Any, response: Any, spider: Any = None) -> Any:
        if not request.url.endswith("/robots.txt"):
            self.responses += 1
        return response
