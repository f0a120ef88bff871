"""A big job file read a chunk of ``[[targets]]`` tables at a time is the file read whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from idcrawl.core import jobfile
from idcrawl.core.inputs import TargetError
from idcrawl.core.jobfile import JobFile, read_job

HEAD = '''profile = "polite"
warc_dir = "warcs"

[defaults]
margin = 7
attempts = 2

[[collections]]
name = "news"

[[crawl_profiles]]
name = "links"
collection = "news"
max_hops = 1
'''


def _targets(count: int, *, first: int = 0) -> str:
    tables = []
    for i in range(first, first + count):
        extra = 'crawl_profiles = ["links"]\n' if i % 3 == 0 else ("enabled = false\n" if i % 5 == 0 else "")
        extra += 'direction = "both"\n' if i % 4 == 0 else ""
        tables.append(f'[[targets]]\nname = "t{i}"\nurl = "https://h{i % 7}.example/{i}/{{id}}"\n'
                      f"start = {100 + i}\n{extra}\n")
    return "".join(tables)


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jobfile, "_CHUNK", 3)


def _whole(path: Path, monkeypatch: pytest.MonkeyPatch, defaults: dict[str, int] | None = None,
           max_targets: int = 0) -> JobFile:
    with monkeypatch.context() as patch:
        patch.setattr(jobfile, "_read_streamed", lambda *args: None)
        return read_job(path, defaults, max_targets=max_targets)


def _error(read: object) -> str:
    with pytest.raises(TargetError) as info:
        read()  # type: ignore[operator]
    return str(info.value)


def test_a_big_file_of_id_targets_is_read_a_chunk_at_a_time_as_whole(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "job.toml"
    path.write_text(HEAD + "\n" + _targets(20).replace('[[targets]]\nname = "t5"', '[[ targets ]] # five\nname = "t5"'))
    text = path.read_text()
    streamed = jobfile._read_streamed(text, path, None, f"job file {str(path)!r}")
    assert streamed is not None
    assert read_job(path) == streamed == _whole(path, monkeypatch)
    assert [t.name for t in streamed.targets] == [f"t{i}" for i in range(20)]
    assert streamed.targets[0].margin == 7 and streamed.profile == "polite" and streamed.warc_dir == "warcs"
    with_defaults = read_job(path, {"window": 3})
    assert with_defaults == _whole(path, monkeypatch, {"window": 3})
    assert with_defaults.targets[1].window == 3


@pytest.mark.parametrize("text", [
    # a page target among them
    HEAD + _targets(8) + '[[targets]]\nname = "page"\nurl = "https://page.example/"\n\n' + _targets(4, first=8),
    # an id target's sitemaps
    HEAD + _targets(8) + '[[targets]]\nname = "s"\nurl = "https://s.example/{id}"\nsitemaps = ["https://s.example/sm.xml"]\n'
    + _targets(4, first=8),
    # a table after the targets
    _targets(9) + '[[crawl_profiles]]\nname = "links"\nmax_hops = 1\n',
    # a line like a header inside a multi-line string
    HEAD + _targets(4) + '[[targets]]\nname = "m"\nurl = "https://m.example/{id}"\nnote = """\n[[targets]]\n"""\n'
    + _targets(6, first=4),
], ids=["page", "sitemaps", "table-after", "multiline-string"])
def test_files_the_chunks_cannot_read_alone_are_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           text: str) -> None:
    path = tmp_path / "job.toml"
    path.write_text(text)
    assert jobfile._read_streamed(text, path, None, "job") is None
    try:
        whole = _whole(path, monkeypatch)
    except TargetError as exc:
        assert _error(lambda: read_job(path)) == str(exc)
    else:
        assert read_job(path) == whole


@pytest.mark.parametrize(("tail", "max_targets"), [
    ('[[targets]]\nname = "t2"\nurl = "https://x.example/{id}"\n', 0),  # a name used twice
    ('[[targets]]\nname = "bad"\nurl = "https://x.example/{id}"\nmargin = -1\n', 0),  # a bad value
    ('[[targets]]\nname = "syntax"\nurl = "https://x.example/{id}\n', 0),  # not TOML
    ('[[targets]]\nname = "p"\nurl = "https://x.example/{id}"\ncrawl_profiles = ["nope"]\n', 0),  # unknown profile
    ('[["targets"]]\nname = "q1"\nurl = "https://q.example/1/{id}"\n'
     '[["targets"]]\nname = "q2"\nurl = "https://q.example/2/{id}"\n', 15),  # more than max_targets, counted parsed
], ids=["duplicate", "bad-value", "toml", "profile", "max-targets"])
def test_an_error_anywhere_says_what_a_whole_read_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tail: str,
                                                        max_targets: int) -> None:
    path = tmp_path / "job.toml"
    path.write_text(HEAD + _targets(12) + tail + _targets(3, first=12))
    expected = _error(lambda: _whole(path, monkeypatch, max_targets=max_targets))
    assert _error(lambda: read_job(path, max_targets=max_targets)) == expected
