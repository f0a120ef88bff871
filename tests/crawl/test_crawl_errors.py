"""Bad input: one clear line naming the field and the value, exit non-zero, no request."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.crawl import run_crawl

URL = "{site}"  # replaced by the live site's template

CASES = [
    ({"url": "http://127.0.0.1:{port}/notice/", "start": 5}, "url='http://127.0.0.1:{port}/notice/': must contain exactly one {{id}} field"),
    ({"url": "http://127.0.0.1:{port}/{{id}}/{{id}}", "start": 5}, "must contain exactly one {{id}} field (found: {{id}}, {{id}})"),
    ({"url": "ftp://127.0.0.1:{port}/{{id}}", "start": 5}, "must be an http or https URL"),
    ({"url": URL, "start": "12a"}, "start='12a': must be an integer"),
    ({"url": URL, "start": 5, "min": "x"}, "min='x': must be an integer"),
    ({"url": URL, "start": 5, "min": 10, "max": 3}, "min='10': must be <= max (3)"),
    ({"url": URL, "start": 50, "min": 1, "max": 10}, "start='50': is above max (10)"),
    ({"url": URL, "start": 5, "margin": -1}, "margin='-1': must be an integer >= 0"),
    ({"url": URL, "start": 5, "rate": 0}, "rate='0': must be a positive integer W or ASC:DESC"),
    ({"url": URL, "start": 5, "margin": 0}, "margin='0': 0 (no cut) needs max"),
    ({"url": URL, "start": 5, "direction": "sideways"}, "direction='sideways': must be one of asc, desc, both"),
    ({"url": URL, "start": 5, "margn": 3}, "margn='3': unknown spider argument"),
    ({"url": URL, "start": 5, "attempts": -1}, "attempts='-1': must be an integer >= 1"),
    ({"url": URL, "start": 5, "cooldown": "abc"}, "cooldown='abc': must be a number"),
    ({"url": URL, "start": 5, "backoff": "0.5"}, "backoff='0.5': must be a finite number >= 1"),
]


@pytest.mark.parametrize(("args", "message"), CASES, ids=[c[1][:40] for c in CASES])
def test_bad_argument_is_one_clear_line_and_no_request(make_site, tmp_path: Path, args, message) -> None:
    site = make_site()
    port = site.port
    args = {k: (site.url() if v == URL else str(v).format(port=port)) for k, v in args.items()}
    result = run_crawl(tmp_path, args)
    assert result.returncode != 0
    errors = result.error_lines()
    assert len(errors) == 1, result.stderr[-3000:]
    assert message.format(port=port) in errors[0]
    assert "Traceback" not in result.stderr
    assert site.log == []
    assert result.items == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[[targets]\nurl = 1", "is not valid TOML"),
        ("[[targets]]\nname='a'\nurl='http://127.0.0.1:1/{id}'\nstart=1\nmargin=-2\n", "targets[0]: margin=-2: must be an integer >= 0"),
        (
            "[[targets]]\nname='a'\nurl='http://h/{id}'\nstart=1\n[[targets]]\nname='a'\nurl='http://g/{id}'\nstart=1\n",
            "targets[1]: name='a': is used by targets[0] too",
        ),
        ("targets = 3\n", "targets=3: must be an array of [[targets]] tables"),
    ],
)
def test_broken_job_file_is_refused(make_site, tmp_path: Path, content: str, message: str) -> None:
    site = make_site()
    job = tmp_path / "job.toml"
    job.write_text(content)
    result = run_crawl(tmp_path, {"job": job})
    assert result.returncode != 0
    errors = result.error_lines()
    assert len(errors) == 1 and message in errors[0], result.stderr[-3000:]
    assert site.log == []


def test_missing_job_file_is_refused(tmp_path: Path) -> None:
    result = run_crawl(tmp_path, {"job": tmp_path / "nope.toml"})
    assert result.returncode != 0
    assert "nope.toml': file not found" in result.error_lines()[0]
