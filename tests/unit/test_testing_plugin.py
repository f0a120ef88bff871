"""idcrawl's pytest plugin (idcrawl/testing.py): loaded once, through its entry point; inert until its fixture
is used; under ``CI`` a missing cassette fails the test and nothing reaches the network."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import idcrawl.testing

USER_TEST = '''
from idcrawl.spiders.demo import DemoSpider


def test_notice(recorded_crawl):
    assert recorded_crawl(DemoSpider, url="{url}", start=1).outcome(1) == "found"
'''


def test_the_plugin_is_loaded_once_through_its_entry_point(pytestconfig: pytest.Config) -> None:
    plugins = [plugin for plugin in pytestconfig.pluginmanager.get_plugins() if plugin is idcrawl.testing]
    assert plugins == [idcrawl.testing]
    assert pytestconfig.pluginmanager.get_plugin("idcrawl") is idcrawl.testing  # the pytest11 entry point's name


def test_the_plugin_has_one_hook_and_imports_nothing_until_its_fixture_is_used() -> None:
    assert [name for name in vars(idcrawl.testing) if name.startswith("pytest_")] == ["pytest_configure"]
    heavy = ("scrapy", "vcr", "requests", "scrapy_mock", "idcrawl.recorded")
    proc = subprocess.run(
        [sys.executable, "-c", f"import sys, idcrawl.testing; print([m for m in {heavy!r} if m in sys.modules])"],
        capture_output=True, text=True, timeout=120, check=True,
    )
    assert proc.stdout.strip() == "[]"


def run_user_suite(folder: Path, url: str, *options: str, ci: bool = True) -> subprocess.CompletedProcess[str]:
    """A user's project in ``folder`` with one recorded-page test and no cassette, its pytest run."""
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "tests").mkdir(exist_ok=True)
    (folder / "tests" / "test_site.py").write_text(USER_TEST.format(url=url))
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options, "tests"],
        cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False,
    )


def test_under_ci_a_missing_cassette_fails_the_test_and_reaches_no_network(tmp_path: Path) -> None:
    with socket.socket() as listener:  # a connection attempt would wait in its backlog: nothing answers it
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/notice/{{id}}"
        proc = run_user_suite(tmp_path, url)
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # no connection came
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "1 failed" in proc.stdout
    assert "CannotOverwriteExistingCassetteException" in proc.stdout
    assert "record it outside CI: docs/testing.md" in proc.stdout
    assert not list(tmp_path.rglob("*.yaml"))  # nothing recorded


def test_without_scrapy_mocks_plugin_the_fixture_says_what_to_install(tmp_path: Path) -> None:
    proc = run_user_suite(tmp_path, "http://127.0.0.1:9/notice/{id}", "-p", "no:scrapy-mock")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "pip install 'idcrawl[testing]'" in proc.stdout


def test_a_test_that_fetches_nothing_writes_no_cassette(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_nothing.py").write_text(
        "from idcrawl.spiders.demo import DemoSpider\n\n\n"
        "def test_made_only(recorded_crawl):\n"
        "    assert recorded_crawl(DemoSpider, url='http://127.0.0.1:9/n/{id}', start=1).target().start == 1\n"
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path, env={k: v for k, v in os.environ.items() if k != "CI"},
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert not list(tmp_path.rglob("*.yaml"))


def test_cassettes_are_named_by_module_and_test_under_the_rootdir(
    request: pytest.FixtureRequest, pytestconfig: pytest.Config
) -> None:
    path = idcrawl.testing.cassette_path(request, "tests/fixtures/cassettes")
    assert path == (pytestconfig.rootpath / "tests/fixtures/cassettes/test_testing_plugin"
                    / "test_cassettes_are_named_by_module_and_test_under_the_rootdir.yaml")


def test_the_docs_example_is_the_test_file_the_suite_runs() -> None:
    repo = Path(__file__).resolve().parents[2]
    doc = (repo / "docs" / "testing.md").read_text(encoding="utf-8")
    includes = [line.split()[-1] for line in doc.splitlines() if line.startswith("```{literalinclude}")]
    assert [(repo / "docs" / path).resolve() for path in includes] == [repo / "tests/unit/test_example_site_spider.py"]


def test_a_recorded_crawl_is_made_as_a_crawl_and_lets_its_crawler_go_when_closed() -> None:
    from idcrawl.recorded import RecordedCrawl
    from idcrawl.runtime import runtime_of
    from idcrawl.spiders.demo import DemoSpider

    with RecordedCrawl(DemoSpider, url="http://127.0.0.1:9/n/{id}", start=5, margin=2, name="t",
                       settings={"IDCRAWL_MISSING_STATUSES": [404, 410]}) as crawl:
        assert runtime_of(crawl.crawler) is crawl.runtime
        target = crawl.target()
        assert (target.name, target.start, target.margin) == ("t", 5, 2)
        assert target.rule.missing_statuses == frozenset({404, 410})
        assert crawl.crawler.settings.getbool("IDCRAWL_STATE") is False  # no state file read or written
        request = crawl.request(7)
        assert request.url == "http://127.0.0.1:9/n/7"
        assert request.meta["idcrawl"] == {"lane": "t:asc", "id": 7, "target": "t", "attempt": 1}
        with pytest.raises(ValueError, match="target='u': no such target"):
            crawl.target("u")
    assert runtime_of(crawl.crawler) is None


def test_a_job_files_targets_are_chosen_by_name(tmp_path: Path) -> None:
    from idcrawl.recorded import RecordedCrawl
    from idcrawl.spiders.demo import DemoSpider

    job = tmp_path / "job.toml"
    job.write_text('[[targets]]\nname = "a"\nurl = "http://a.test/{id}"\nstart = 1\n\n'
                   '[[targets]]\nname = "b"\nurl = "http://b.test/{id}"\nstart = 1\nfound_css = "h1"\n')
    with RecordedCrawl(DemoSpider, job=job) as crawl:
        assert sorted(crawl.targets) == ["a", "b"]
        assert crawl.request(3, "b").url == "http://b.test/3"
        with pytest.raises(ValueError, match="this crawl has 2 targets"):
            crawl.request(3)


def test_a_recording_engine_keeps_the_crawls_downloader_middlewares_and_writes_next_to_the_handler() -> None:
    from scrapy.utils.conf import build_component_list
    from scrapy.utils.misc import load_object
    from scrapy.utils.test import get_crawler

    from idcrawl.recording import CassetteMiddleware, skipped
    from idcrawl.spiders.demo import DemoSpider

    addons = {"ADDONS": {"idcrawl.addon.IdCrawl": 0, "idcrawl.recording.RecordingAddon": 10**6}}
    crawler = get_crawler(DemoSpider, addons)
    crawl = get_crawler(DemoSpider, {"ADDONS": {"idcrawl.addon.IdCrawl": 0}})
    recording = [load_object(path) for path in build_component_list(crawler.settings.getwithbase("DOWNLOADER_MIDDLEWARES"))]
    crawling = [load_object(path) for path in build_component_list(crawl.settings.getwithbase("DOWNLOADER_MIDDLEWARES"))]
    assert recording[-1] is CassetteMiddleware  # after every other one: what the download handler received
    assert recording[:-1] == [cls for cls in crawling if not skipped(cls)]  # the crawl's own, in its order
    names = {f"{cls.__module__}.{cls.__name__}" for cls in recording}
    assert {"scrapy.downloadermiddlewares.redirect.RedirectMiddleware",
            "scrapy.downloadermiddlewares.retry.RetryMiddleware",
            "scrapy.downloadermiddlewares.useragent.UserAgentMiddleware",
            "scrapy.downloadermiddlewares.cookies.CookiesMiddleware"} <= names
    assert not any(name.startswith("idcrawl.") for name in names - {"idcrawl.recording.CassetteMiddleware"}
                   if "metarefresh" not in name)  # idcrawl's state-keeping ones are left out
    assert crawler.settings["SCHEDULER"] == "scrapy.core.scheduler.Scheduler"
    assert crawler.settings["DUPEFILTER_CLASS"] == "scrapy.dupefilters.BaseDupeFilter"
