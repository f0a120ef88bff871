"""TOML job files: ``[[targets]]`` (id and page targets), ``[defaults]``, the ``profile`` key and the
crawl scope tables (``[[collections]]``, ``[[crawl_profiles]]``), read into a :class:`JobFile`."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli  # tomllib's code, compiled (mypyc): a job file of 100,000 targets parses 4x faster

from idcrawl.core.inputs import (
    MISSING,
    TargetError,
    as_bool,
    as_choice,
    as_float,
    as_int,
    as_name,
    check_url,
    refuse_unknown,
)
from idcrawl.core.recrawl import parse_duration, parse_policy
from idcrawl.core.scope import (
    SCHEMES,
    Canonicalise,
    Collection,
    CrawlProfile,
    JobScope,
    OffSite,
    ScopeKind,
    Seed,
    Traps,
    canonical,
)
from idcrawl.core.sitemaps import SitemapSpec, parse_sitemaps
from idcrawl.core.targets import TARGET_KEYS, PageTarget, Target, parse_page_target, parse_target, parse_targets

__all__ = [
    "COLLECTION_KEYS",
    "CRAWL_PROFILE_KEYS",
    "JOB_KEYS",
    "JobFile",
    "parse_job",
    "read_job",
    "read_job_profile",
]


def _is_page_url(value: Any) -> bool:
    """A job file's ``url`` without any ``{...}`` field: a page target's start page."""
    return isinstance(value, str) and bool(value.strip()) and "{" not in value and "}" not in value


def _read_job_file(path: str | Path, *, max_targets: int = 0, where: str = "") -> dict[str, Any]:
    """The TOML of a job file, read once; with ``max_targets``, a job with more ``[[targets]]`` tables
    is refused from the bytes, before they are parsed (a 50 MB file takes a minute to parse)."""
    return _parse_toml(_job_text(path, max_targets=max_targets, where=where), path)


def _job_text(path: str | Path, *, max_targets: int = 0, where: str = "") -> str:
    """A job file's text (:func:`_read_job_file`), not parsed yet."""
    try:
        mode = os.stat(path).st_mode
    except ValueError:  # a NUL in the path (scrapyd's schedule.json can pass one)
        raise TargetError("job", str(path), "is not a valid file path") from None
    except OSError:
        mode = stat.S_IFREG  # open() below says what is wrong
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):  # a FIFO would block the open, /dev/zero never ends
        raise TargetError("job", str(path), "is not a regular file")
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        raise TargetError("job", str(path), "file not found") from None
    except IsADirectoryError:
        raise TargetError("job", str(path), "is a folder, not a TOML file") from None
    except OSError as exc:
        raise TargetError("job", str(path), f"cannot be read ({exc.strerror})") from None
    if max_targets:
        count = sum(1 for _ in _TABLE.finditer(data))
        if count > max_targets:
            raise TargetError("targets", MISSING, _too_many(count, max_targets), where=where)
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        raise TargetError("job", str(path), f"is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} on line {line})"
                          ) from None


def _parse_toml(text: str, path: str | Path) -> dict[str, Any]:
    try:
        return tomli.loads(text)
    except tomli.TOMLDecodeError as exc:
        raise TargetError("job", str(path), f"is not valid TOML ({exc})") from None


#: ``[[targets]]`` tables parsed at a time by :func:`_read_streamed` (and the fewest it is used for, twice that)
_CHUNK = 1000


def _read_streamed(
    text: str, path: str | Path, defaults: Mapping[str, Any] | None, where: str, max_targets: int = 0
) -> JobFile | None:
    """A big job file of id targets only, parsed :data:`_CHUNK` ``[[targets]]`` tables at a time, each
    chunk's tables made targets before the next chunk is parsed: the parser's tables of a job of
    100,000 targets are never all in memory at once (they were most of its peak). None when the
    file is not such a file (page targets, ``sitemaps``, tables after the targets) or has any error:
    :func:`read_job` then reads it whole, with its checks and messages.

    The same as a parse of the whole file: the text before the first ``[[targets]]`` line holds
    every top-level key and table (nothing after a table header can go back to the top level), a
    chunk from one such line to another holds tables of the array only (else None), and a line
    that looks like a header inside a multi-line string leaves that string open at a chunk's end:
    a TOML error, None."""
    starts = [match.start() for match in _TABLE_TEXT.finditer(text)]
    if len(starts) < 2 * _CHUNK:
        return None
    try:
        head = tomli.loads(text[: starts[0]])
        if "targets" in head:
            return None
        profile, warc_dir, file_defaults = _top_keys(head, where)
        collections, crawl_profiles = _scope_tables(head, where)
        merged = {**(defaults or {}), **file_defaults}
        targets: list[Target] = []
        names: set[str] = set()
        for first in range(0, len(starts), _CHUNK):
            last = first + _CHUNK
            chunk = tomli.loads(text[starts[first]: starts[last] if last < len(starts) else len(text)])
            raws = chunk.get("targets")
            if len(chunk) != 1 or not isinstance(raws, list):
                return None
            if not all(isinstance(raw, dict) and "sitemaps" not in raw and not _is_page_url(raw.get("url"))
                       for raw in raws):
                return None
            del chunk
            for raw in _let_go(raws):
                target = parse_target(raw, merged, job=True)
                if target.name in names:
                    return None
                names.add(target.name)
                targets.append(target)
    except (TargetError, tomli.TOMLDecodeError):
        return None
    if max_targets and len(targets) > max_targets:
        return None
    if any(name not in crawl_profiles for target in targets for name in target.crawl_profiles):
        return None
    return JobFile(str(path), targets, profile, [], collections, crawl_profiles, warc_dir, {})


def _top_keys(data: Mapping[str, Any], where: str) -> tuple[str | None, str | None, dict[str, Any]]:
    """A job file's top-level keys checked (none unknown), its profile, ``warc_dir`` and ``[defaults]``."""
    unknown = sorted(set(data) - set(JOB_KEYS))
    if unknown:
        raise TargetError(unknown[0], data[unknown[0]], f"unknown top-level key (known: {', '.join(JOB_KEYS)})",
                          where=where)
    profile = _job_profile(data, where)
    warc_dir = data.get("warc_dir")
    if warc_dir is not None and not (isinstance(warc_dir, str) and warc_dir.strip()):
        raise TargetError("warc_dir", warc_dir, "must be a folder path (a non-empty string)", where=where)
    file_defaults = data.get("defaults", {})
    if not isinstance(file_defaults, dict):
        raise TargetError("defaults", file_defaults, "must be a table", where=where)
    bad = sorted(set(file_defaults) - (TARGET_KEYS - {"name", "url"}))
    if bad:
        raise TargetError(f"defaults.{bad[0]}", file_defaults[bad[0]], "unknown key", where=where)
    return profile, warc_dir, file_defaults


def _scope_tables(data: Mapping[str, Any], where: str) -> tuple[dict[str, Collection], dict[str, CrawlProfile]]:
    """A job file's ``[[collections]]`` and ``[[crawl_profiles]]``, by name."""
    collections = _collections(data.get("collections", []), where)
    return collections, _crawl_profiles(data.get("crawl_profiles", []), collections, where)


def _job_profile(data: Mapping[str, Any], where: str) -> str | None:
    profile = data.get("profile")
    if profile is not None and not (isinstance(profile, str) and profile.strip()):
        raise TargetError("profile", profile, "must be the name of a settings profile (a non-empty string)",
                          where=where)
    return profile


def read_job_profile(path: str | Path) -> str | None:
    """The ``profile = "NAME"`` key at the top of a job file, or None (a :class:`JobFile` holds it too)."""
    return _job_profile(_read_job_file(path), f"job file {str(path)!r}")


@dataclass(frozen=True)
class JobFile:
    """A job file, read once: its targets, the settings profile its ``profile`` key names (or None),
    and its crawl scope (seed 003): page targets, ``[[collections]]`` and ``[[crawl_profiles]]`` by name."""

    path: str
    targets: list[Target]
    profile: str | None
    page_targets: list[PageTarget] = field(default_factory=list)
    collections: dict[str, Collection] = field(default_factory=dict)
    crawl_profiles: dict[str, CrawlProfile] = field(default_factory=dict)
    #: ``warc_dir = "PATH"``: the job's WARC output folder (``IDCRAWL_WARC_DIR``, which ``-s`` overrides)
    warc_dir: str | None = None
    #: id target -> its ``sitemaps``: evidence for its recrawl (docs/recrawl.md "Sitemaps as evidence")
    id_sitemaps: dict[str, SitemapSpec] = field(default_factory=dict)

    @property
    def has_scope(self) -> bool:
        """Does the job follow links (a page target, or a target with crawl profiles)? ``bool(scope())``, cheaply."""
        return bool(self.page_targets) or any(t.crawl_profiles for t in self.targets)

    def scope(self) -> JobScope:
        """The job's crawl scope (:class:`idcrawl.core.scope.JobScope`): every target as a seed (a page
        target's page; an id target's first id page), its crawl profiles and collections."""
        seeds = {t.name: Seed(t.name, t.url_for(t.start), t.crawl_profiles, t.enabled) for t in self.targets}
        seeds.update((p.name, Seed(p.name, p.url, p.crawl_profiles, p.enabled, p.sitemaps)) for p in self.page_targets)
        return JobScope(seeds, dict(self.crawl_profiles), dict(self.collections),
                        tuple(p.name for p in self.page_targets))


#: The top-level keys of a job file.
JOB_KEYS = ("collections", "crawl_profiles", "defaults", "profile", "targets", "warc_dir")
#: The keys of a ``[[collections]]`` table.
COLLECTION_KEYS = frozenset({"name", "yield_probability", "enabled"})
#: The keys of a ``[[crawl_profiles]]`` table.
CRAWL_PROFILE_KEYS = frozenset({"name", "collection", "max_hops", "max_offsite_hops", "scope", "url_prefixes",
                                "include", "exclude", "schemes", "yield_probability", "enabled", "revisit",
                                "sitemaps", "redirect_hops", "offsite", "canonicalise", "traps", "signature",
                                "signature_drop"})
#: The keys of a crawl profile's ``canonicalise`` and ``traps`` tables.
CANONICALISE_KEYS = frozenset({"drop_query", "strip_www"})
TRAPS_KEYS = frozenset({"max_path_segments", "max_segment_repeats", "max_url_length"})


def read_job(path: str | Path, defaults: Mapping[str, Any] | None = None, *, max_targets: int = 0) -> JobFile:
    """Read a TOML job file: ``[[targets]]`` tables with the spider-argument keys.

    A top-level ``[defaults]`` table sets keys for every target of the file;
    a top-level ``profile = "NAME"`` picks a settings profile for the job
    (the Scrapy shell applies it: ``idcrawl.settings_profiles.JobProfile``).
    Crawl scope (seed 003, :mod:`idcrawl.core.scope`): ``[[collections]]`` and ``[[crawl_profiles]]``
    tables, a target's ``crawl_profiles = [...]`` and ``enabled``, and page targets (a ``url``
    without ``{id}``). With ``max_targets``, a file with more targets is refused before it is parsed.
    """
    where = f"job file {str(path)!r}"
    text = _job_text(path, max_targets=max_targets, where=where)
    streamed = _read_streamed(text, path, defaults, where, max_targets)
    if streamed is not None:
        return streamed
    data = _parse_toml(text, path)
    del text
    _own_strings(data.get("targets"))
    profile, warc_dir, file_defaults = _top_keys(data, where)
    raws = data.get("targets")
    if not isinstance(raws, list):
        raise TargetError("targets", raws if raws is not None else MISSING,
                          "must be an array of [[targets]] tables", where=where)
    if max_targets and len(raws) > max_targets:
        raise TargetError("targets", MISSING, _too_many(len(raws), max_targets), where=where)
    collections, crawl_profiles = _scope_tables(data, where)
    page_indexes = [i for i, raw in enumerate(raws) if isinstance(raw, Mapping) and _is_page_url(raw.get("url"))]
    page_targets: list[PageTarget] = []
    for index in page_indexes:
        try:
            page_targets.append(parse_page_target(raws[index]))
        except TargetError as exc:
            raise exc.located(f"{where}: targets[{index}]") from None
    pages = set(page_indexes)
    id_indexes = [i for i in range(len(raws)) if i not in pages]
    id_raws = [raws[i] for i in id_indexes]
    # an id target's sitemaps: evidence for its recrawl, kept beside its Target (idcrawl.core.sitemaps)
    evidence = {position: spec for position, raw in enumerate(id_raws)
                if (spec := _id_sitemaps(raw, f"{where}: targets[{id_indexes[position]}]")) is not None}
    raws.clear()  # each table is let go once parsed (a big job's raw tables are most of its peak memory)
    targets = (
        parse_targets(_let_go(id_raws), {**(defaults or {}), **file_defaults}, where=f"{where}: ", job=True,
                      indexes=id_indexes)
        if id_raws else []
    )
    if not targets and not page_targets:
        raise TargetError(f"{where}: targets", MISSING, "no target given")
    seen = {t.name: i for t, i in zip(targets, id_indexes, strict=True)}
    for page, index in zip(page_targets, page_indexes, strict=True):
        if page.name in seen:
            raise TargetError("name", page.name,
                              f"is used by targets[{seen[page.name]}] too; names must be unique",
                              where=f"{where}: targets[{index}]")
        seen[page.name] = index
        for target in targets:  # one URL, one fetch: the id target's lanes fetch that page
            id_ = target.id_of(page.url)
            if id_ is None:
                id_ = target.id_of(canonical(page.url))
            if id_ is not None:
                raise TargetError("url", page.url,
                                  f"is the page of id {id_} of target {target.name!r}, which its lanes fetch: "
                                  f"give that target the crawl profiles instead",
                                  where=f"{where}: targets[{index}]")
    referring: list[tuple[int, tuple[str, ...]]] = [
        *((i, t.crawl_profiles) for i, t in zip(id_indexes, targets, strict=True)),
        *((i, p.crawl_profiles) for i, p in zip(page_indexes, page_targets, strict=True)),
    ]
    for index, names in sorted(referring):
        for name in names:
            if name not in crawl_profiles:
                known = ", ".join(crawl_profiles) or "none: the job file has no [[crawl_profiles]]"
                raise TargetError("crawl_profiles", list(names),
                                  f"unknown crawl profile {name!r} (known: {known})",
                                  where=f"{where}: targets[{index}]")
    id_sitemaps = {targets[position].name: spec for position, spec in evidence.items()}
    return JobFile(str(path), targets, profile, page_targets, collections, crawl_profiles, warc_dir, id_sitemaps)


def _id_sitemaps(raw: Any, where: str) -> SitemapSpec | None:
    """An id target table's ``sitemaps`` (taken out of it: :class:`Target` has no such field), parsed."""
    if not isinstance(raw, dict) or "sitemaps" not in raw:
        return None
    try:
        return parse_sitemaps(raw.pop("sitemaps"))
    except TargetError as exc:
        raise exc.located(where) from None


def _own_strings(tables: Any) -> None:
    """Give the text values of ``tables`` (a job file's ``[[targets]]``) memory of their own, apart from the
    parse's: a value a target keeps (its name, its URL) would otherwise keep alive each block of memory the
    parser shared between it and the table's keys and dict, all let go once the targets are made (100,000
    targets: about 25 MB that Python keeps but cannot use for objects of other sizes)."""
    if not isinstance(tables, list):
        return
    copies = [value.encode().decode() for table in tables if isinstance(table, dict)
              for value in table.values() if type(value) is str]  # all made before any original is let go
    fresh = iter(copies)
    for table in tables:
        if isinstance(table, dict):
            for key, value in table.items():
                if type(value) is str:
                    table[key] = next(fresh)


def _let_go(tables: list[Any]) -> Iterator[Any]:
    """The items of ``tables``, each dropped from the list as it is handed out."""
    for index, table in enumerate(tables):
        tables[index] = None
        yield table


def _tables(value: Any, key: str, where: str) -> list[Mapping[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
        raise TargetError(key, value, f"must be an array of [[{key}]] tables", where=where)
    return value


def _probability(field: str, value: Any) -> float:
    """A yield probability: a number in [0, 1] (seed 003: "a number between 0 and 1")."""
    result = as_float(field, value)
    if not result <= 1.0:
        raise TargetError(field, value, "must be a number from 0 to 1 (the chance to give way)")
    return result


def _table(field: str, value: Any, known: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TargetError(field, value, f"must be a table (keys: {', '.join(sorted(known))})")
    bad = sorted(set(value) - known)
    if bad:
        raise TargetError(f"{field}.{bad[0]}", value[bad[0]], f"unknown key (known: {', '.join(sorted(known))})")
    return value


def _canonicalise(value: Any) -> Canonicalise:
    """A crawl profile's ``canonicalise = {drop_query = ["utm_*", "sid"], strip_www = true}``."""
    raw = _table("canonicalise", value, CANONICALISE_KEYS)
    drop = raw.get("drop_query", [])
    items = [drop] if isinstance(drop, str) else drop
    if not isinstance(items, list) or not all(isinstance(item, str) and item.strip() for item in items):
        raise TargetError("canonicalise.drop_query", drop, "must be a list of query keys or globs such as 'utm_*'")
    return Canonicalise(tuple(item.strip() for item in items),
                        as_bool("canonicalise.strip_www", raw.get("strip_www", False)))


def _traps(value: Any) -> Traps:
    """A crawl profile's ``traps = {max_path_segments = 32, max_segment_repeats = 3, max_url_length = 2083}``."""
    raw = _table("traps", value, TRAPS_KEYS)
    default = Traps()
    return Traps(**{key: as_int(f"traps.{key}", raw.get(key, getattr(default, key)), minimum=0)
                    for key in sorted(TRAPS_KEYS)})


def _collections(value: Any, where: str) -> dict[str, Collection]:
    collections: dict[str, Collection] = {}
    for index, raw in enumerate(_tables(value, "collections", where)):
        label = f"{where}: collections[{index}]"
        try:
            refuse_unknown(raw, COLLECTION_KEYS)
            if "name" not in raw:
                raise TargetError("name", MISSING, "is required (the collection's name)")
            name = as_name("name", raw["name"])
            if name in collections:
                raise TargetError("name", name, "is used by another collection too; names must be unique")
            collections[name] = Collection(
                name=name,
                yield_probability=_probability("yield_probability", raw.get("yield_probability", 0.0)),
                enabled=as_bool("enabled", raw.get("enabled", True)),
            )
        except TargetError as exc:
            raise exc.located(label) from None
    return collections


def _regexes(field: str, value: Any) -> tuple[re.Pattern[str], ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise TargetError(field, value, "must be a list of regular expressions")
    patterns = []
    for item in value:
        if not isinstance(item, str) or not item:
            raise TargetError(field, value, f"{item!r} is not a regular expression (a non-empty string)")
        try:
            patterns.append(re.compile(item))
        except re.error as exc:
            raise TargetError(field, value, f"{item!r} is not a valid regular expression ({exc})") from None
    return tuple(patterns)


def _crawl_profile(raw: Mapping[str, Any], collections: Mapping[str, Collection]) -> CrawlProfile:
    refuse_unknown(raw, CRAWL_PROFILE_KEYS)
    if "name" not in raw:
        raise TargetError("name", MISSING, "is required (the crawl profile's name)")
    name = as_name("name", raw["name"])
    if "max_hops" not in raw:
        raise TargetError("max_hops", MISSING, "is required (0: the target's own pages only)")
    max_hops = as_int("max_hops", raw["max_hops"], minimum=0)
    offsite = raw.get("max_offsite_hops")
    max_offsite = None if offsite is None else as_int("max_offsite_hops", offsite, minimum=0)
    collection = raw.get("collection")
    if collection is not None:
        collection = as_name("collection", collection)
        if collection not in collections:
            known = ", ".join(collections) or "none: the job file has no [[collections]]"
            raise TargetError("collection", collection, f"unknown collection (known: {known})")
    kind_value = raw.get("scope", ScopeKind.HOST.value)
    kind = ScopeKind(as_choice("scope", kind_value, tuple(k.value for k in ScopeKind)))
    prefixes: tuple[str, ...] = ()
    if "url_prefixes" in raw:
        value = raw["url_prefixes"]
        if kind is not ScopeKind.PREFIX:
            raise TargetError("url_prefixes", value, f"applies to scope = \"prefix\" only (this one: {kind.value!r})")
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items:
            raise TargetError("url_prefixes", value, "must be a non-empty list of http(s) URLs")
        for item in items:
            if not isinstance(item, str):
                raise TargetError("url_prefixes", value, f"{item!r} is not an http(s) URL")
            check_url("url_prefixes", value, item.strip())
        prefixes = tuple(item.strip() for item in items)
    schemes = SCHEMES
    if "schemes" in raw:
        value = raw["schemes"]
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items or any(
            not isinstance(item, str) or item.strip().lower() not in SCHEMES for item in items
        ):
            raise TargetError("schemes", value, f"must be a non-empty list of {', '.join(SCHEMES)}")
        schemes = tuple(dict.fromkeys(item.strip().lower() for item in items))
    signature = parse_policy({key: raw[key] for key in ("signature", "signature_drop") if key in raw})
    return CrawlProfile(
        name=name,
        signature=signature.signature,
        signature_drop=signature.signature_drop,
        max_hops=max_hops,
        collection=collection,
        max_offsite_hops=max_offsite,
        kind=kind,
        url_prefixes=prefixes,
        include=_regexes("include", raw.get("include", [])),
        exclude=_regexes("exclude", raw.get("exclude", [])),
        schemes=schemes,
        yield_probability=_probability("yield_probability", raw.get("yield_probability", 0.0)),
        enabled=as_bool("enabled", raw.get("enabled", True)),
        revisit=parse_duration("revisit", raw["revisit"]) if "revisit" in raw else None,
        sitemaps=parse_sitemaps(raw["sitemaps"]) if "sitemaps" in raw else None,
        redirect_hops=as_bool("redirect_hops", raw.get("redirect_hops", True)),
        offsite=OffSite(as_choice("offsite", raw.get("offsite", OffSite.HOST.value), tuple(OffSite))),
        canonicalise=_canonicalise(raw["canonicalise"]) if "canonicalise" in raw else Canonicalise(),
        traps=_traps(raw["traps"]) if "traps" in raw else Traps(),
    )


def _crawl_profiles(value: Any, collections: Mapping[str, Collection], where: str) -> dict[str, CrawlProfile]:
    profiles: dict[str, CrawlProfile] = {}
    for index, raw in enumerate(_tables(value, "crawl_profiles", where)):
        try:
            crawl_profile = _crawl_profile(raw, collections)
            if crawl_profile.name in profiles:
                raise TargetError("name", crawl_profile.name,
                                  "is used by another crawl profile too; names must be unique")
        except TargetError as exc:
            raise exc.located(f"{where}: crawl_profiles[{index}]") from None
        profiles[crawl_profile.name] = crawl_profile
    return profiles


def parse_job(
    path: str | Path, defaults: Mapping[str, Any] | None = None, *, max_targets: int = 0
) -> list[Target]:
    """The targets of a job file (:func:`read_job`)."""
    return read_job(path, defaults, max_targets=max_targets).targets


#: A ``[[targets]]`` table header at the start of a line (counted before the file is parsed).
_TABLE = re.compile(rb"^[ \t]*\[\[[ \t]*targets[ \t]*\]\]", re.MULTILINE)
_TABLE_TEXT = re.compile(_TABLE.pattern.decode(), re.MULTILINE)


def _too_many(count: int, limit: int) -> str:
    return (f"has {count} targets, more than IDCRAWL_MAX_TARGETS={limit} "
            "(split the job, or raise the setting: about 0.1 s of CPU and 4 MB per 1,000 targets to start)")
