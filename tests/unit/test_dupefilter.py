"""The request dupefilter's backends (core); IdDupeFilter in real crawls: tests/crawl/test_dupefilter_crawl.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from idcrawl.core.seen import (
    BACKENDS,
    INITIAL_CAPACITY,
    LIBRARY_VERSIONS,
    MAGIC,
    ExactSeen,
    PyBloomSeen,
    RBloomSeen,
    Seen,
    SeenConfigError,
    SeenFileError,
    dump,
    load,
    make_backend,
    stable_hash,
)
from idcrawl.dupefilters import seen_path

BLOOMS = ["pybloom", "rbloom"]


def fps(start: int, count: int, salt: bytes = b"seen") -> list[bytes]:
    """Deterministic 20-byte fingerprints, like Scrapy's (SHA-1)."""
    return [hashlib.sha1(salt + i.to_bytes(8, "big")).digest() for i in range(start, start + count)]


def measured_rate(backend, count: int = 100_000) -> float:
    unseen = fps(0, count, salt=b"never")
    return sum(fp in backend for fp in unseen) / count


# -- backends ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(BACKENDS))
@pytest.mark.parametrize("capacity", [0, 1000])
def test_a_backend_knows_what_was_added_and_counts_each_once(name: str, capacity: int) -> None:
    backend = make_backend(name, 0.001, capacity)
    added = fps(0, 500)
    assert [backend.add(fp) for fp in added] == [False] * 500
    assert [backend.add(fp) for fp in added[:100]] == [True] * 100
    assert all(fp in backend for fp in added)
    assert len(backend) == 500
    assert sum(fp in backend for fp in fps(0, 2000, salt=b"other")) <= 10  # 0.1% of 2000 is 2
    assert backend.name == name


@pytest.mark.parametrize("name", sorted(BACKENDS))
@pytest.mark.parametrize("capacity", [0, 3000])
def test_a_saved_filter_loads_with_the_same_answers(name: str, capacity: int, tmp_path: Path) -> None:
    backend = make_backend(name, 0.002, capacity)
    added = fps(0, 5000)  # past the fixed capacity: the chained layers are saved too
    for fp in added:
        backend.add(fp)
    path = tmp_path / f"seen.{name}"
    size = dump(backend, path)
    assert path.stat().st_size == size and path.read_bytes().startswith(MAGIC)
    assert not list(tmp_path.glob(".*.tmp"))  # the temporary file was renamed into place
    again = load(path, name)
    probe = fps(0, 5000, salt=b"probe")
    assert all(fp in again for fp in added)
    assert [fp in again for fp in probe] == [fp in backend for fp in probe]
    assert len(again) == len(backend) >= 4980  # an add that is a false positive is not counted
    assert again.capacity == backend.capacity
    assert again.estimated_error_rate() == pytest.approx(backend.estimated_error_rate())
    assert (again.error_rate, again.configured_capacity) == (0.002, capacity)
    assert again.add(fps(9999, 1)[0]) is False and len(again) == len(backend) + 1


@pytest.mark.parametrize("name", BLOOMS)
def test_a_full_fixed_filter_keeps_working_and_warns_once(name: str) -> None:
    warnings: list[str] = []
    backend = make_backend(name, 0.001, 2000, warnings.append)
    added = fps(0, 20_000)  # ten times its capacity
    for fp in added:
        assert backend.add(fp) is False or fp in backend
    assert len(warnings) == 1 and "full (2000 fingerprints)" in warnings[0]
    assert all(fp in backend for fp in added)
    assert len(backend) >= 19_950  # an add that is a false positive (~0.1%) is not counted
    assert backend.capacity > 20_000
    rate = measured_rate(backend)
    assert rate <= 2 * 0.001, rate


@pytest.mark.parametrize("name", BLOOMS)
@pytest.mark.parametrize("capacity", [0, 100_000])
def test_the_false_positive_rate_on_100000_unseen_fingerprints_is_within_2x(name: str, capacity: int) -> None:
    configured = 0.001
    backend = make_backend(name, configured, capacity)
    count = capacity or INITIAL_CAPACITY + 50_000  # a fixed filter at capacity; a scalable one over two layers
    for fp in fps(0, count):
        backend.add(fp)
    rate = measured_rate(backend)
    assert rate <= 2 * configured, rate
    if capacity:  # a full fixed filter is at its configured rate, not far below
        assert rate >= configured / 2, rate
    # the estimate behind the stat idcrawl/dupefilter/error_rate tracks the measurement
    estimate = backend.estimated_error_rate()
    assert estimate / 2 <= rate <= estimate * 2, (rate, estimate)


def test_the_exact_backend_has_no_false_positives() -> None:
    backend = ExactSeen()
    for fp in fps(0, 10_000):
        backend.add(fp)
    assert measured_rate(backend, 10_000) == 0.0
    assert backend.estimated_error_rate() == 0.0 and backend.capacity == 0


def test_rbloom_hashes_fingerprints_the_same_in_every_process() -> None:
    fp = bytes(range(20))
    assert stable_hash(fp) == int.from_bytes(fp[:16], "big", signed=True)
    assert -(2**127) <= stable_hash(b"\xff" * 20) < 2**127
    # a short fingerprint (a custom fingerprinter) is hashed first, not zero-padded
    assert stable_hash(b"a") != stable_hash(b"b") and stable_hash(b"a") == stable_hash(b"a")


@pytest.mark.parametrize(
    ("name", "error_rate", "capacity", "field"),
    [("bloom", 0.001, 0, "backend"), ("pybloom", 0.0, 0, "error_rate"), ("rbloom", 1.5, 0, "error_rate"),
     ("set", 0.001, -1, "capacity")],
)
def test_bad_parameters_are_refused_by_name(name: str, error_rate: float, capacity: int, field: str) -> None:
    with pytest.raises(SeenConfigError) as info:
        make_backend(name, error_rate, capacity)
    assert info.value.field == field


# -- files that cannot be used --------------------------------------------------------------


def saved(tmp_path: Path, name: str = "pybloom") -> Path:
    backend = make_backend(name, 0.001, 0)
    for fp in fps(0, 300):
        backend.add(fp)
    path = tmp_path / f"seen.{name}"
    dump(backend, path)
    return path


def flip_last_byte(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 0x01])


def other_format(data: bytes) -> bytes:
    end = data.index(b"\n", len(MAGIC))
    header = json.loads(data[len(MAGIC) : end])
    return MAGIC + json.dumps({**header, "format": 99}).encode() + data[end:]


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (flip_last_byte, "does not match its checksum"),
        (lambda data: data[: len(data) // 2], "truncated"),
        (lambda data: b"SQLite format 3\x00" + data[16:], "not an idcrawl dupefilter file"),
        (lambda data: data[: len(MAGIC) + 5], "corrupt header"),
        (other_format, "file format 99"),
    ],
    ids=["bit-flip", "truncated", "foreign", "header", "newer"],
)
def test_a_damaged_file_is_refused_and_left_byte_identical(tmp_path: Path, damage, reason: str) -> None:
    path = saved(tmp_path)
    path.write_bytes(damage(path.read_bytes()))
    before = path.read_bytes()
    with pytest.raises(SeenFileError) as info:
        load(path, "pybloom")
    assert reason in str(info.value) and str(path) in str(info.value)
    assert path.read_bytes() == before


def test_a_file_of_another_backend_is_refused(tmp_path: Path) -> None:
    path = saved(tmp_path, "rbloom")
    with pytest.raises(SeenFileError, match=r"holds a 'rbloom' filter, not 'pybloom'"):
        load(path, "pybloom")


def test_a_file_from_another_major_version_of_its_library_is_refused(tmp_path: Path) -> None:
    path = saved(tmp_path, "rbloom")
    data = path.read_bytes()
    assert f'"library": "rbloom {LIBRARY_VERSIONS["rbloom"]}"'.encode() in data
    path.write_bytes(data.replace(f'"rbloom {LIBRARY_VERSIONS["rbloom"]}"'.encode(), b'"rbloom 0.9.1"'))
    with pytest.raises(SeenFileError, match=r"written with rbloom 0.9.1, this is rbloom .* may hash differently"):
        load(path, "rbloom")


# -- the crawl's rule: pending until fetched --------------------------------------------------


def test_only_fingerprints_that_got_a_response_are_saved(tmp_path: Path) -> None:
    seen = Seen(PyBloomSeen())
    a, b, c = fps(0, 3)
    assert seen.seen_or_add(a) is False and seen.seen_or_add(a) is True  # seen this run, not fetched
    seen.add(b)
    assert seen.seen_or_add(b) is True
    seen.fetched(a)
    assert a in seen and a in seen.backend and not seen.is_pending(a)
    assert seen.pending == {b} and c not in seen
    dump(seen.backend, tmp_path / "f")
    again = Seen(load(tmp_path / "f", "pybloom"))
    assert again.seen_or_add(a) is True
    assert again.seen_or_add(b) is False  # scheduled, never answered: a later run fetches it


def test_rbloom_layers_are_chained_and_counted() -> None:
    backend = RBloomSeen(0.01, 0)
    for fp in fps(0, INITIAL_CAPACITY + 5000):
        backend.add(fp)
    assert backend.capacity == INITIAL_CAPACITY * 5  # 100,000 + 400,000
    assert INITIAL_CAPACITY < len(backend) <= INITIAL_CAPACITY + 5000


# -- where the file lives ------------------------------------------------------------------------


def test_the_filter_file_sits_in_jobdir_or_beside_the_state_file() -> None:
    assert seen_path({"IDCRAWL_DUPEFILTER_PATH": "/x/f"}, "idseq", "pybloom") == Path("/x/f")
    assert seen_path({"JOBDIR": "jobs/1", "IDCRAWL_STATE_PATH": "/s/a.sqlite"}, "idseq", "rbloom") == Path(
        "jobs/1/idcrawl-seen.rbloom"
    )
    assert seen_path({"IDCRAWL_STATE_PATH": "/s/a.sqlite"}, "idseq", "set") == Path("/s/a-seen.set")
    assert seen_path({}, "demo", "pybloom") == Path(".scrapy/idcrawl/demo-seen.pybloom")


def test_targets_of_one_template_share_its_print(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Targets that split one template's ids probe it once (each print costs 28 of Scrapy's fingerprints)."""
    from types import SimpleNamespace

    from scrapy import Request
    from scrapy.utils.request import RequestFingerprinter
    from scrapy.utils.test import get_crawler

    import idcrawl.dupefilters as dupefilters
    from idcrawl.runtime import META_KEY

    one, other = "http://a.example/notice/{id}", "http://b.example/n?id={id}"
    targets = {"t1": SimpleNamespace(url=one), "t2": SimpleNamespace(url=one), "t3": SimpleNamespace(url=other)}
    crawler = get_crawler(settings_dict={"IDCRAWL_DUPEFILTER_PERSIST": False})
    monkeypatch.setattr(dupefilters, "runtime_of", lambda _: SimpleNamespace(frontier=SimpleNamespace(targets=targets)))
    probed: list[str] = []
    real = dupefilters.template_print

    def counting(template: str, fingerprint):  # type: ignore[no-untyped-def]
        probed.append(template)
        return real(template, fingerprint)

    monkeypatch.setattr(dupefilters, "template_print", counting)
    df = dupefilters.IdDupeFilter.from_crawler(crawler)
    scrapys = RequestFingerprinter(crawler)
    for name, id_ in [("t1", 1), ("t2", 2), ("t3", 3), ("t1", 4), ("t2", 1)]:
        url = targets[name].url.format(id=id_)
        request = Request(url, meta={META_KEY: {"target": name, "lane": f"{name}:asc", "id": id_}})
        assert df._fingerprint(request) == scrapys.fingerprint(Request(url))
    assert probed == [one, other]
