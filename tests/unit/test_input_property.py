"""Property: any spider arguments, settings values and job file bytes give a clean run or one error line.

In process, with many generated examples, against the single entry points every input path goes
through (``validate_settings``, ``IdSeqSpider.targets_from_arguments``, ``parse_job``). A few
generated examples end to end, as real ``scrapy crawl`` subprocesses (refused inputs send no
request and change nothing on disk, accepted ones crawl without an error or a traceback):
tests/crawl/test_input_property_crawl.py, with :func:`verdict` here as the oracle.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyroaring import BitMap64
from scrapy.settings import Settings

from idcrawl.core.inputs import TargetError
from idcrawl.core.jobfile import parse_job
from idcrawl.core.lanes import MAX_ID
from idcrawl.core.setting_specs import SPECS
from idcrawl.core.targets import Target
from idcrawl.errors import BadInputError
from idcrawl.spiders.idseq import IdSeqSpider
from idcrawl.validation import validate_settings

HOST_URL = "http://127.0.0.1:1/notice/{id}"  # in process only: nothing is fetched

# -- strategies --------------------------------------------------------------------------

_HUGE = st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, 2**64 + 1, 10**30, -(2**64), -1, 0])
_NUMBER_TEXT = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    _HUGE.map(str),
    st.sampled_from(["", " ", "1e3", "0x10", "1_000", "-0", "nan", "inf", "3.5", "١٢", "10**30", "2**64"]),
)
_JUNK = st.text(max_size=16)


def _urls(template: str) -> st.SearchStrategy[str]:
    base = template.removesuffix("{id}")
    return st.one_of(
        st.just(template),
        st.sampled_from([f"{base}{{id:08d}}", f"{base}{{id:x}}", f"{base}{{id:c}}", f"{base}{{id!r}}",
                         f"{base}{{id:,}}", f"{base}{{id:>5000d}}", f"{base}{{}}", f"{base}{{id}}{{id}}",
                         f"{base}{{id:e}}", f"{base}{{id.real}}", base, "ftp://h/{id}", "http:///{id}",
                         "http://[::1/{id}", "http://h:99999/{id}", "http://h:x/{id}", "http://a b/{id}",
                         "http://h..x/{id}"]),
        _JUNK,
    )


def _arguments(template: str, *, small: bool = False) -> st.SearchStrategy[dict[str, str]]:
    """``-a key=value`` strings; ``small`` keeps valid crawls short (margins and windows below 20)."""
    numbers = st.integers(min_value=0, max_value=19).map(str) if small else _NUMBER_TEXT
    values = {
        "url": _urls(template),
        "start": st.one_of(_NUMBER_TEXT, st.integers(min_value=0, max_value=60).map(str)),
        "min": _NUMBER_TEXT,
        "max": _NUMBER_TEXT,
        "direction": st.one_of(st.sampled_from(["asc", "desc", "both", "DESC", " up"]), _JUNK),
        "margin": st.one_of(numbers, _JUNK) if not small else st.one_of(numbers, st.sampled_from(["-1", "x"])),
        "window": st.one_of(numbers, _JUNK) if not small else st.one_of(numbers, st.sampled_from(["0", "w"])),
        "rate": st.one_of(st.sampled_from(["1", "2:3", "0", "1:0"]), _JUNK),
        "attempts": st.one_of(st.sampled_from(["1", "0"]), _JUNK),
        "cooldown": st.one_of(st.sampled_from(["0", "-1", "nan", "inf"]), _JUNK),
        "resume": st.one_of(st.sampled_from(["none", "bound", "all", "holes"]), _JUNK),
        "missing_statuses": st.one_of(st.sampled_from(["404", "404,410", "99", "404,x"]), _JUNK),
        "soft404_probe": st.one_of(_HUGE.map(str), _JUNK),
        "name": st.one_of(st.sampled_from(["site", "a/b", " "]), _JUNK),
    }
    keys = st.sets(st.sampled_from(sorted(values)), max_size=6)
    return keys.flatmap(
        lambda chosen: st.fixed_dictionaries(
            {"url": values["url"], **{k: values[k] for k in chosen if k != "url"}},
            optional={"margn": _JUNK, "sneaky_key": _JUNK} if not small else {},
        )
    )


_SETTING_NAMES = sorted(SPECS)


def _settings_values(names: list[str]) -> st.SearchStrategy[dict[str, str]]:
    value = st.one_of(_JUNK, _NUMBER_TEXT, st.sampled_from(["true", "False", "1", "0", "404,410", "15m", "mark"]))
    return st.dictionaries(st.sampled_from(names), value, max_size=2)


def _toml_value(value: Any) -> str:
    return str(value) if isinstance(value, int) else json.dumps(value)


def _job_bytes(template: str) -> st.SearchStrategy[bytes]:
    def render(targets: list[dict[str, Any]]) -> bytes:
        body = "".join("[[targets]]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in t.items()) + "\n"
                       for t in targets)
        return body.encode("utf-8")

    target = st.fixed_dictionaries(
        {"url": _urls(template)},
        optional={"start": st.one_of(_HUGE, st.integers(0, 60)), "max": _HUGE, "min": _HUGE,
                  "name": st.sampled_from(["a", "b", "a/b"]), "direction": st.sampled_from(["asc", "desc", "both"]),
                  "margin": st.integers(-1, 12), "profile": _JUNK},
    )
    valid_toml = st.lists(target, min_size=0, max_size=3).map(render)

    @st.composite
    def corrupted(draw: st.DrawFn) -> bytes:
        data = draw(valid_toml)
        bad = draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xe9", b"\xed\xa0\x80", b"\x00"]))
        at = draw(st.integers(0, len(data)))
        return data[:at] + bad + data[at:]

    return st.one_of(valid_toml, corrupted(), st.binary(max_size=64))


# -- the oracle: the single validation entry points, in process ------------------------------


def _one_line(error: Exception) -> str:
    text = str(error)
    assert text and "\n" not in text and "Traceback" not in text, repr(text)
    return text


def _check_targets(targets: list[Target]) -> None:
    """What a crawl does with a target later must not fail: render its ids, store them."""
    for target in targets:
        for id_ in {target.start, target.min or 0, target.max if target.max is not None else MAX_ID}:
            assert 0 <= id_ <= MAX_ID
            target.url_for(id_)
            BitMap64([id_])  # the state's bitmaps: OverflowError past 2**64-1


def verdict(arguments: dict[str, str], values: dict[str, str], job: Path | None = None) -> str | None:
    """None if the input is valid, else the one error line (asserted to be one line naming the field)."""
    crawl_settings = Settings(values, priority="cmdline")
    try:
        validate_settings(crawl_settings)
    except BadInputError as exc:
        line = _one_line(exc)
        assert any(f"{name}=" in line for name in values), line
        return line
    spider = IdSeqSpider(**({"job": str(job)} if job is not None else {}), **arguments)
    try:
        targets = spider.targets_from_arguments(crawl_settings)
    except TargetError as exc:
        line = _one_line(exc)
        assert exc.field in line
        return line
    _check_targets(targets)
    return None


# -- in process: many examples --------------------------------------------------------------


@settings(max_examples=500, derandomize=True, deadline=None)
@given(arguments=_arguments(HOST_URL), values=_settings_values(_SETTING_NAMES))
def test_spider_arguments_and_settings_give_targets_or_one_line(arguments: dict, values: dict) -> None:
    verdict(arguments, values)


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_job_bytes(HOST_URL))
def test_job_file_bytes_give_targets_or_one_line(tmp_path: Path, data: bytes) -> None:
    job = tmp_path / "job.toml"
    job.write_bytes(data)
    line = verdict({}, {}, job)
    if line is not None:
        assert "job" in line
    try:  # scrapy idplan --job reads it through the same parser
        parse_job(job)
    except TargetError as exc:
        _one_line(exc)


def test_the_oracle_can_refuse() -> None:
    assert verdict({"url": HOST_URL, "start": str(2**64)}, {}) is not None
    assert verdict({"url": HOST_URL, "start": "3"}, {"IDCRAWL_WINDOW": "abc"}) is not None
    assert verdict({"url": HOST_URL, "start": "3"}, {}) is None
