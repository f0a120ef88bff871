from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from idcrawl.demo.site import DemoModel, IdSite


class GapModel(DemoModel):
    """Ids exist unless listed as gaps, inside [low, high]."""

    def __init__(self, low: int, high: int, gaps: set[int]) -> None:
        super().__init__(low, high)
        self.gaps = gaps

    def exists(self, id_: int) -> bool:
        return self.low <= id_ <= self.high and id_ not in self.gaps


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
    from tests.support.redis_server import RedisServer, in_ci, redis_server_missing

    missing = redis_server_missing()
    if missing is not None:
        if in_ci():
            pytest.fail(f"CI=true but {missing}")
        pytest.skip(missing)
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.stop()
