"""Signatures per crawl profile (issue 31): a crawl profile's ``signature`` and ``signature_drop`` keys
decide its pages' item ``checksum`` as an id target's do, on pages with a clock in them.

Two crawls of the same link graph, whose pages say how many pages were served before them: under a
profile without the keys the checksum is the SHA-1 of the body (it changes with the clock); under one
with ``signature = "text"`` and a pattern dropping the clock it is the same both times, and it is the
SHA-1 of the page's visible text (its heading and link texts) less the clock, whitespace folded.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.support.crawl import run_crawl
from tests.support.linkgraph import LinkGraphSite, resolver_settings

A, B = "a.test", "b.test"
GRAPH = {
    "http://a.test/": ["http://a.test/1", "http://a.test/2"],
    "http://a.test/1": ["http://a.test/2"],
    "http://a.test/2": [],
    "http://b.test/": ["http://b.test/1", "http://b.test/2"],
    "http://b.test/1": ["http://b.test/2"],
    "http://b.test/2": [],
}
DROP = r"served \d+"


def job(tmp_path: Path, site: LinkGraphSite) -> Path:
    path = tmp_path / "job.toml"
    path.write_text(f"""
[[crawl_profiles]]
name = "plain"
max_hops = 2

[[crawl_profiles]]
name = "steady"
max_hops = 2
signature = "text"
signature_drop = ['{DROP}']

[[targets]]
name = "a"
url = "{site.url('http://a.test/')}"
crawl_profiles = ["plain"]

[[targets]]
name = "b"
url = "{site.url('http://b.test/')}"
crawl_profiles = ["steady"]
""")
    return path


def test_a_crawl_profiles_signature_keys_decide_its_pages_checksums(tmp_path: Path) -> None:
    site = LinkGraphSite(GRAPH, clock=True).start()
    try:
        runs = []
        for n in (1, 2):
            workdir = tmp_path / f"run{n}"
            workdir.mkdir()
            result = run_crawl(workdir, {"job": job(workdir, site)}, {**resolver_settings([A, B]),
                                                                       "IDCRAWL_STATE": False})
            assert result.returncode == 0, result.stderr[-3000:]
            runs.append({(item["target"], item["url"].split(f":{site.port}")[-1]): item["checksum"]
                         for item in result.items})
    finally:
        site.stop()
    pages = {(target, path) for target in "ab" for path in ("/", "/1", "/2")}
    assert set(runs[0]) == set(runs[1]) == pages
    for path in ("/", "/1", "/2"):
        assert runs[0][("a", path)] != runs[1][("a", path)]  # the body: the clock changes it
        assert runs[0][("b", path)] == runs[1][("b", path)]  # the text less the clock: steady
        text = " ".join([f"http://b.test{path}", *GRAPH[f"http://b.test{path}"]])
        assert runs[0][("b", path)] == hashlib.sha1(text.encode()).hexdigest()


@pytest.mark.parametrize(("keys", "message"), [
    ('signature = "words"', "signature='words': must be one of body, text"),
    ("signature_drop = ['(']", "signature_drop='(': is not a regular expression"),
])
def test_bad_signature_keys_of_a_crawl_profile_are_one_line(tmp_path: Path, keys: str, message: str) -> None:
    from idcrawl.core.inputs import TargetError
    from idcrawl.core.jobfile import read_job

    path = tmp_path / "job.toml"
    path.write_text(f'[[crawl_profiles]]\nname = "p"\nmax_hops = 1\n{keys}\n\n'
                    '[[targets]]\nname = "a"\nurl = "http://a.test/"\ncrawl_profiles = ["p"]\n')
    with pytest.raises(TargetError) as caught:
        read_job(path)
    assert message in str(caught.value)
