"""Crawl-scope rules of issue 30 (findings 5-9): canonical URLs (default ports, a crawl profile's rules),
redirects as links in the URL queue, one URL one fetch, off-site counting by host or registered domain,
traps, the yield probability's range, the local resolver (IDCRAWL_RESOLVE)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from idcrawl.core.inputs import TargetError
from idcrawl.core.jobfile import read_job
from idcrawl.core.scope import (
    Candidate,
    Canonicalise,
    CrawlProfile,
    Hops,
    JobScope,
    OffSite,
    ScopeKind,
    Seed,
    Traps,
    canonical,
    choose,
    in_scope,
)
from idcrawl.core.setting_specs import SettingError, build_config
from idcrawl.core.urlqueue import MemoryUrlQueue, QueueState

# -- canonical URLs ------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b"), [
    ("http://host:80/a1", "http://host/a1"),
    ("https://Host:443/a1?b=2&a=1#top", "https://host/a1?a=1&b=2"),
    ("http://u:secret@host:80/", "http://u:secret@host/"),
])
def test_a_default_port_written_out_is_the_same_url(a: str, b: str) -> None:
    assert canonical(a) == canonical(b)


@pytest.mark.parametrize("url", ["http://host:8080/a1", "https://host:80/a1", "http://host:443/"])
def test_another_port_stays(url: str) -> None:
    assert ":" in canonical(url).split("//", 1)[1].split("/", 1)[0]


def test_a_crawl_profiles_rules_drop_query_keys_by_glob_and_www() -> None:
    rules = Canonicalise(("utm_*", "JSESSIONID"), strip_www=True)
    url = canonical("http://www.db.no/a?utm_source=x&b=1&jsessionid=3&UTM_medium=y&c=")
    assert rules.apply(url) == "http://db.no/a?b=1&c="
    assert rules.apply(canonical("http://www.co.uk/")) == "http://www.co.uk/"  # a bare suffix keeps its www
    assert Canonicalise().apply(url) == url


def test_the_rules_of_every_crawl_profile_of_a_target_apply_to_its_links() -> None:
    scope = JobScope({"t": Seed("t", "http://db.no/", ("p", "q"))},
                     {"p": CrawlProfile("p", 1, canonicalise=Canonicalise(("sid",))),
                      "q": CrawlProfile("q", 1, canonicalise=Canonicalise(("utm_*",), strip_www=True))})
    rules = scope.canonical_for("t")
    assert rules.apply(canonical("http://www.db.no/x?sid=1&utm_a=2&k=3")) == "http://db.no/x?k=3"
    assert not scope.canonical_for("nobody")


def test_a_page_linking_a_url_with_and_without_its_default_port_queues_it_once() -> None:
    scope = JobScope({"t": Seed("t", "http://a.test/", ("p",))}, {"p": CrawlProfile("p", 2)}, pages=("t",))
    queue = MemoryUrlQueue()
    queue.start(scope, 0.0)
    queue.seed("t", canonical("http://a.test/"), 0.0)
    assert queue.take(lambda _: True, 0.0) is not None
    links = [canonical("http://a.test:80/a1"), canonical("http://a.test/a1")]
    queue.fetched("http://a.test/", links, 0.0)
    assert [e.url for e in queue.entries() if e.record.hops.hops == 1] == ["http://a.test/a1"]


# -- redirects are links -------------------------------------------------------------------


def started(max_hops: int = 2, **keys: object) -> MemoryUrlQueue:
    scope = JobScope({"t": Seed("t", "http://a.test/", ("p",))},
                     {"p": CrawlProfile("p", max_hops, **keys)},  # type: ignore[arg-type]
                     pages=("t",))
    queue = MemoryUrlQueue()
    queue.start(scope, 0.0)
    queue.seed("t", "http://a.test/", 0.0)
    queue.take(lambda _: True, 0.0)
    queue.fetched("http://a.test/", ["http://a.test/r1", "http://a.test/a1"], 0.0)
    return queue


def test_a_redirect_out_of_scope_is_not_followed_and_its_url_is_harvested() -> None:
    queue = started()
    assert queue.take(lambda host: True, 0.0) is not None
    queue.take(lambda host: True, 0.0)
    assert queue.redirected("http://a.test/r1", "http://x.test/out", 1.0) is None
    assert queue.get("http://x.test/out") is None
    entry = queue.get("http://a.test/r1")
    assert entry is not None and entry.state is QueueState.HARVESTED and entry.links == ("http://x.test/out",)


def test_a_redirect_to_a_known_url_is_not_followed_it_is_fetched_once() -> None:
    queue = started()
    queue.take(lambda _: True, 0.0)
    queue.take(lambda _: True, 0.0)
    assert queue.redirected("http://a.test/r1", "http://a.test/a1", 1.0) is None
    assert queue.take(lambda _: True, 1.0) is None  # nothing more to fetch: /a1 was taken already


def test_a_redirect_to_a_new_url_in_scope_is_taken_for_the_request_that_follows_it() -> None:
    queue = started()
    queue.take(lambda _: True, 0.0)
    queue.take(lambda _: True, 0.0)
    claimed = queue.redirected("http://a.test/r1", "http://a.test/a5", 1.0)
    assert claimed is not None and claimed.state is QueueState.TAKEN and claimed.record.hops == Hops(2, 0)
    assert queue.take(lambda _: True, 1.0) is None  # not queued for another fetch


@pytest.mark.parametrize(("redirect_hops", "max_hops", "followed"), [(True, 1, False), (False, 1, True)])
def test_whether_a_redirect_is_a_hop_is_the_crawl_profiles_choice(redirect_hops: bool, max_hops: int,
                                                                   followed: bool) -> None:
    queue = started(max_hops, redirect_hops=redirect_hops)
    queue.take(lambda _: True, 0.0)
    queue.take(lambda _: True, 0.0)
    claimed = queue.redirected("http://a.test/r1", "http://a.test/a5", 1.0,
                               hop=queue.scope.redirect_hops("t"))
    assert (claimed is not None) is followed
    if claimed is not None:
        assert claimed.record.hops == Hops(1, 0)


# -- off-site by host or registered domain -------------------------------------------------


def test_the_offsite_counter_starts_on_another_host_or_another_registered_domain() -> None:
    assert Hops(1, 0).follow("http://www.db.no/", "http://img.db.no/x") == Hops(2, 1)
    assert Hops(1, 0).follow("http://www.db.no/", "http://img.db.no/x", by_domain=True) == Hops(2, 0)
    assert Hops(1, 0).follow("http://www.db.no/", "http://vg.no/x", by_domain=True) == Hops(2, 1)
    assert Hops(1, 1).follow("http://www.db.no/", "http://www.db.no/x", by_domain=True) == Hops(2, 2)


def test_a_target_counts_by_domain_when_every_crawl_profile_says_so() -> None:
    domain = CrawlProfile("d", 3, kind=ScopeKind.ANY, max_offsite_hops=0, offsite=OffSite.DOMAIN)
    host = CrawlProfile("h", 3, kind=ScopeKind.ANY, max_offsite_hops=0)
    scope = JobScope({"t": Seed("t", "http://www.db.no/", ("d",)), "u": Seed("u", "http://www.db.no/", ("d", "h"))},
                     {"d": domain, "h": host}, pages=("t", "u"))
    assert scope.offsite_by_domain("t") and not scope.offsite_by_domain("u")
    queue = MemoryUrlQueue()
    queue.start(scope, 0.0)
    queue.seed("t", "http://www.db.no/", 0.0)
    queue.take(lambda _: True, 0.0)
    queue.fetched("http://www.db.no/", ["http://img.db.no/a", "http://vg.no/b"], 0.0)
    assert queue.get("http://img.db.no/a") is not None  # the same registered domain: not off-site
    assert queue.get("http://vg.no/b") is None


# -- traps ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("url", "rule"), [
    ("http://a.test/" + "/".join(f"s{i}" for i in range(33)), "path_segments"),
    ("http://a.test/cal/y/y/y/y/", "repeated_segment"),
    ("http://a.test/?q=" + "x" * 2100, "url_length"),
])
def test_the_traps_refuse_what_trap_sites_make(url: str, rule: str) -> None:
    assert Traps().refuses(canonical(url)) == rule
    assert not in_scope(CrawlProfile("p", 9), "http://a.test/", canonical(url), Hops(1, 0))


@pytest.mark.parametrize("url", [
    "http://a.test/2024/01/01/news/politics/a-long-article-title-with-many-words-1234567",
    "http://a.test/y/y/y/z",  # three in a row
    "http://a.test/" + "/".join(f"s{i}" for i in range(32)),
    "http://a.test/search?q=" + "x" * 1900,
])
def test_the_default_traps_leave_real_sites_alone(url: str) -> None:
    assert Traps().refuses(canonical(url)) is None


def test_a_trap_limit_of_zero_is_off() -> None:
    assert Traps(0, 0, 0).refuses("http://a.test/" + "/y" * 300) is None


# -- the job file --------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_crawl_profile_keys_of_the_rules(tmp_path: Path) -> None:
    job = read_job(write(tmp_path, """
[[crawl_profiles]]
name = "p"
max_hops = 2
redirect_hops = false
offsite = "domain"
canonicalise = {drop_query = ["utm_*", "sid"], strip_www = true}
traps = {max_path_segments = 10, max_url_length = 0}

[[targets]]
url = "https://a.example/"
crawl_profiles = ["p"]
"""))
    profile = job.crawl_profiles["p"]
    assert (profile.redirect_hops, profile.offsite) == (False, OffSite.DOMAIN)
    assert profile.canonicalise == Canonicalise(("utm_*", "sid"), True)
    assert profile.traps == Traps(10, 3, 0)
    assert CrawlProfile("q", 1).redirect_hops and CrawlProfile("q", 1).traps == Traps(32, 3, 2083)


PROFILE = '[[crawl_profiles]]\nname = "p"\nmax_hops = 1\n'
TARGET = '[[targets]]\nurl = "https://a.example/"\ncrawl_profiles = ["p"]\n'


@pytest.mark.parametrize(("text", "field", "words"), [
    (PROFILE + 'offsite = "planet"\n' + TARGET, "offsite", "must be one of host, domain"),
    (PROFILE + 'redirect_hops = "maybe"\n' + TARGET, "redirect_hops", ""),
    (PROFILE + 'traps = {max_depth = 3}\n' + TARGET, "traps.max_depth", "unknown key"),
    (PROFILE + 'traps = {max_path_segments = -1}\n' + TARGET, "traps.max_path_segments", ""),
    (PROFILE + 'canonicalise = {drop_query = [""]}\n' + TARGET, "canonicalise.drop_query", "query keys"),
    (PROFILE + 'canonicalise = "www"\n' + TARGET, "canonicalise", "must be a table"),
])
def test_a_bad_rule_key_is_one_line_naming_the_field(tmp_path: Path, text: str, field: str, words: str) -> None:
    with pytest.raises(TargetError) as info:
        read_job(write(tmp_path, text))
    line = str(info.value)
    assert "\n" not in line and "crawl_profiles[0]" in line and f"{field}=" in line and words in line


def test_a_page_target_on_an_id_targets_page_is_refused_in_one_line(tmp_path: Path) -> None:
    """One URL, one fetch: the id target's lanes fetch /n/3; a page target on it would fetch it again."""
    text = """
[[crawl_profiles]]
name = "p"
max_hops = 1

[[targets]]
name = "N"
url = "https://a.example/n/{id}"
start = 1

[[targets]]
name = "S"
url = "https://a.example/n/3"
crawl_profiles = ["p"]
"""
    with pytest.raises(TargetError) as info:
        read_job(write(tmp_path, text))
    line = str(info.value)
    assert "\n" not in line and "targets[1]" in line and "url='https://a.example/n/3'" in line
    assert "id 3 of target 'N'" in line
    read_job(write(tmp_path, text.replace("start = 1", "start = 1\nmax = 2")))  # past its max: no id page


# -- yield probability ---------------------------------------------------------------------


def test_a_yield_probability_of_1_is_accepted_and_always_gives_way_under_contention(tmp_path: Path) -> None:
    job = read_job(write(tmp_path, PROFILE + "yield_probability = 1\n" + TARGET))
    assert job.crawl_profiles["p"].yield_probability == 1.0
    rng = random.Random(7)
    candidates = [Candidate(1, None, "gives", crawl_profile_yield=1.0), Candidate(2, None, "keeps")]
    assert {choose(candidates, rng).crawl_profile for _ in range(200)} == {"keeps"}
    assert choose(candidates[:1], rng).crawl_profile == "gives"  # without contention it keeps the slot


# -- IDCRAWL_RESOLVE -----------------------------------------------------------------------


def test_the_resolve_setting_maps_names_to_addresses() -> None:
    assert build_config({"IDCRAWL_RESOLVE": {"Gamma.example.": "127.0.0.3"}}.get).resolve == (
        ("gamma.example", "127.0.0.3"),)
    assert build_config({"IDCRAWL_RESOLVE": "a.test=127.0.0.2, b.test=::1"}.get).resolve == (
        ("a.test", "127.0.0.2"), ("b.test", "::1"))
    assert build_config({"IDCRAWL_RESOLVE": '{"c.test": "10.0.0.1"}'}.get).resolve == (("c.test", "10.0.0.1"),)
    assert build_config({}.get).resolve is None
    with pytest.raises(SettingError) as info:
        build_config({"IDCRAWL_RESOLVE": "a.test=home"}.get)
    assert str(info.value).startswith("IDCRAWL_RESOLVE='a.test=home': must map host names to IP addresses")


def test_the_resolver_answers_mapped_names_and_refuses_others_when_told() -> None:
    from twisted.internet.error import DNSLookupError

    from idcrawl.resolver import IdResolver

    resolver = IdResolver(None, {"gamma.example": "127.0.0.3"}, None)
    results: list[object] = []
    resolver.getHostByName("GAMMA.example.").addBoth(results.append)
    resolver.getHostByName("127.0.0.9").addBoth(results.append)
    resolver.getHostByName("www.example.org").addBoth(results.append)
    assert results[:2] == ["127.0.0.3", "127.0.0.9"]
    assert results[2].check(DNSLookupError)  # type: ignore[attr-defined]


def test_strip_www_applies_to_the_seed_too_so_a_host_scope_still_holds() -> None:
    profile = CrawlProfile("p", 2, canonicalise=Canonicalise(strip_www=True))
    scope = JobScope({"t": Seed("t", "http://www.db.no/", ("p",))}, {"p": profile}, pages=("t",))
    link = scope.canonical_for("t").apply(canonical("http://www.db.no/a"))
    assert (scope.seed_url("t"), link) == ("http://db.no/", "http://db.no/a")
    assert scope.scoped("t", link, Hops(1, 0)) == ("p",)


def test_a_hop_0_pages_redirect_leads_to_a_hop_0_page() -> None:
    """http://a.test/ -> https://a.test/ (Heritrix's seedsRedirectNewSeeds): the walk is not one hop deeper."""
    scope = JobScope({"t": Seed("t", "http://a.test/", ("p",))}, {"p": CrawlProfile("p", 1)}, pages=("t",))
    queue = MemoryUrlQueue()
    queue.start(scope, 0.0)
    queue.seed("t", "http://a.test/", 0.0)
    queue.take(lambda _: True, 0.0)
    claimed = queue.redirected("http://a.test/", "https://a.test/", 0.0)
    assert claimed is not None and claimed.record.hops == Hops(0, 0)
    queue.fetched("https://a.test/", ["https://a.test/x"], 0.0)
    x = queue.get("https://a.test/x")
    assert x is not None and x.record.hops == Hops(1, 0)
