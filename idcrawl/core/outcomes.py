"""Outcome rules: which responses mean "this id does not exist".

An :class:`OutcomeRule` holds one target's tests and turns a final response into an :class:`Outcome`;
a bad rule raises :class:`OutcomeRuleError` when built. The rules: docs/outcomes.md; their order:
docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from cssselect import SelectorError
from lxml import etree
from lxml import html as lxml_html
from parsel.csstranslator import HTMLTranslator

from idcrawl.core.lanes import Outcome

__all__ = [
    "DEFAULT_MISSING_STATUSES",
    "DEFAULT_RULE",
    "OUTCOME_KEYS",
    "OutcomeRule",
    "OutcomeRuleError",
]

#: Statuses that mean missing unless a rule says otherwise (``IDCRAWL_MISSING_STATUSES``).
DEFAULT_MISSING_STATUSES: frozenset[int] = frozenset({404, 410})

#: The target keys that make up an outcome rule (the field names of :class:`OutcomeRule`).
OUTCOME_KEYS: tuple[str, ...] = (
    "missing_statuses",
    "soft404_regex",
    "soft404_css",
    "soft404_xpath",
    "found_css",
    "found_xpath",
    "soft404_max_bytes",
)

#: Namespaces available in XPath tests (as in parsel: ``re:test(., 'pattern')``).
_XPATH_NAMESPACES = {"re": "http://exslt.org/regular-expressions"}
#: An empty document to dry-run XPath expressions on: lxml reports unknown
#: functions, variables and prefixes only when an expression is evaluated.
_PROBE = lxml_html.document_fromstring("<html><body><p>probe</p></body></html>")
_CSS = HTMLTranslator()  # parsel's: ``::text`` and ``::attr(name)`` work as in ``response.css()``


class OutcomeRuleError(ValueError):
    """A rule field with a bad value; ``str()`` is one line naming the field and the value."""

    def __init__(self, field: str, value: Any, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"{field}={value!r}: {reason}")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _compile_xpath(field_name: str, expression: str) -> Any:
    try:
        compiled = etree.XPath(expression, namespaces=_XPATH_NAMESPACES)
        compiled(_PROBE)
    except etree.XPathError as exc:
        raise OutcomeRuleError(field_name, expression, f"is not a valid XPath expression ({_one_line(exc)})") from None
    return compiled


def _compile_css(field_name: str, selector: str) -> Any:
    try:
        expression = _CSS.css_to_xpath(selector)
    except SelectorError as exc:
        raise OutcomeRuleError(field_name, selector, f"is not a valid CSS selector ({_one_line(exc)})") from None
    try:
        return _compile_xpath(field_name, expression)
    except OutcomeRuleError:
        raise OutcomeRuleError(field_name, selector, "is not a valid CSS selector") from None


def _selects(result: Any) -> bool:
    """XPath's boolean(): a non-empty node set or string, true, a non-zero number."""
    if isinstance(result, bool):
        return result
    if isinstance(result, float | int):
        return result == result and result != 0  # NaN is false
    if isinstance(result, str | list):
        return len(result) > 0
    return result is not None


def _parse_html(body: bytes, encoding: str | None) -> Any:
    """The root element of an HTML body (as parsel builds it; never None)."""
    parser = lxml_html.HTMLParser(recover=True, encoding=encoding, huge_tree=True)
    body = body.strip().replace(b"\x00", b"")
    root = etree.fromstring(body, parser=parser) if body else None
    if root is None:
        root = etree.fromstring(b"<html/>", parser=parser)
    return root


@dataclass(frozen=True, slots=True)
class OutcomeRule:
    """How one target tells found, missing and failed responses apart.

    Equal rules compare and hash by their source values (statuses, regex,
    selector strings); the compiled forms are derived once, at construction.
    """

    missing_statuses: frozenset[int] = DEFAULT_MISSING_STATUSES
    soft404_regex: str | None = None
    soft404_css: str | None = None
    soft404_xpath: str | None = None
    found_css: str | None = None
    found_xpath: str | None = None
    soft404_max_bytes: int | None = None

    _regex: re.Pattern[str] | None = field(init=False, default=None, repr=False, compare=False, hash=False)
    #: (compiled XPath, True for a soft-404 test / False for a found test, the test's name), in evaluation order
    _selectors: tuple[tuple[Any, bool, str], ...] = field(init=False, default=(), repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        statuses = self.missing_statuses
        if not isinstance(statuses, frozenset):
            statuses = frozenset(self._statuses(statuses))
            object.__setattr__(self, "missing_statuses", statuses)
        for status in statuses:
            if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
                raise OutcomeRuleError("missing_statuses", sorted(statuses, key=str),
                                       f"{status!r} is not an HTTP status (an integer 100..599)")
        limit = self.soft404_max_bytes
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise OutcomeRuleError("soft404_max_bytes", limit, "must be an integer >= 0")
        for name in ("soft404_regex", "soft404_css", "soft404_xpath", "found_css", "found_xpath"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise OutcomeRuleError(name, value, "must be a non-empty string")
        if self.soft404_regex is not None:
            try:
                regex = re.compile(self.soft404_regex)
            except re.error as exc:
                raise OutcomeRuleError(
                    "soft404_regex", self.soft404_regex, f"is not a valid regular expression ({_one_line(exc)})"
                ) from None
            object.__setattr__(self, "_regex", regex)
        selectors: list[tuple[Any, bool, str]] = []
        if self.soft404_css is not None:
            selectors.append((_compile_css("soft404_css", self.soft404_css), True, "css"))
        if self.soft404_xpath is not None:
            selectors.append((_compile_xpath("soft404_xpath", self.soft404_xpath), True, "xpath"))
        if self.found_css is not None:
            selectors.append((_compile_css("found_css", self.found_css), False, "found_css"))
        if self.found_xpath is not None:
            selectors.append((_compile_xpath("found_xpath", self.found_xpath), False, "found_xpath"))
        object.__setattr__(self, "_selectors", tuple(selectors))

    @staticmethod
    def _statuses(values: Iterable[Any]) -> list[Any]:
        try:
            return list(values)
        except TypeError:
            raise OutcomeRuleError("missing_statuses", values, "must be a list of HTTP statuses") from None

    # -- queries -------------------------------------------------------------------

    @property
    def has_soft404_tests(self) -> bool:
        """Whether any test can turn a 2xx into missing."""
        return self.soft404_max_bytes is not None or self._regex is not None or bool(self._selectors)

    @property
    def needs_text(self) -> bool:
        """Whether evaluating a 2xx may need the decoded text."""
        return self._regex is not None

    @property
    def needs_tree(self) -> bool:
        """Whether evaluating a 2xx may need the parsed HTML."""
        return bool(self._selectors)

    # -- evaluation ------------------------------------------------------------------

    def evaluate(
        self,
        status: int,
        body: bytes,
        *,
        text: str | Callable[[], str] | None = None,
        encoding: str | None = None,
        root: Callable[[], Any] | None = None,
    ) -> Outcome:
        """The outcome of a final response.

        ``text`` is the decoded body (or a function returning it, called only
        when the regex test runs); without it the body is decoded with
        ``encoding`` (UTF-8 if not given, bad bytes replaced). ``root`` returns
        an already parsed lxml tree of the page (called at most once, and only
        when a selector test runs); without it the body is parsed here, at
        most once.
        """
        return self.decide(status, body, text=text, encoding=encoding, root=root)[0]

    def decide(
        self,
        status: int,
        body: bytes,
        *,
        text: str | Callable[[], str] | None = None,
        encoding: str | None = None,
        root: Callable[[], Any] | None = None,
    ) -> tuple[Outcome, str | None]:
        """The outcome of a final response (as :meth:`evaluate`) and, for a 2xx judged missing, the
        soft-404 test that judged it: ``max_bytes``, ``regex``, ``css``, ``xpath``, ``found_css`` or
        ``found_xpath`` (the target keys without ``soft404_``; the crawl counts each, docs/outcomes.md)."""
        if status in self.missing_statuses:
            return Outcome.MISSING, None
        if not 200 <= status < 300:
            return Outcome.FAILED, None
        if self.soft404_max_bytes is not None and len(body) <= self.soft404_max_bytes:
            return Outcome.MISSING, "max_bytes"
        if self._regex is not None:
            if text is None:
                decoded = body.decode(encoding or "utf-8", errors="replace")
            elif isinstance(text, str):
                decoded = text
            else:
                decoded = text()
            if self._regex.search(decoded) is not None:
                return Outcome.MISSING, "regex"
        if self._selectors:
            tree = root() if root is not None else _parse_html(body, encoding)
            for xpath, is_soft404, test in self._selectors:
                if _selects(xpath(tree)) is is_soft404:
                    return Outcome.MISSING, test
        return Outcome.FOUND, None

#: The rule of a target without outcome keys: 404/410 missing, 2xx found, the rest failed.
DEFAULT_RULE = OutcomeRule()
