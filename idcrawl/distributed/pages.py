"""Found pages revisited by a distributed job (``resume=due`` for a fleet): page records in the job's keys.

A single process keeps its page records in its state store and writes a changed page's record with its
item (:mod:`idcrawl.state.recorder`). A fleet keeps them in the job's Redis keys, in the layout of the
Redis state store (``P pages:<target>``: hash id -> page record JSON, :mod:`idcrawl.state.redis`), so
``scrapy iddue`` and a single process read them alike. :class:`FleetPageBook` is the
:class:`~idcrawl.core.pagebook.PageBook` of one worker:

- **Loaded per target** when the worker plans or joins a due run of it (:meth:`FleetPageBook.load_job`):
  the validators of a revisit (``If-None-Match``/``If-Modified-Since``) and the base of the rule are
  the records as the job holds them before the run. Each due page is fetched once by the fleet (a
  position of the run's ``<target>:due`` list lane), so the record it starts from is that one.
- **Written once the fetch's outcome is recorded** (:meth:`FleetPageBook.decided`, then
  :meth:`FleetPageBook.flush` at the worker's next poll): by then the id's outcome and its item (a new
  or changed page) are in Redis, which emits the item at least once whatever worker is killed (the emit
  hash, orphans). A worker killed before its outcome was recorded wrote no record: another worker fetches
  the id again from the same stored record, and the rule is applied once. A worker killed after, before
  its poll wrote the record, leaves the page's record as it was: the page stays due, and the next due run
  revisits it and applies the rule once (its item, if the page changed, may then be written twice: the
  fleet's items are at least once). So no duration is updated twice for one fetch, and no item is lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from idcrawl.core.clock import Clock
from idcrawl.core.pagebook import PageBook, PageVisit, schedule_to_json
from idcrawl.core.recrawl import Fetch, Policy, Schedule

__all__ = ["FleetPageBook", "is_due_lane"]


def is_due_lane(lane_key: str, target: str) -> bool:
    """Whether ``lane_key`` is a list lane of found pages due for a revisit (``<target>:due``, then
    ``<target>:due2`` ... for the job's later resumes: ``resume.lua``)."""
    suffix = lane_key[len(target) + 1:] if lane_key.startswith(f"{target}:") else ""
    return suffix == "due" or (suffix.startswith("due") and suffix[3:].isdigit())


class FleetPageBook(PageBook):
    """One worker's page records: loaded from the job's keys, written there once outcomes are recorded."""

    def __init__(self, client: Any, prefix: str, clock: Clock, policies: Mapping[str, Policy] | None = None) -> None:
        super().__init__(clock, policies, retain=False)
        self.client = client
        self.prefix = prefix
        #: targets whose stored records this worker loaded (a due run of theirs is planned or joined)
        self.loaded: set[str] = set()
        self._fetched: dict[tuple[str, int], Schedule | None] = {}  # visited, outcome not recorded yet
        self._ready: dict[tuple[str, int], Schedule | None] = {}  # outcome recorded: to write

    def load_job(self, target: str) -> dict[int, Schedule]:
        """The job's page records of ``target`` (once per worker): a revisit starts from them."""
        from idcrawl.state.redis import RedisStateStore

        if target in self.loaded:
            return {}
        records = RedisStateStore(self.client, self.prefix, read_only=True).load_pages(target)
        self.load(target, records)
        self.loaded.add(target)
        return records

    def visit(self, target: str, id_: int, fetch: Fetch) -> PageVisit:
        """The rule of :meth:`PageBook.visit`; the changed record waits for the id's outcome to be recorded."""
        visit = super().visit(target, id_, fetch)
        self._fetched.update(self.take_changes())
        self.awaiting.discard((target, id_))  # the item travels through Redis: the record waits for the outcome
        return visit

    def decided(self, target: str, id_: int) -> None:
        """The id's outcome (and a new or changed page's item) is recorded in Redis: its record may be written."""
        key = (target, id_)
        if key in self._fetched:
            self._ready[key] = self._fetched.pop(key)

    @property
    def unwritten(self) -> int:
        """Records whose outcome is recorded, not written yet."""
        return len(self._ready)

    def flush(self) -> int:
        """Write the ready records to the job's keys (one transaction); returns how many. A Redis error
        leaves them ready for the next flush."""
        if not self._ready:
            return 0
        ready = dict(self._ready)
        with self.client.pipeline(transaction=True) as pipe:
            for (target, id_), record in ready.items():
                if record is None:
                    pipe.hdel(self.prefix + "pages:" + target, str(id_))
                else:
                    pipe.hset(self.prefix + "pages:" + target, str(id_), schedule_to_json(record))
            pipe.execute()
        for key in ready:
            if self._ready.get(key) is ready[key]:
                del self._ready[key]
        return len(ready)
