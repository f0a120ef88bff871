"""Property, end to end: a few generated spider arguments, settings values and job files as real
``scrapy crawl`` subprocesses (the in-process properties: tests/unit/test_input_property.py).

Refused inputs send no request and change nothing on disk, accepted ones crawl without an error or a traceback;
the verdict expected of each comes from the in-process oracle.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from idcrawl.demo.site import DemoModel, IdSite
from tests.support.crawl import run_crawl
from tests.support.states import snapshot
from tests.unit.test_input_property import _HUGE, _JUNK, _arguments, _job_bytes, _settings_values, _toml_value, verdict


@pytest.fixture(scope="module")
def site() -> Iterator[IdSite]:
    with IdSite(DemoModel(low=0, high=40, gap_percent=10, max_gap=2)) as live:
        yield live


#: Settings whose valid values keep a 40-id crawl short (no delays, no Redis, no limits).
_E2E_SETTINGS = ["IDCRAWL_WINDOW", "IDCRAWL_MARGIN", "IDCRAWL_STATE_COMMIT_ITEMS", "IDCRAWL_STATE",
                 "IDCRAWL_MISSING_STATUSES", "IDCRAWL_DUPEFILTER_BACKEND", "IDCRAWL_CONTENT_DUPLICATES",
                 "IDCRAWL_MAX_TARGETS"]


@st.composite
def _e2e_inputs(draw: st.DrawFn, template: str) -> tuple[dict[str, str], dict[str, str], bytes | None]:
    """Half the examples start from a valid input (then maybe spoil one value), half are free-form."""
    if draw(st.booleans()):
        base = template.removesuffix("{id}")
        arguments = {
            "url": draw(st.sampled_from([template, f"{base}{{id:03d}}", f"{base}{{id:d}}"])),
            "start": str(draw(st.integers(0, 60))),
            "margin": str(draw(st.integers(1, 12))),
            "direction": draw(st.sampled_from(["asc", "desc", "both"])),
        }
        values = draw(st.sampled_from([{}, {"IDCRAWL_WINDOW": "8"}, {"IDCRAWL_STATE_COMMIT_ITEMS": "1"}]))
        spoil = draw(st.sampled_from(["", "start", "margin", "setting", "job"]))
        if spoil in ("start", "margin"):
            arguments[spoil] = draw(st.one_of(_HUGE.map(str), _JUNK))
        elif spoil == "setting":
            values = draw(_settings_values(_E2E_SETTINGS))
        elif spoil == "job":
            lines = "".join(f"{k} = {_toml_value(int(v) if v.isdigit() else v)}\n" for k, v in arguments.items())
            data = f"[[targets]]\n{lines}".encode()
            at = draw(st.integers(0, len(data)))
            return {}, values, data[:at] + draw(st.sampled_from([b"", b"\xff", b"\xe9"])) + data[at:]
        return arguments, values, None
    values = draw(_settings_values(_E2E_SETTINGS))
    if draw(st.booleans()):
        return {}, values, draw(_job_bytes(template).filter(lambda b: b"margin = -1" not in b))
    return draw(_arguments(template, small=True)), values, None


@settings(max_examples=8, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_generated_inputs_end_to_end(site: IdSite, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject,
                                     ) -> None:
    arguments, values, job_bytes = data.draw(_e2e_inputs(site.url()))
    workdir = tmp_path_factory.mktemp("e2e")
    job = None
    if job_bytes is not None:
        job = workdir / "job.toml"
        job.write_bytes(job_bytes)
    expected = verdict(arguments, values, job)
    event("accepted" if expected is None else "refused")
    before = snapshot(workdir)
    site.log.clear()
    args = {"job": job} if job is not None else arguments
    result = run_crawl(workdir, args, values, timeout=120)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    if expected is None:
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.error_lines() == [], result.stderr[-3000:]
    else:
        assert result.returncode != 0
        errors = result.error_lines()
        assert len(errors) == 1, result.stderr[-3000:]
        assert expected in errors[0] or expected.split(": ", 1)[-1] in errors[0], (expected, errors[0])
        assert site.log == []
        assert snapshot(workdir) == before
