"""Job files with crawl scope (seed 003, issue 16): ``[[collections]]``, ``[[crawl_profiles]]``,
a target's ``crawl_profiles`` and ``enabled``, page targets (a ``url`` without ``{id}``).

Every bad key, value and reference gives one TargetError line naming the field and the value.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from idcrawl.core.inputs import TargetError
from idcrawl.core.jobfile import read_job
from idcrawl.core.scope import Collection, ScopeKind
from idcrawl.core.targets import PageTarget, parse_target

GOOD = """
[[collections]]
name = "news"
yield_probability = 0.5

[[collections]]
name = "archive"
enabled = false

[[crawl_profiles]]
name = "frontpages"
collection = "news"
max_hops = 0

[[crawl_profiles]]
name = "daily"
collection = "news"
max_hops = 2
max_offsite_hops = 1
scope = "domain"
include = ["^https?://cdn\\\\.example/"]
exclude = ["\\\\.pdf$"]
schemes = ["https"]
yield_probability = 0.9

[[crawl_profiles]]
name = "section"
max_hops = 3
scope = "prefix"
url_prefixes = ["http://www.db.no/artikkel/"]
enabled = false

[[targets]]
name = "front"
url = "http://www.db.no/"
crawl_profiles = ["frontpages", "daily"]

[[targets]]
name = "notices"
url = "https://www.db.no/notice/{id}"
start = 5
crawl_profiles = ["section"]
enabled = false

[[targets]]
url = "https://www.vg.no/"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_job_file_with_crawl_scope_gives_collections_crawl_profiles_and_page_targets(tmp_path: Path) -> None:
    job = read_job(write(tmp_path, GOOD))
    assert list(job.collections) == ["news", "archive"]
    assert job.collections["news"] == Collection("news", 0.5, True)
    assert job.collections["archive"].enabled is False
    assert list(job.crawl_profiles) == ["frontpages", "daily", "section"]
    daily = job.crawl_profiles["daily"]
    assert (daily.collection, daily.max_hops, daily.max_offsite_hops, daily.kind) == ("news", 2, 1, ScopeKind.DOMAIN)
    assert [p.pattern for p in daily.include] == [r"^https?://cdn\.example/"]
    assert [p.pattern for p in daily.exclude] == [r"\.pdf$"]
    assert (daily.schemes, daily.yield_probability) == (("https",), 0.9)
    front = job.crawl_profiles["frontpages"]
    assert (front.kind, front.max_offsite_hops, front.schemes, front.enabled) == (ScopeKind.HOST, None,
                                                                                  ("http", "https"), True)
    section = job.crawl_profiles["section"]
    assert (section.collection, section.url_prefixes, section.enabled) == (None, ("http://www.db.no/artikkel/",),
                                                                            False)
    assert job.page_targets == [PageTarget("front", "http://www.db.no/", ("frontpages", "daily"), True),
                                PageTarget("www.vg.no", "https://www.vg.no/", (), True)]
    (notices,) = job.targets
    assert (notices.name, notices.crawl_profiles, notices.enabled) == ("notices", ("section",), False)


def test_a_job_without_crawl_scope_reads_as_before(tmp_path: Path) -> None:
    job = read_job(write(tmp_path, '[[targets]]\nurl = "https://a.example/{id}"\nstart = 1\n'))
    assert (job.page_targets, job.collections, job.crawl_profiles) == ([], {}, {})
    assert (job.targets[0].crawl_profiles, job.targets[0].enabled) == ((), True)


def test_a_job_of_page_targets_only_is_a_job(tmp_path: Path) -> None:
    job = read_job(write(tmp_path, '[[targets]]\nurl = "https://a.example/"\n'))
    assert job.targets == []
    assert [p.url for p in job.page_targets] == ["https://a.example/"]


def test_scope_keys_are_job_file_keys_not_spider_arguments() -> None:
    with pytest.raises(TargetError) as info:
        parse_target({"url": "https://a.example/{id}", "start": "1", "crawl_profiles": "daily"})
    assert info.value.field == "crawl_profiles"
    assert "unknown key" in str(info.value)


PROFILE = '[[crawl_profiles]]\nname = "daily"\nmax_hops = 1\n'
TARGET = '[[targets]]\nurl = "https://a.example/"\ncrawl_profiles = ["daily"]\n'

#: (job file text, where, field, shown value, words of the reason)
BAD = {
    "collections not tables": ('collections = ["news"]\n' + TARGET.replace('crawl_profiles = ["daily"]\n', ""),
                               "", "collections", "['news']", "array of [[collections]] tables"),
    "collection unknown key": ('[[collections]]\nname = "news"\nweight = 0.5\n' + PROFILE + TARGET,
                               "collections[0]", "weight", "0.5", "unknown key"),
    "collection without name": ('[[collections]]\nyield_probability = 0.5\n' + PROFILE + TARGET,
                                "collections[0]", "name", None, "is required"),
    "collection name with slash": ('[[collections]]\nname = "a/b"\n' + PROFILE + TARGET,
                                   "collections[0]", "name", "'a/b'", "without '/'"),
    "collection twice": ('[[collections]]\nname = "news"\n[[collections]]\nname = "news"\n' + PROFILE + TARGET,
                         "collections[1]", "name", "'news'", "unique"),
    "collection yield over 1": ('[[collections]]\nname = "news"\nyield_probability = 1.5\n' + PROFILE + TARGET,
                                "collections[0]", "yield_probability", "1.5", "from 0 to 1"),
    "collection yield negative": ('[[collections]]\nname = "news"\nyield_probability = -0.1\n' + PROFILE + TARGET,
                                  "collections[0]", "yield_probability", "-0.1", ">= 0"),
    "collection yield text": ('[[collections]]\nname = "news"\nyield_probability = "often"\n' + PROFILE + TARGET,
                              "collections[0]", "yield_probability", "'often'", "must be a number"),
    "collection enabled text": ('[[collections]]\nname = "news"\nenabled = "maybe"\n' + PROFILE + TARGET,
                                "collections[0]", "enabled", "'maybe'", "true or false"),
    "crawl profiles not tables": ('crawl_profiles = "daily"\n' + TARGET, "", "crawl_profiles", "'daily'",
                                  "array of [[crawl_profiles]] tables"),
    "crawl profile unknown key": (PROFILE + 'depth = 2\n' + TARGET, "crawl_profiles[0]", "depth", "2",
                                  "unknown key"),
    "crawl profile without name": ('[[crawl_profiles]]\nmax_hops = 1\n' + TARGET, "crawl_profiles[0]", "name",
                                   None, "is required"),
    "crawl profile twice": (PROFILE + PROFILE + TARGET, "crawl_profiles[1]", "name", "'daily'", "unique"),
    "crawl profile without max_hops": ('[[crawl_profiles]]\nname = "daily"\n' + TARGET, "crawl_profiles[0]",
                                       "max_hops", None, "is required"),
    "max_hops negative": ('[[crawl_profiles]]\nname = "daily"\nmax_hops = -1\n' + TARGET, "crawl_profiles[0]",
                          "max_hops", "-1", ">= 0"),
    "max_offsite_hops text": (PROFILE + 'max_offsite_hops = "x"\n' + TARGET, "crawl_profiles[0]",
                              "max_offsite_hops", "'x'", "integer"),
    "unknown collection": (PROFILE + 'collection = "news"\n' + TARGET, "crawl_profiles[0]", "collection",
                           "'news'", "unknown collection"),
    "bad scope": (PROFILE + 'scope = "site"\n' + TARGET, "crawl_profiles[0]", "scope", "'site'",
                  "one of host, domain, prefix, any"),
    "url_prefixes without prefix scope": (PROFILE + 'url_prefixes = ["https://a.example/x/"]\n' + TARGET,
                                          "crawl_profiles[0]", "url_prefixes", "['https://a.example/x/']",
                                          'scope = "prefix" only'),
    "url_prefixes not a URL": (PROFILE + 'scope = "prefix"\nurl_prefixes = ["a.example/x/"]\n' + TARGET,
                               "crawl_profiles[0]", "url_prefixes", "['a.example/x/']", "http or https"),
    "url_prefixes empty": (PROFILE + 'scope = "prefix"\nurl_prefixes = []\n' + TARGET,
                           "crawl_profiles[0]", "url_prefixes", "[]", "non-empty list"),
    "bad include regex": (PROFILE + 'include = ["(unclosed"]\n' + TARGET, "crawl_profiles[0]", "include",
                          "['(unclosed']", "not a valid regular expression"),
    "bad exclude regex": (PROFILE + 'exclude = ["*x"]\n' + TARGET, "crawl_profiles[0]", "exclude",
                          "['*x']", "not a valid regular expression"),
    "exclude not a list": (PROFILE + 'exclude = 3\n' + TARGET, "crawl_profiles[0]", "exclude", "3",
                           "list of regular expressions"),
    "bad scheme": (PROFILE + 'schemes = ["ftp"]\n' + TARGET, "crawl_profiles[0]", "schemes", "['ftp']",
                   "http, https"),
    "crawl profile yield 1.5": (PROFILE + 'yield_probability = 1.5\n' + TARGET, "crawl_profiles[0]",
                                "yield_probability", "1.5", "from 0 to 1"),
    "crawl profile enabled number": (PROFILE + 'enabled = 2\n' + TARGET, "crawl_profiles[0]", "enabled", "2",
                                     "true or false"),
    "revisit zero": (PROFILE + 'revisit = 0\n' + TARGET, "crawl_profiles[0]", "revisit", "0", "duration > 0"),
    "revisit negative": (PROFILE + 'revisit = "-1h"\n' + TARGET, "crawl_profiles[0]", "revisit", "'-1h'",
                         "duration > 0"),
    "revisit text": (PROFILE + 'revisit = "hourly"\n' + TARGET, "crawl_profiles[0]", "revisit", "'hourly'",
                     "such as 60s, 15m, 6h, 1d"),
    "revisit unknown unit": (PROFILE + 'revisit = "2w"\n' + TARGET, "crawl_profiles[0]", "revisit", "'2w'",
                             "duration > 0"),
    "revisit infinite": (PROFILE + 'revisit = inf\n' + TARGET, "crawl_profiles[0]", "revisit", "inf",
                         "duration > 0"),
    "revisit not a number": (PROFILE + 'revisit = true\n' + TARGET, "crawl_profiles[0]", "revisit", "True",
                             "duration > 0"),
    "revisit a list": (PROFILE + 'revisit = [3600]\n' + TARGET, "crawl_profiles[0]", "revisit", "[3600]",
                       "duration > 0"),
    "target names an unknown crawl profile": (PROFILE + TARGET.replace('"daily"', '"weekly"'), "targets[0]",
                                              "crawl_profiles", "['weekly']", "unknown crawl profile 'weekly'"),
    "target names a crawl profile twice": (PROFILE + TARGET.replace('["daily"]', '["daily", "daily"]'),
                                           "targets[0]", "crawl_profiles", "['daily', 'daily']", "twice"),
    "target crawl_profiles not a list": (PROFILE + TARGET.replace('["daily"]', '3'), "targets[0]",
                                         "crawl_profiles", "3", "list of names"),
    "crawl profiles without any defined": (TARGET, "targets[0]", "crawl_profiles", "['daily']",
                                           "the job file has no [[crawl_profiles]]"),
    "id target enabled text": (PROFILE + '[[targets]]\nurl = "https://a.example/{id}"\nstart = 1\nenabled = "off"\n',
                               "targets[0]", "enabled", "'off'", "true or false"),
    "page target with a lane key": (PROFILE + TARGET + 'start = 5\n', "targets[0]", "start", "5",
                                    "page target"),
    "page target with margin": (PROFILE + TARGET + 'margin = 3\n', "targets[0]", "margin", "3", "lane keys"),
    "page target unknown key": (PROFILE + TARGET + 'depth = 3\n', "targets[0]", "depth", "3", "unknown key"),
    "page target not http": (PROFILE + '[[targets]]\nurl = "ftp://a.example/"\n', "targets[0]", "url",
                             "'ftp://a.example/'", "http or https"),
    "page target without host": (PROFILE + '[[targets]]\nurl = "https:///front"\n', "targets[0]", "url",
                                 "'https:///front'", "no host"),
    "page target name taken": (PROFILE + '[[targets]]\nname = "a"\nurl = "https://a.example/{id}"\nstart = 1\n'
                               '[[targets]]\nname = "a"\nurl = "https://a.example/"\n', "targets[1]", "name", "'a'",
                               "targets[0] too"),
    "page target name with slash": (PROFILE + '[[targets]]\nname = "a/b"\nurl = "https://a.example/"\n',
                                    "targets[0]", "name", "'a/b'", "without '/'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_every_bad_scope_key_gives_one_line_naming_the_field_and_value(tmp_path: Path, case: str) -> None:
    text, where, field, shown, reason = BAD[case]
    path = write(tmp_path, text)
    with pytest.raises(TargetError) as info:
        read_job(path)
    line = str(info.value)
    assert "\n" not in line
    assert line.startswith(f"job file {str(path)!r}: " + (f"{where}: " if where else "")), line
    assert (f"{field}={shown}:" if shown is not None else f"{field}:") in line, line
    assert reason in line, line


def test_a_job_files_scope_has_every_target_as_a_seed(tmp_path: Path) -> None:
    scope = read_job(write(tmp_path, GOOD)).scope()
    assert list(scope.seeds) == ["notices", "front", "www.vg.no"]
    assert scope.seeds["notices"].url == "https://www.db.no/notice/5"
    assert (scope.seeds["notices"].enabled, scope.seeds["front"].crawl_profiles) == (False, ("frontpages", "daily"))
    assert bool(scope) is True and read_job(write(tmp_path, GOOD)).has_scope is True
    plain = read_job(write(tmp_path, '[[targets]]\nurl = "https://a.example/{id}"\nstart = 1\n'))
    assert (bool(plain.scope()), plain.has_scope) == (False, False)


def test_an_id_targets_page_is_recognised_within_its_bounds() -> None:
    target = parse_target({"url": "https://a.example/item/{id:04d}?x=1", "start": "5", "min": "2", "max": "900"})
    assert target.id_of("https://a.example/item/0042?x=1") == 42
    assert target.id_of("https://a.example/item/42?x=1") is None  # not the template's rendering
    assert target.id_of("https://a.example/item/0001?x=1") is None  # below min
    assert target.id_of("https://a.example/item/abcd?x=1") is None
    assert target.id_of("https://a.example/other/0042?x=1") is None


@pytest.mark.parametrize(("value", "seconds"), [("", None), ("revisit = 3600\n", 3600.0), ('revisit = "90m"\n', 5400.0),
                                                ('revisit = "1d"\n', 86400.0), ('revisit = "0.5h"\n', 1800.0)])
def test_a_crawl_profiles_revisit_is_a_duration_and_none_by_default(tmp_path: Path, value: str,
                                                                      seconds: float | None) -> None:
    job = read_job(write(tmp_path, PROFILE + value + TARGET))
    assert job.crawl_profiles["daily"].revisit == seconds
