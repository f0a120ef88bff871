"""The Lua scripts that make a job's lanes shared and atomic in Redis.

Every decision that two workers could disagree about runs inside one script,
so Redis applies it atomically: which ids a worker may fetch (``CLAIM``), an
id's outcome, the lane's first undecided id, the run of misses and the cut
(``RECORD``), and taking over the work of a worker that stopped answering
(inside ``CLAIM``, ``STATUS`` and ``LEAVE``). The rules are those of
:class:`idcrawl.core.lanes.Lane`: the margin is applied in lane order, a found
id is emitted only once the decided prefix passes it (so no cut can come
before it), an id decided past the cut is overshoot. Lanes of overlapping targets share
their ids as :class:`idcrawl.core.overlap.IdSpace` does in one process: each id is fetched
once (``CLAIM`` hands out only ids no lane of the space fetches or decided), its outcome
reaches every lane that waits for it (``RECORD``), its items are emitted once.

**Files.** Each script is a ``.lua`` file of the package
``idcrawl.distributed.lua`` (package data, read with :mod:`importlib.resources`,
so it loads from a wheel or a zipped scrapyd egg alike); its header says its
``KEYS``, ``ARGV`` and reply. The shared helpers of ``common.lua`` are put in
front of every script's own file when this module is imported (plain
concatenation: the helpers are ``local`` functions, so each script is one Lua
chunk as Redis's ``EVALSHA`` wants). Callers go through
:class:`idcrawl.distributed.frontier.RedisJob`, which builds the keys (``BLOOM``
through :class:`idcrawl.distributed.dupefilters.RedisBloomSeen`).

**Keys.** A script is passed in ``KEYS`` every key its caller can name. The keys
it discovers while running (the lanes of a worker that stopped, its emit hash,
the lane of a due retry) it derives from the job prefix ``P``, which it cuts
from a key in ``KEYS`` (``P workers``, ``P delayed``): so every key a script
touches shares the prefix's hash tag. The prefix is
``<IDCRAWL_REDIS_PREFIX>:{<job>}:`` (``idcrawl:{JOB}:`` by default), whose
braces are a Redis Cluster hash tag keeping a job's keys in one slot:

``P specs``            hash  target name -> its spec (JSON): the job's targets
``P tver``             int   bumped when a target is added (workers reload)
``P tset``             set   the targets the job's first worker started with: a later worker's must be
                             the same (``TARGETS``; pushed and merged targets are in ``P specs`` only)
``P progress``         hash  outcomes (recorded by RECORD), seen and active_at (ms): the job's last
                             activity, kept by STATUS for the no-progress rule
``P tl:<target>``      list  the target's lane keys, in order (list lanes of resumed holes too)
``P L:<lane>``         hash  start, step, stop ('' = none), margin, window,
                             neutral (1: failed ids are neutral), weight,
                             next (next id to hand out), fu (first undecided),
                             run (misses in a row), last (last found), cut,
                             reason, target, and job totals c_<count>; a *list
                             lane* (resumed holes, ``RESUME``) also ``ids``: its
                             ids are positions 0..n-1 into ``P L:<lane>:ids``
``P L:<lane>:ids``     list  a list lane's hole ids, in order (stored once)
``P L:<lane>:back``    hash  a list lane's position -> lines "<bits key> TAB <position>": lanes of
                             overlapping targets whose resume left that hole to this lane,
                             written with its outcome by RECORD
``P resumed``          set   targets with a resume (workers join its lanes)
``P R:<target>``       hash  the target's last resume: args (``resume=..``), gen (how
                             many), run (the fleet's run that planned it, ``P run``'s n);
                             ``:lanes``/``:order`` its lanes, ``:w`` its workers
``P run``              hash  the fleet's run (``RUN``, :mod:`idcrawl.distributed.runs`): n (its
                             number), wave ('' or a watch wave's ms), at (ms: a worker last
                             joined it or left the job)
``P L:<lane>:bits``    string  the outcome of every id the prefix passed, 2 bits
                             per id at position (id - start) * step (BITFIELD
                             u2: 0 found, 1 missing, 2 failed, 3 disallowed)
``P L:<lane>:dec``     hash  id -> outcome code, decided ahead of the prefix
                             (at most ``window`` ids) or past the cut
``P L:<lane>:pay``     hash  id -> serialised outputs of a found id ahead of
                             the prefix (held until the prefix passes it)
``P L:<lane>:own``     hash  id -> worker that claimed it (undecided ids)
``P L:<lane>:free``    list  ids taken back from a worker that stopped; handed
                             out again before new ids
``P unsettled``        set   lanes not settled yet
``P held``             set   settled lanes of an id space that still keep claims of ids
                             in flight (other lanes wait for their outcomes)
``P workers``          zset  worker -> last heartbeat (ms, Redis clock)
``P job``              hash  job totals: reclaimed_workers, reclaimed_ids, held_cap_waits (claims
                             ``IDCRAWL_MAX_HELD_PAYLOADS`` kept from new ids)
``P W:<worker>:emit``  hash  "lane|id" -> outputs released to that worker and
                             not yet acknowledged as written
``P orphans``          hash  the same, taken from workers that stopped
``P S:<space>:targets``  set  the targets of one id space (``codec.space_id``: one URL
                             template and outcome rules); from two on, their lanes
                             (``P S:<space>:lanes``) share it: their hashes get
                             ``space`` (= ``P S:<space>``) and ``lane``
``P S:<space>:fly``    hash  id -> the lane fetching it (claimed, no outcome yet)
``P S:<space>:wait``   hash  id -> the lanes waiting for that outcome ("\n"-separated)
``P S:<space>:pay``    hash  id -> outputs of a found id no lane has emitted yet
``P S:<space>:blk:<lane>``  zset  found ids of ``:pay`` whose emitting lane waits for that
                             lane's decision, by distance (``recheck`` in ``common.lua``)
``P S:<space>:held``   set   the ids of ``:pay`` that wait in a ``:blk`` set: the space's held
                             payloads, counted against ``IDCRAWL_MAX_HELD_PAYLOADS``
``P pages:<target>``   hash  id -> a found page's recrawl record (JSON), written by RECORD with the
                             page's outcome (``page_record.lua``, :mod:`idcrawl.distributed.pagerecords`)
``P pagedue:<target>`` zset  id by that record's due time (seconds): the index of page due times
``P pageidx``          set   targets whose ``pagedue`` index holds every record (:mod:`idcrawl.state.redis`)
``P delayed``          zset  retries (serialised requests) by due time (ms)
``P feed``             list  targets pushed to the fleet (JSON)
``P incidents``        list  incident log entries from every worker
``P polite:<slot>``    string  "<ms> <token>": the earliest time (ms) the next request to a slot
                             may start, and the request that took the slot last (``POLITE``)
``P limits:<level>:<key>``  hash  the fleet's limit counts, stop, first and last iteration
                             start (ms), found-change iteration (``LIMITS``,
                             :mod:`idcrawl.distributed.limits`)
``P bloom:<shard>``    string  the Bloom dupefilter's bits (``BLOOM``), ``P bloom:count`` its size
``P dupefilter``       set   the exact dupefilter's fingerprints (scrapy-redis's RFPDupeFilter)
``P U:<url>``, ``P uq:<host>/<group>``, ``P uqc:<host>``, ``P uhosts``, ``P utaken``, ``P upost``,
``P uwait``            the shared URL queue of crawl scope (outlinks): records, ready queues by
                       host and yield group, taken and postponed URLs, harvested URLs waiting for
                       their revisit by next harvest time (``urls_common.lua``)

Ids are Lua numbers (doubles): exact up to 2**53, far above any real id.
"""

from __future__ import annotations

import hashlib
from importlib import resources

__all__ = [
    "ADOPT", "BLOOM", "CLAIM", "DELAY", "GIVE_BACK", "LEAVE", "LIMITS", "NAMES", "PACKAGE", "POLITE", "POP_DELAYED",
    "RECORD", "REGISTER", "RESUME", "RUN", "RUN_REFUSED", "STATUS", "TARGETS", "URL_DUE", "URL_HARVEST", "URL_OFFER",
    "URL_PUT", "URL_STATUS", "URL_TAKE", "load",
]

#: The package whose ``*.lua`` files are the scripts.
PACKAGE = "idcrawl.distributed.lua"


def _read(name: str) -> str:
    return resources.files(PACKAGE).joinpath(name).read_text(encoding="utf-8")


#: Script name by the SHA-1 of its source (what ``EVALSHA`` names it by), for every script loaded:
#: how calls are counted (:func:`idcrawl.distributed.connection.count_calls`).
NAMES: dict[str, str] = {}


def load(name: str, *preludes: str) -> str:
    """The source of script ``name`` (``claim``: ``claim.lua``), ``common.lua`` in front, then
    the helper files ``preludes`` (``urls_common``: ``urls_common.lua``)."""
    helpers = "".join(f"\n-- {prelude}.lua\n{_read(prelude + '.lua')}" for prelude in preludes)
    source = f"{_read('common.lua')}{helpers}\n-- {name}.lua\n{_read(name + '.lua')}"
    NAMES[hashlib.sha1(source.encode()).hexdigest()] = name  # noqa: S324 - Redis's own script hash
    return source


REGISTER = load("register")
CLAIM = load("claim")
RECORD = load("record", "page_record")  # a found page's record with its outcome
STATUS = load("status")
TARGETS = load("targets")
ADOPT = load("adopt")
LEAVE = load("leave")
GIVE_BACK = load("give_back")
DELAY = load("delay")
POP_DELAYED = load("pop_delayed")
POLITE = load("polite")
BLOOM = load("bloom")
LIMITS = load("limits")
RESUME = load("resume")
RUN = load("run")
RUN_REFUSED = load("run_refused")
# the shared URL queue of crawl scope (idcrawl.distributed.urlqueue): helpers in urls_common.lua
URL_OFFER = load("url_offer", "urls_common")
URL_TAKE = load("url_take", "urls_common")
URL_HARVEST = load("url_harvest", "urls_common")
URL_PUT = load("url_put", "urls_common")
URL_STATUS = load("url_status", "urls_common")
URL_DUE = load("url_due", "urls_common")
