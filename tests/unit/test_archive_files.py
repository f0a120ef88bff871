"""idcrawl.archive.files: rotation by size, names unique per process, a warcinfo record per file, the
repair of a cut last record (and not of a file a live process holds), the CDXJ index beside a file."""

from __future__ import annotations

import fcntl
import random
from io import BytesIO
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders

from idcrawl.archive import files as files_module
from idcrawl.archive.files import OPEN_SUFFIX, WarcFiles, complete_prefix, repair_folder

INFO = {"software": "idcrawl/test", "isPartOf": "job", "profile": "survey"}


def response(files: WarcFiles, n: int, size: int = 2000) -> object:
    body = random.Random(n).randbytes(size)  # seeded; incompressible: the file grows by about size
    http = StatusAndHeaders("200 OK", [("Content-Type", "application/octet-stream")], protocol="HTTP/1.1")
    return files.current().create_warc_record(f"http://example.test/{n}", "response", payload=BytesIO(body),
                                              length=len(body), http_headers=http)


def read(path: Path) -> list[tuple[str, str | None]]:
    with open(path, "rb") as file:
        return [(r.rec_type, r.rec_headers.get_header("WARC-Target-URI"))
                for r in ArchiveIterator(file, check_digests="raise")]


def test_files_rotate_by_size_each_with_its_warcinfo_and_index(tmp_path: Path) -> None:
    files = WarcFiles(tmp_path, "job", INFO, max_size=10_000)
    assert files.open() == []
    for n in range(12):
        files.write(response(files, n))
    files.close()
    names = sorted(p.name for p in tmp_path.glob("*.warc.gz"))
    assert len(names) >= 2 and len(set(names)) == len(names) and names == sorted(p.name for p in files.finished)
    uris = []
    for name in names:
        records = read(tmp_path / name)
        assert records[0][0] == "warcinfo"
        uris += [uri for kind, uri in records[1:]]
        cdxj = (tmp_path / (name + ".cdxj")).read_text().splitlines()
        assert len(cdxj) == len(records) - 1 and all(name in line for line in cdxj)
    assert uris == [f"http://example.test/{n}" for n in range(12)]
    assert not list(tmp_path.glob(f"*{OPEN_SUFFIX}"))
    with open(tmp_path / names[0], "rb") as file:
        info = next(iter(ArchiveIterator(file))).content_stream().read()
    assert b"isPartOf: job" in info and b"profile: survey" in info


def test_two_writers_of_one_job_never_share_a_name(tmp_path: Path) -> None:
    one, two = WarcFiles(tmp_path, "job", INFO), WarcFiles(tmp_path, "job", INFO)
    two.stamp = one.stamp  # the same microsecond in one process (two watch waves): the pid is the same too
    one.write(response(one, 1))
    one.finish()
    two.write(response(two, 2))
    one.write(response(one, 3))
    two.close()
    one.close()
    names = sorted(p.name for p in tmp_path.glob("job-*.warc.gz"))
    assert len(names) == 3 and [int(n.split("-")[-1].split(".")[0]) for n in names] == [1, 2, 3]


def test_a_cut_last_record_is_truncated_and_a_held_file_left_alone(tmp_path: Path) -> None:
    files = WarcFiles(tmp_path, "job", INFO)
    for n in range(3):
        files.write(response(files, n))
    files.flush()
    path = files.path
    assert path is not None and path.name.endswith(OPEN_SUFFIX)
    whole = path.stat().st_size
    assert repair_folder(tmp_path, "job") == []  # this process holds it (flock): not repaired
    # a kill: the lock goes with the process; the last record was cut short
    assert files.file is not None
    files.file.write(b"\x1f\x8b\x08\x00" + random.Random(5).randbytes(300))
    files.file.flush()
    fcntl.flock(files.file.fileno(), fcntl.LOCK_UN)
    assert complete_prefix(path) == whole
    [(final, cut)] = repair_folder(tmp_path, "job")
    assert cut == 304 and final.stat().st_size == whole and final.name == path.name.removesuffix(OPEN_SUFFIX)
    assert [uri for _, uri in read(final)[1:]] == [f"http://example.test/{n}" for n in range(3)]
    assert (tmp_path / (final.name + ".cdxj")).exists()
    files.file.close()


def test_other_jobs_files_are_not_repaired(tmp_path: Path) -> None:
    (tmp_path / f"other-1-h-1-00001.warc.gz{OPEN_SUFFIX}").write_bytes(b"\x1f\x8b")
    assert repair_folder(tmp_path, "job") == []
    assert (tmp_path / f"other-1-h-1-00001.warc.gz{OPEN_SUFFIX}").exists()


def test_a_job_files_warc_dir_must_be_a_path(tmp_path: Path) -> None:
    import pytest

    from idcrawl.core.inputs import TargetError
    from idcrawl.core.jobfile import read_job

    job = tmp_path / "job.toml"
    job.write_text('warc_dir = "w"\n[[targets]]\nname = "a"\nurl = "http://a.test/{id}"\nstart = 1\n')
    assert read_job(job).warc_dir == "w"
    job.write_text('warc_dir = 3\n[[targets]]\nname = "a"\nurl = "http://a.test/{id}"\nstart = 1\n')
    with pytest.raises(TargetError, match="warc_dir"):
        read_job(job)


def test_the_index_lists_the_same_records_after_py_wacz_was_imported(tmp_path: Path) -> None:
    """py-wacz appends warcinfo to cdxj-indexer's default record types when imported (``scrapy idwacz``,
    the tests): the index names its record types, so it lists the same records in any process."""
    pytest.importorskip("wacz.waczindexer")
    files = WarcFiles(tmp_path, "job", INFO, max_size=0)
    assert files.open() == []
    files.write(response(files, 0))
    files.close()
    (name,) = (p.name for p in tmp_path.glob("*.warc.gz"))
    cdxj = (tmp_path / (name + ".cdxj")).read_text().splitlines()
    assert len(cdxj) == 1 and "http://example.test/0" in cdxj[0]


def test_a_rotation_does_not_wait_for_the_index_and_close_does(tmp_path: Path, monkeypatch) -> None:
    """The CDXJ index of a file finished at a rotation is made by another thread: the writer goes on
    while it is made; ``close`` returns once every finished file has its index."""
    import threading

    real = files_module.write_index
    go = threading.Event()
    indexing: list[str] = []

    def held_index(warc: Path) -> Path:
        indexing.append(threading.current_thread().name)
        go.wait(30)  # on the writer's own thread this would hold the crawl (the test then fails below)
        return real(warc)

    monkeypatch.setattr(files_module, "write_index", held_index)
    files = WarcFiles(tmp_path, "job", INFO, max_size=5_000)
    assert files.open() == []
    for n in range(8):
        files.write(response(files, n))
    finished = list(files.finished)
    assert len(finished) >= 2
    assert not any(path.with_name(path.name + ".cdxj").exists() for path in finished)  # held, and not waited for
    go.set()
    files.close()
    assert indexing and threading.current_thread().name not in indexing
    for path in files.finished:
        cdxj = path.with_name(path.name + ".cdxj").read_text().splitlines()
        assert cdxj and all(path.name in line for line in cdxj)
    assert not list(tmp_path.glob("*.tmp"))


def test_a_finished_file_without_its_index_is_indexed_by_the_next_open(tmp_path: Path) -> None:
    files = WarcFiles(tmp_path, "job", INFO)
    files.write(response(files, 1))
    files.close()
    [path] = files.finished
    index = path.with_name(path.name + ".cdxj")
    expected = index.read_text()
    index.unlink()  # killed while its indexing thread worked
    assert WarcFiles(tmp_path, "job", INFO).open() == []
    assert index.read_text() == expected
