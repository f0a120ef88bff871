"""What idcrawl reads from a response: its outcome by a target's rule, its text, its signatures.

The Scrapy side of :mod:`idcrawl.core.outcomes` and :mod:`idcrawl.core.fingerprints`; a response is
decoded and parsed once, whoever asks (the spider, the soft-404 probe).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from scrapy.http import HtmlResponse, TextResponse

from idcrawl.core.fingerprints import shingles, signature, visible_text, words
from idcrawl.core.recrawl import signature_of

if TYPE_CHECKING:
    from scrapy.http import Response

    from idcrawl.core.lanes import Outcome
    from idcrawl.core.outcomes import OutcomeRule
    from idcrawl.core.recrawl import Policy

__all__ = ["change_signature", "page_signature", "page_text", "rule_decision", "rule_outcome"]

#: The text of each response still alive: a found page's text serves the probe's comparison
#: (``classify``) and its signature (``base_item``), and is extracted once.
_TEXTS: WeakKeyDictionary[Response, str | None] = WeakKeyDictionary()


def rule_outcome(rule: OutcomeRule, response: Response) -> Outcome:
    """The outcome ``rule`` gives a final response: found, missing or failed."""
    return rule_decision(rule, response)[0]


def rule_decision(rule: OutcomeRule, response: Response) -> tuple[Outcome, str | None]:
    """The outcome ``rule`` gives a final response, and the soft-404 test that made a 2xx missing
    (:meth:`~idcrawl.core.outcomes.OutcomeRule.decide`)."""
    if isinstance(response, HtmlResponse):  # selector tests reuse the tree that parse_found's css() uses
        return rule.decide(
            response.status, response.body, text=lambda: response.text, root=lambda: response.selector.root
        )
    if isinstance(response, TextResponse):
        return rule.decide(response.status, response.body, text=lambda: response.text, encoding=response.encoding)
    return rule.decide(response.status, response.body)


def page_text(response: Response) -> str | None:
    """The visible text of an HTML page (the decoded text of other text); None for binary bodies."""
    if response in _TEXTS:
        return _TEXTS[response]
    text: str | None
    if isinstance(response, HtmlResponse):
        text = visible_text(response.selector.root)  # the tree parse_found's css() uses
    elif isinstance(response, TextResponse):
        text = response.text
    else:
        text = None
    _TEXTS[response] = text
    return text


def page_signature(response: Response) -> Any:
    """The MinHash signature of a page's text (near-duplicates), or None for a binary body."""
    text = page_text(response)
    return None if text is None else signature(shingles(words(text)))


def change_signature(response: Response, policy: Policy) -> str:
    """What a revisit of a found page compares, by its target's ``signature`` keys
    (:func:`idcrawl.core.recrawl.signature_of`): the visible text is the one the MinHash reads."""
    return signature_of(
        response.body, policy, text=lambda: page_text(response),
        decoded=lambda: response.text if isinstance(response, TextResponse) else None,
    )
