"""Shared by the three tiers: the tier markers, the demo site and redis-server fixtures, the WARC check.

The tiers (docs/development.md, "Tests"): ``tests/unit`` starts no server and no crawl (``make test-fast``), ``tests/crawl``
starts real ``scrapy`` processes against local sites, ``tests/integration`` needs other programs
(redis-server, scrapyd, package builds). Each test gets its folder's marker, so ``pytest -m unit``
runs what ``pytest tests/unit`` runs. As a session (each xdist worker's) ends, every ``*.warc.gz`` written
under its temp folders passes ``warcio check`` and an index pass (tests/support/warcs.py), or the session fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from idcrawl.demo.site import DemoModel, IdSite, Reply
from tests.support.redis_cluster import redis_cluster, redis_cluster_nodes  # noqa: F401 - fixtures for every tier

# Every property check draws the same examples on every run (derandomize) and has no per-example time
# limit: a deadline is a timing threshold, which a loaded CI machine trips by chance. A test's own
# @settings inherit these and may only add examples.
settings.register_profile("idcrawl", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("idcrawl")

#: The tier folders of tests/, each also the name of its marker (registered in pyproject.toml).
TIERS = ("unit", "crawl", "integration")
TESTS = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test with its tier (its folder under tests/); a test module outside the tiers is an error."""
    outside: set[str] = set()
    for item in items:
        path = item.path.resolve()
        try:
            folder = path.relative_to(TESTS).parts[0]
        except ValueError:  # not under tests/ (a path given on the command line): no tier to give
            continue
        if folder in TIERS:
            item.add_marker(getattr(pytest.mark, folder))
        else:
            outside.add(str(path.relative_to(TESTS.parent)))
    if outside:
        raise pytest.UsageError(
            f"{', '.join(sorted(outside))}: a test module must be in one tier folder "
            f"(tests/unit, tests/crawl or tests/integration; docs/development.md, \"Tests\")"
        )


@pytest.fixture(scope="session", autouse=True)
def _every_warc_file_the_suite_wrote_is_valid(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """At the session's end: ``warcio check`` and a CDXJ index pass over each ``*.warc.gz`` under the
    session's temp folders (every tmp_path), less the files a test cut on purpose (``allow_broken``)."""
    yield
    base = tmp_path_factory.getbasetemp()
    files = sorted(path for path in base.rglob("*.warc.gz") if path.is_file())
    if not files:
        return
    from tests.support.warcs import check_warc, exempt

    problems = [problem for path in files if not exempt(path) for problem in check_warc(path)]
    if problems:
        pytest.fail(f"{len(problems)} of the {len(files)} WARC files this session wrote are not valid:\n"
                    + "\n".join(problems), pytrace=False)


class GapModel(DemoModel):
    """Ids exist unless listed as gaps, inside [low, high]. The User-Agents that asked for pages are kept:
    workers given their own ``USER_AGENT`` show which of them are crawling (past their start)."""

    def __init__(self, low: int, high: int, gaps: set[int]) -> None:
        super().__init__(low, high)
        self.gaps = gaps
        self.agents: set[str] = set()

    def reply_to(self, id_: int, host: str, nth: int, headers: Mapping[str, str]) -> Reply:
        self.agents.add(headers.get("User-Agent", ""))
        return super().reply_to(id_, host, nth, headers)

    def exists(self, id_: int) -> bool:
        return self.low <= id_ <= self.high and id_ not in self.gaps


class FlakyOnce(GapModel):
    """Ids in ``flaky`` answer 503 until ``healed`` is set (a first run leaves them failed), then
    answer normally; ``pace``: each answer waits a few ms (0-4, by id), so responses cross."""

    def __init__(self, low: int, high: int, gaps: set[int], *, flaky: set[int], pace: bool = False) -> None:
        super().__init__(low, high, gaps)
        self.flaky, self.healed, self.pace = flaky, False, pace

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        if id_ in self.flaky and not self.healed:
            return Reply(503, b"busy")
        reply = super().reply(id_, host, nth)
        if not self.pace:
            return reply
        return Reply(reply.status, reply.body, reply.headers, (id_ * 7919 % 5) / 1000)


@pytest.fixture
def make_site() -> Iterator[Callable[..., IdSite]]:
    sites: list[IdSite] = []

    def factory(model: DemoModel | None = None, **kwargs: object) -> IdSite:
        site = IdSite(model, **kwargs).start()  # type: ignore[arg-type]
        sites.append(site)
        return site

    yield factory
    for site in sites:
        site.stop()


@pytest.fixture
def redis_server() -> Iterator[object]:
    """A private redis-server on a free port of 127.0.0.1 (tests/support/redis_server.py).

    Skipped when redis-server is not installed, except under CI=true: there it fails.
    """
    from tests.support.redis_server import RedisServer, require_redis_server

    require_redis_server()
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.stop()
