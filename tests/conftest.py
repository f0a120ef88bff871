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
