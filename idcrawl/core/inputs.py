"""Input values checked: each key of a target or a job file, as a string or a TOML value, parsed
with one line naming the field and the value when it is bad (:class:`TargetError`)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from idcrawl.core.lanes import MAX_ID
from idcrawl.core.safetext import name_problem, safe
from idcrawl.core.templates import url_origin

__all__ = [
    "MISSING",
    "TargetError",
    "as_bool",
    "as_choice",
    "as_float",
    "as_id",
    "as_int",
    "as_name",
    "as_names",
    "check_url",
    "refuse_unknown",
    "shown",
]


class TargetError(ValueError):
    """Bad input for a target: names the field and the value.

    ``str(error)`` is the one line shown to the user, for example
    ``target 'sirup': margin='-1': must be an integer >= 0``.
    """

    def __init__(self, field: str, value: Any, reason: str, *, where: str = "") -> None:
        self.field = field
        self.value = value
        self.reason = reason
        self.where = where
        super().__init__(self._line())

    def _line(self) -> str:
        prefix = f"{safe(self.where)}: " if self.where else ""
        if self.value is MISSING:
            return f"{prefix}{self.field}: {self.reason}"
        return f"{prefix}{self.field}={shown(self.value)}: {self.reason}"

    def located(self, where: str) -> TargetError:
        """The same error, prefixed with where it was found (job file, target)."""
        inner = f"{where}: {self.where}" if self.where else where
        return TargetError(self.field, self.value, self.reason, where=inner)


def shown(value: Any) -> str:
    """``repr(value)``, cut in the middle past :data:`_SHOWN` characters (a 5,000-digit id stays one short line)."""
    text = safe(repr(value))  # a password masked before the cut, any control character escaped
    if len(text) <= _SHOWN:
        return text
    return f"{text[:_SHOWN // 2]}...{text[-20:]} ({len(text)} characters)"


_SHOWN = 120


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()


def as_id(field: str, value: Any) -> int:
    """An id: an integer in 0..MAX_ID."""
    result = as_int(field, value, minimum=0)
    if result > MAX_ID:
        raise TargetError(field, value, f"is above the largest id idcrawl can store (2**64-1 = {MAX_ID})")
    return result


def as_int(field: str, value: Any, *, minimum: int | None = None) -> int:
    if isinstance(value, bool):
        raise TargetError(field, value, "must be an integer")
    if isinstance(value, int):
        result = value
    elif isinstance(value, str):
        try:
            result = int(value.strip().replace("_", ""), 10)
        except ValueError:
            raise TargetError(field, value, "must be an integer") from None
    else:
        raise TargetError(field, value, "must be an integer")
    if minimum is not None and result < minimum:
        raise TargetError(field, value, f"must be an integer >= {minimum}")
    return result


def as_float(field: str, value: Any, *, minimum: float = 0.0) -> float:
    if isinstance(value, bool):
        raise TargetError(field, value, "must be a number")
    try:
        result = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise TargetError(field, value, "must be a number") from None
    if not result >= minimum or result == float("inf"):  # also rejects NaN
        raise TargetError(field, value, f"must be a finite number >= {minimum:g}")
    return result


def as_choice(field: str, value: Any, choices: tuple[str, ...], *, hidden: frozenset[str] = frozenset()) -> str:
    """One of ``choices``; the ``hidden`` ones (deprecated words) are accepted but not offered in the error line."""
    text = str(value).strip().lower() if isinstance(value, str) else None
    if text not in choices:
        offered = [choice for choice in choices if choice not in hidden]
        raise TargetError(field, value, f"must be one of {', '.join(offered)}")
    return choices[choices.index(text)]  # the constant itself: one string for 100,000 targets, not one each


def check_url(field: str, value: Any, url: str) -> None:
    """``url`` (``value`` as given) must be an http(s) URL with a host that can be requested."""
    origin = url_origin(url)
    problem = _origin_problem(origin) if origin is not None else _url_problem(url)
    if problem is not None:
        raise TargetError(field, value, problem)


@functools.lru_cache(maxsize=4096)
def _origin_problem(origin: str) -> str | None:
    """:func:`_url_problem` of a URL's origin (the same for every URL of the origin: checked once)."""
    return _url_problem(origin)


def _url_problem(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of 0..65535 or not a number
    except ValueError as exc:
        return f"is not a valid URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return "must be an http or https URL"
    hostname = parts.hostname
    if not hostname:
        return "has no host"
    # every whitespace character but " " is unprintable (true over all of Unicode): no loop per character
    if " " in parts.netloc or not parts.netloc.isprintable():
        return "has spaces or control characters in its host"
    host = hostname.rstrip(".")
    labels = host.split(".")
    if not host.startswith("[") and (len(host) > 253 or "" in labels or max(map(len, labels)) > 63):
        return f"has an invalid host name {hostname!r} (labels of 1 to 63 characters)"
    return None


def as_bool(field: str, value: Any) -> bool:
    """A switch: a TOML boolean, or the strings true/false (yes/no, 1/0)."""
    if isinstance(value, bool):
        return value
    text = value.strip().lower() if isinstance(value, str) else None
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    raise TargetError(field, value, "must be true or false")


def as_name(field: str, value: Any) -> str:
    """The name of a target, crawl profile or collection: it keys stats (``.../<name>/...``) and is
    printed in log lines and tables, so it is printable, one line and bounded (:func:`name_problem`)."""
    problem = _name_problem(value)
    if problem is not None:
        raise TargetError(field, value, problem)
    return str(value).strip()


def _name_problem(value: Any) -> str | None:
    """Why ``value`` is not a name (what follows ``name=...:`` in the error line), or None."""
    if not isinstance(value, str) or not value.strip() or "/" in value:
        return "must be a non-empty string without '/'"
    problem = name_problem(value.strip())
    return problem


def as_names(field: str, value: Any) -> tuple[str, ...]:
    """A list of names (``crawl_profiles = ["a", "b"]``; a string "a,b" from text), each once."""
    if isinstance(value, str):
        items: list[Any] = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise TargetError(field, value, "must be a list of names")
    names: list[str] = []
    for item in items:
        problem = _name_problem(item)
        if problem is not None:
            why = "(a non-empty string without '/')" if problem.startswith("must") else f"({problem})"
            raise TargetError(field, value, f"{shown(item)} is not a name {why}")
        if item.strip() in names:
            raise TargetError(field, value, f"names {item.strip()!r} twice")
        names.append(item.strip())
    return tuple(names)


def refuse_unknown(raw: Mapping[str, Any], known: Iterable[str]) -> None:
    """One line for the first unknown key of a table (a typo such as ``margn`` would otherwise
    silently take the default), listing the known ones."""
    known = frozenset(known)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise TargetError(unknown[0], raw[unknown[0]], f"unknown key (known: {', '.join(sorted(known))})")
