"""The incident log: an XML file of what stopped a domain crawl or the job, for later investigation.

Valid against ``idcrawl/schemas/incidents.xsd`` (:data:`SCHEMA_PATH`) at every moment, earlier runs'
incidents kept. No Scrapy imports. docs/reference/incidents.md; how each append stays atomic:
docs/architecture.md ("Module notes").
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Literal

from lxml import etree

from idcrawl.core.limits import Trigger
from idcrawl.core.safetext import mask_secrets
from idcrawl.storage import fsync_directory

__all__ = ["SCHEMA_PATH", "VERSION", "Incident", "IncidentLog", "IncidentLogError", "schema"]

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "incidents.xsd"
VERSION = 1
ROOT = "incidents"

# XML 1.0 allows tab, newline, carriage return and these ranges; anything else
# (NUL, ESC, lone surrogates...) cannot appear in a document, escaped or not.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class IncidentLogError(Exception):
    """The incident log cannot be used: the message names the path and the cause."""

    #: the failed write's error, when a write failed (a full disk: :mod:`idcrawl.storage`)
    os_error: OSError | None = None


@cache
def schema() -> etree.XMLSchema:
    """The shipped XSD, compiled once."""
    return etree.XMLSchema(etree.parse(str(SCHEMA_PATH), _parser()))


def _parser() -> etree.XMLParser:
    return etree.XMLParser(resolve_entities=False, no_network=True, remove_blank_text=True)


@dataclass(frozen=True, slots=True)
class Incident:
    """One incident, as plain data.

    ``kind`` is ``limit`` for a rule that fired (``rule`` to ``unit`` set) and
    ``error`` for an unhandled error (those fields None).
    """

    time: datetime
    domain: str
    message: str
    level: Literal["domain", "job"] = "domain"
    kind: Literal["limit", "error"] = "limit"
    rule: str | None = None
    category: str | None = None
    limit: int | float | None = None
    observed: int | float | None = None
    unit: str | None = None
    counters: Mapping[str, object] = field(default_factory=dict)
    cursors: Mapping[str, object] = field(default_factory=dict)
    urls: Sequence[str] = ()

    def __post_init__(self) -> None:
        if self.time.tzinfo is None:
            raise ValueError(f"incident time {self.time!r} must be timezone-aware")

    @classmethod
    def from_trigger(
        cls,
        trigger: Trigger,
        *,
        time: datetime | None = None,
        domain: str | None = None,
        counters: Mapping[str, object] | None = None,
        cursors: Mapping[str, object] | None = None,
        urls: Sequence[str] = (),
    ) -> Incident:
        """The incident of a fired rule. ``time`` defaults to now (wall clock, UTC)."""
        return cls(
            time=time or datetime.now(UTC),
            domain=trigger.key if domain is None else domain,
            message=trigger.message,
            level=trigger.level,
            rule=trigger.rule,
            category=trigger.category.value,
            limit=trigger.limit,
            observed=trigger.observed,
            unit=trigger.unit.value,
            counters=counters or {},
            cursors=cursors or {},
            urls=tuple(urls),
        )

    @classmethod
    def error(
        cls,
        domain: str,
        message: str,
        *,
        time: datetime | None = None,
        counters: Mapping[str, object] | None = None,
        cursors: Mapping[str, object] | None = None,
        urls: Sequence[str] = (),
    ) -> Incident:
        """The incident of an unhandled error (a spider callback that raised, say)."""
        return cls(
            time=time or datetime.now(UTC),
            domain=domain,
            message=message,
            kind="error",
            counters=counters or {},
            cursors=cursors or {},
            urls=tuple(urls),
        )


def _text(value: object) -> str:
    """Text lxml accepts: numbers in decimal notation, passwords of URLs masked, characters XML cannot
    hold shown as ``\\xNN``."""
    if value is None:
        return ""
    if isinstance(value, float):
        text = format(Decimal(repr(value)), "f")
    else:
        text = mask_secrets(str(value))
    return _NOT_XML.sub(lambda m: ascii(m.group())[1:-1], text)


def _utc(time: datetime) -> str:
    return time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _element(incident: Incident, max_urls: int) -> etree._Element:
    node = etree.Element("incident", time=_utc(incident.time), level=incident.level, kind=incident.kind)
    etree.SubElement(node, "domain").text = _text(incident.domain)
    for name in ("rule", "category", "limit", "observed", "unit"):
        value = getattr(incident, name)
        if value is not None:
            etree.SubElement(node, name).text = _text(value)
    etree.SubElement(node, "message").text = _text(incident.message)
    counters = etree.SubElement(node, "counters")
    for name, value in incident.counters.items():
        etree.SubElement(counters, "counter", name=_text(name)).text = _text(value)
    cursors = etree.SubElement(node, "cursors")
    for lane, value in incident.cursors.items():
        etree.SubElement(cursors, "cursor", lane=_text(lane)).text = _text(value)
    urls = etree.SubElement(node, "urls")
    for url in list(incident.urls)[-max_urls:] if max_urls else []:
        etree.SubElement(urls, "url").text = _text(url)
    return node


class IncidentLog:
    """Appends incidents to the XML file at ``path``, atomically.

    Construction creates the directory if needed, reads an existing log (its
    incidents are kept) and proves that the directory is writable, so that a
    bad path is an :class:`IncidentLogError` at start rather than at the first
    incident. Nothing is written before the first :meth:`append`. ``max_urls``
    caps the URLs kept per incident (the last ones).
    """

    def __init__(self, path: str | os.PathLike[str], *, max_urls: int = 10) -> None:
        self.path = Path(path)
        self.max_urls = max_urls
        self._root = self._load()
        self._check_writable()

    def __len__(self) -> int:
        return len(self._root)

    # -- start -----------------------------------------------------------------------

    def _error(self, reason: str) -> IncidentLogError:
        return IncidentLogError(f"incident log {str(self.path)!r}: {reason}")

    def _write_error(self, exc: OSError) -> IncidentLogError:
        error = self._error(f"cannot be written ({exc.strerror or exc})")
        error.os_error = exc
        return error

    def _load(self) -> etree._Element:
        if self.path.is_dir():
            raise self._error("is a directory")
        try:
            data = self.path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):  # the writability check explains the latter
            data = b""
        except OSError as exc:
            raise self._error(f"cannot be read ({exc.strerror or exc})") from None
        if not data.strip():  # absent or empty: a new log (an empty file holds nothing to lose)
            return etree.Element(ROOT, version=str(VERSION))
        try:
            root = etree.fromstring(data, _parser())
        except etree.XMLSyntaxError as exc:
            raise self._error(f"exists and is not an idcrawl incident log (not well-formed XML: {exc})") from None
        if root.tag != ROOT:
            raise self._error(f"exists and is not an idcrawl incident log (root element <{root.tag}>)")
        version = root.get("version", "")
        if version.isdigit() and int(version) > VERSION:
            raise self._error(f"version {version} is newer than this idcrawl writes ({VERSION}); upgrade idcrawl")
        if not schema().validate(root):
            error = schema().error_log.last_error
            raise self._error(f"exists and is not a valid idcrawl incident log (line {error.line}: {error.message})")
        return root

    def _check_writable(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".probe")
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise self._error(f"cannot be written ({exc.strerror or exc})") from None

    # -- writes ----------------------------------------------------------------------

    def close(self) -> None:
        """Nothing to do: every append is on disk already (a Redis log sends what waits)."""

    def append(self, incident: Incident) -> None:
        """Add ``incident`` and replace the file with the whole document.

        On failure (disk full, the directory gone) the file keeps its previous
        content, the incident is not kept in memory and :class:`IncidentLogError`
        says why.
        """
        node = _element(incident, self.max_urls)
        self._root.append(node)
        try:
            self._write()
        except BaseException:
            self._root.remove(node)
            raise

    def _write(self) -> None:
        data = etree.tostring(self._root, xml_declaration=True, encoding="UTF-8", pretty_print=True)
        directory = self.path.parent
        try:
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{self.path.name}.", suffix=".tmp")
        except OSError as exc:
            raise self._write_error(exc) from None
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, OSError):
                raise self._write_error(exc) from None
            raise
        fsync_directory(directory)

