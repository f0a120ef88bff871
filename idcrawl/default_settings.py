"""Every idcrawl setting with its default, as module constants, grouped by component.

A Scrapy project may import them (``from idcrawl.default_settings import *``); idcrawl itself reads
its settings through :mod:`idcrawl.config`, whose table (:mod:`idcrawl.core.setting_specs`) holds the
same defaults (``tests/unit/test_config.py`` checks that they agree, and the manual's settings page).
"""

from idcrawl.core.outcomes import DEFAULT_MISSING_STATUSES as _DEFAULT_MISSING_STATUSES
from idcrawl.core.targets import DEFAULTS as _TARGET_DEFAULTS

#: Whether an id that ends ``failed`` (errors on every attempt) counts toward
#: the margin like a missing one. With False, failed ids neither extend nor
#: reset the run of misses: a host that is down then walks on to the bound.
IDCRAWL_MARGIN_COUNTS_FAILED = True

#: How far a lane dispenses ahead of its outcomes (one process, and a distributed job's claims:
#: the setting of the worker that registers a target). ``adaptive``: at most the margin past
#: the earliest cut the outcomes so far allow (requests past a lane's end <= margin at any
#: concurrency), and an id waiting out a retry that cannot change the cut does not hold the
#: window. ``window``: a whole window from the first undecided id (the waste past a cut is then
#: about the concurrency).
IDCRAWL_SPECULATION = "adaptive"

#: Overlapping targets: most found-id payloads (a page's items) held in memory, per shared id
#: space, while a lane nearer to the id by the emitting rule has not decided whether it emits
#: them. At the cap, the lanes that no held id waits for dispense no new ids until it frees
#: (requests in flight complete and may add theirs); nothing is dropped or reordered. 0 = no cap.
#: A distributed job counts them for the whole fleet (in Redis, one payload per held id).
IDCRAWL_MAX_HELD_PAYLOADS = 0

#: Most targets a job file may hold; a larger job is refused with one line before
#: it is parsed. Each target costs about 0.1 ms of CPU and 2 KB to start (bench/big_job.py:
#: 100,000 targets peak at ~290 MB; docs/benchmarks.md, "at size"). 0 = no limit.
IDCRAWL_MAX_TARGETS = 100_000

#: Most lanes whose stats are kept one by one (``idcrawl/lanes/<lane>/...``: counters, cut reason,
#: cursor); a job with more lanes keeps the job totals only (``idcrawl/found``, ...), so 100,000
#: targets do not add 200,000 stats and a stats dump of as many lines. 0 = every lane.
IDCRAWL_LANE_STATS = 10_000

#: Longest gap, in seconds, between the periodic progress lines (one per target). 0 = no
#: progress lines (the plan and the summary are still logged).
IDCRAWL_PROGRESS_INTERVAL = 60.0

#: Seconds from the spider's opening to the first progress line; each later gap doubles
#: until it reaches IDCRAWL_PROGRESS_INTERVAL (3, 6, 12, 24, 48, 60, 60, ... s).
IDCRAWL_PROGRESS_FIRST = 3.0

#: How many targets get plan, progress and summary lines of their own (the first ones of the
#: job); the others are summed in one "and N more targets" line.
IDCRAWL_PROGRESS_TARGETS = 10

#: Default consecutive-miss margin that cuts a lane (per target key ``margin``).
IDCRAWL_MARGIN: int = _TARGET_DEFAULTS["margin"]  # 10

#: Default number of ids a lane may dispense past its first undecided id (per
#: target key ``window``). It bounds the requests wasted past a cut and the
#: items held in memory. With IDCRAWL_SPECULATION=window the waste past a cut is
#: about the slot's concurrency, and the window only caps the worst case; with
#: ``adaptive`` it is at most the margin, and the window counts from the last found
#: id before the earliest possible cut. Too small a window stalls a lane behind one
#: slow response (measured: 32 ran at ~0.6x plain Scrapy).
IDCRAWL_WINDOW: int = _TARGET_DEFAULTS["window"]  # 128

#: Statuses whose response means "this id does not exist" (outcome missing);
#: a target's ``missing_statuses`` key overrides it.
IDCRAWL_MISSING_STATUSES = sorted(_DEFAULT_MISSING_STATUSES)  # [404, 410]

#: Random lengthening of each retry's cool-down, as a fraction (0.1 = up to +10%),
#: so that many ids failing together do not come back together.
IDCRAWL_RETRY_JITTER = 0.1

#: Longest wait, in seconds, that a ``Retry-After`` header may impose.
IDCRAWL_RETRY_AFTER_MAX = 600.0

#: Most bytes of a host's robots.txt that are read (idcrawl.downloadermiddlewares.robotstxt): past it
#: the download stops and the lines under it are obeyed, as Google and RFC 9309 (500 KiB) do. 0 = no cap
#: (then DOWNLOAD_MAXSIZE applies: a robots.txt over it fails, and the host is crawled as if it had none).
IDCRAWL_ROBOTSTXT_MAXSIZE = 500 * 1024

# -- Politeness (idcrawl.extensions.politeness.IdPoliteness) ------------------------------------
# On by default (seed 001: "a gap between successive fetch requests to a host"): the gap between
# two requests to one host is at least max(the slot's own delay, FACTOR x the duration of the last
# fetch from that host), the latter clamped to [MIN_DELAY, MAX_DELAY]; one request at a time per
# host. The ``fast`` profile, for sites you own, turns it off (FACTOR 0); why these values:
# docs/politeness.md ("The defaults").

#: Multiple of the last fetch's duration to wait before the next request to
#: the same host (Heritrix: 5; Mercator and seed 001: 10). 0 = off.
IDCRAWL_POLITENESS_FACTOR = 5.0

#: Longest gap, in seconds, that a slow fetch can impose (Heritrix: 30). An
#: explicit DOWNLOAD_DELAY or DOWNLOAD_SLOTS delay above it still holds.
IDCRAWL_POLITENESS_MAX_DELAY = 30.0

#: Shortest gap, in seconds, between two requests to one host (Scrapy's
#: startproject template: DOWNLOAD_DELAY = 1; Heritrix: 3).
IDCRAWL_POLITENESS_MIN_DELAY = 1.0

# -- State (idcrawl.state.recorder.StateRecorder) -------------------------------------------

#: Keep durable state (outcomes, lane cursors, run history) so that a job can
#: resume (``-a resume=bound|holes|all``) and ``scrapy idplan`` can show it.
IDCRAWL_STATE = True

#: Drop the items on purpose. A crawl that keeps state (IDCRAWL_STATE, or a
#: fleet) remembers its found ids and never fetches them again, so one whose
#: items go nowhere (no feed in FEEDS, -o or -O, no item pipeline besides
#: idcrawl's own, not on Zyte Scrapy Cloud) is refused before its first
#: request; True lets it run (items kept by an extension of your own, a survey).
IDCRAWL_DISCARD_ITEMS = False

#: Commit the state after this many outcomes (or the interval below, whichever
#: comes first). A killed run refetches at most about this many ids. At least 1
#: (1 = after every outcome); 0 is refused.
IDCRAWL_STATE_COMMIT_ITEMS = 100

#: Seconds between state commits while outcomes arrive.
IDCRAWL_STATE_COMMIT_INTERVAL = 5.0

#: Each id once across a killed run and its resumed runs: every commit also
#: records how far the run's feed file was written (its "feed mark"), and a
#: resumed run reads the complete lines past the last run's mark and does not
#: fetch or emit those ids again. Only for a run with one feed, a local JSON
#: lines file with one item per id; otherwise, or False: a kill can leave up
#: to one commit batch (IDCRAWL_STATE_COMMIT_ITEMS ids) in the feeds that the
#: resumed run emits again (at-least-once).
IDCRAWL_STATE_EMIT_ONCE = True

#: The state file. None (or empty): ``<JOBDIR>/idcrawl-state.sqlite`` when
#: JOBDIR is set, else ``.scrapy/idcrawl/<spider name>.sqlite`` in the current
#: directory (see idcrawl.state.location.state_path). ``scrapy idplan`` and
#: ``scrapy idcoverage`` read the same file.
IDCRAWL_STATE_PATH = None

# -- Job limits (idcrawl.extensions.limits.IdLimits; seed 002, Table 3) --------------------------
# Per domain crawl (a download slot: a host by default) and per job. 0 = off, the
# default: with every rule off the extension is not loaded. Durations (TDL, TAC)
# accept 15m, 900s or 900 (seconds).

#: Load take: lane requests a domain takes per iteration (0 = no cap).
IDCRAWL_LIMIT_LT = 1
#: Iteration limit: a domain stops after this many iterations.
IDCRAWL_LIMIT_IMAX = 0
#: Page-load limit: a domain stops after this many responses.
IDCRAWL_LIMIT_PLMAX = 0
#: Total-targets limit: a domain stops when it knows this many targets (ids + discovered requests).
IDCRAWL_LIMIT_TTMAX = 0
#: Domain time limit: a domain stops this long after its first request.
IDCRAWL_LIMIT_TDL = 0
#: Inactivity limit: a domain stops when the gap between two iteration starts exceeds this.
IDCRAWL_LIMIT_TAC = 0
#: Target-count stability: a domain stops after this many iterations without a new found target.
IDCRAWL_LIMIT_TST = 0

#: The same rules over the whole job; a trigger closes the spider (reason idcrawl_limit_<rule>).
IDCRAWL_JOB_LIMIT_IMAX = 0
IDCRAWL_JOB_LIMIT_PLMAX = 0
IDCRAWL_JOB_LIMIT_TTMAX = 0
IDCRAWL_JOB_LIMIT_TDL = 0
IDCRAWL_JOB_LIMIT_TAC = 0

#: The XML incident log. None: <JOBDIR>/idcrawl-incidents.xml with JOBDIR, else
#: .scrapy/idcrawl/<spider>-incidents.xml in the current directory.
IDCRAWL_INCIDENT_LOG = None

#: Rules whose trigger writes an incident (the seed: TTmax and TDL; TAC too);
#: add "errors" to also log unhandled spider errors as incidents.
IDCRAWL_INCIDENT_RULES = ["TTmax", "TDL", "TAC"]

#: Write every fetch as WARC records (request, response or revisit) in this folder
#: (idcrawl.archive); None: no WARC output. A job file's ``warc_dir`` key sets it too.
IDCRAWL_WARC_DIR = None

#: A WARC file is finished (renamed, indexed) once it reaches this many bytes; 0: one per run.
IDCRAWL_WARC_MAX_SIZE = 1_000_000_000

# -- Profiles (idcrawl.settings_profiles) ------------------------------------------------------

#: Name of a settings profile in ``settings_profiles/`` (e.g. ``survey``) applied
#: above the project settings and below explicit ``-s`` settings. None = no profile.
IDCRAWL_PROFILE = None

#: An extra folder of ``NAME.toml`` profiles, searched before the project's own.
IDCRAWL_PROFILES_DIR = None

# -- Monitoring (idcrawl.spidermon.monitors; the optional extra idcrawl[monitoring]) ------------

#: Run idcrawl's Spidermon suite when the spider closes: adds Spidermon's
#: extension and idcrawl.spidermon.monitors.IdCrawlMonitorSuite to SPIDERMON_SPIDER_CLOSE_MONITORS.
IDCRAWL_SPIDERMON = False

#: The failed_ratio check: failed ids per decided id (found, missing, failed, disallowed).
IDCRAWL_MONITOR_MAX_FAILED_RATIO = 0.05

#: The finish_reason check: the finish reasons that count as a good run;
#: None = the normal completions of the exit-status table (those that exit 0:
#: docs/reference/finish-reasons.md). A name ending in * matches a prefix.
IDCRAWL_MONITOR_FINISH_REASONS = None

#: The incidents check: incidents written to the XML log in one run.
IDCRAWL_MONITOR_MAX_INCIDENTS = 0

#: The overshoot_ratio check: found ids fetched past a margin cut per found id
#: (more means the margin cuts lanes that still have content).
IDCRAWL_MONITOR_MAX_OVERSHOOT_RATIO = 0.01

# -- Request dupefilter (idcrawl.dupefilters.IdDupeFilter) ----------------------------

#: Where seen request fingerprints are kept: "pybloom" (pybloom-live Bloom
#: filter, the default the project chose), "rbloom" (rbloom Bloom filter on a
#: stable hash; 4-6x faster than pybloom at the same size and rate: the fast
#: profile picks it) or "set" (exact, about 90 bytes a fingerprint).
#: See docs/benchmarks.md, "Request dupefilter".
IDCRAWL_DUPEFILTER_BACKEND = "pybloom"

#: False-positive rate of the Bloom backends: the share of never-seen requests
#: the filter wrongly calls seen, i.e. pages skipped. 0.001 costs ~1.8 bytes a fingerprint.
IDCRAWL_DUPEFILTER_ERROR_RATE = 0.001

#: Expected number of distinct requests. 0 = unknown: the filter starts at
#: 100,000 and grows. A fixed filter that fills up grows too (with one warning).
IDCRAWL_DUPEFILTER_CAPACITY = 0

#: The filter file. None: <JOBDIR>/idcrawl-seen.<backend> with JOBDIR, else beside
#: the state file (<state stem>-seen.<backend>; .scrapy/idcrawl/<spider>-seen.<backend>).
IDCRAWL_DUPEFILTER_PATH = None

#: Save the filter at close (and periodically) and read it when a run continues
#: the job (JOBDIR, or a target with resume other than reset). False: this run only.
IDCRAWL_DUPEFILTER_PERSIST = True

#: Seconds between saves of the filter while responses arrive; 0 = at close only.
IDCRAWL_DUPEFILTER_SAVE_INTERVAL = 60.0

# -- Content duplicates (idcrawl.pipelines.ContentDuplicates) -----------------------------

#: What the ContentDuplicates pipeline does with an item whose body checksum an
#: earlier item of the crawl had: "mark" adds ``duplicate_of`` (the first
#: item's id), "drop" drops the item, "off" disables the pipeline. The index
#: keeps about 130 bytes per distinct page for the whole crawl.
IDCRAWL_CONTENT_DUPLICATES = "mark"

#: Near-duplicates: items whose visible text has at least this Jaccard
#: similarity (MinHash of 3-word shingles) to an earlier item's get
#: ``near_duplicate_of`` (or are dropped with "drop"). 0 = off, the default: it
#: costs a MinHash per found page and about 2.2 KB per distinct page.
IDCRAWL_CONTENT_NEAR_DUPLICATES = 0.0

# -- Distributed runs on Redis (idcrawl.distributed; docs/distributed.md) --------
# The connection comes from scrapy-redis's settings: REDIS_URL (or REDIS_HOST and
# REDIS_PORT) and REDIS_PARAMS.

#: Run this crawl as one worker of a job shared through Redis: lanes, outcomes,
#: margins, retries and held items live in Redis, and any number of workers (on
#: any machines) crawl the job together with the result of a single process.
IDCRAWL_DISTRIBUTED = False

#: The class that gives an id crawl's runtime its frontier and makes outcomes
#: durable: ``idcrawl.local.worker.LocalWorker`` (lanes in this process, the state
#: recorder). The distributed add-on swaps in ``idcrawl.distributed.worker.RedisWorker``.
IDCRAWL_WORKER_CLASS = "idcrawl.local.worker.LocalWorker"

#: Where a crawl keeps its durable state: "sqlite" (a file, the default) or
#: "redis" (REDIS_URL, under the job's key prefix). A distributed crawl always
#: keeps it in Redis.
IDCRAWL_STATE_BACKEND = "sqlite"

#: Seconds of the owner key's lease of a single-process crawl's Redis state
#: (IDCRAWL_STATE_BACKEND = "redis"): one process per state; renewed every third
#: of it while the crawl runs, deleted at close. A killed holder's key blocks
#: the next run until it expires (at once for a dead process of the same machine).
IDCRAWL_STATE_LEASE = 30.0

#: The first part of every Redis key: keys are <prefix>:{<job>}:...
IDCRAWL_REDIS_PREFIX = "idcrawl"

#: The job's name in Redis; workers with the same name crawl one job. None:
#: the spider's name.
IDCRAWL_REDIS_JOB = None

#: REDIS_URL names a node of a Redis Cluster (any one: the client finds the
#: others): workers, commands and the Redis state backend connect through
#: redis-py's cluster client. A job's keys live in the slot of its hash tag
#: {<job>}, so one job lives on one master; many jobs spread over the masters.
IDCRAWL_REDIS_CLUSTER = False

#: Seconds without a heartbeat after which a worker counts as stopped and the
#: other workers take back its claimed ids and the items it had not written.
#: Every poll (IDCRAWL_REDIS_POLL_INTERVAL) is a heartbeat. The trade-off: a
#: dead worker's ids hold its lanes' windows until the lease ends (the fleet
#: may fetch nothing meanwhile), while a live worker whose process stalls
#: longer than the lease (or whose Redis does not answer for that long) loses
#: its claims to the others (ids fetched twice) or stops. 8 s: a dead worker's
#: ids are back within ~10 s; raise it for workers that stall, or Redis that
#: fails over slowly.
IDCRAWL_REDIS_LEASE_TIMEOUT = 8.0

#: Ids a worker claims from a lane in one round trip.
IDCRAWL_REDIS_CLAIM_BLOCK = 8

#: Seconds between a worker's polls of the job (heartbeat, taken-back ids,
#: pushed targets, waiting lanes).
IDCRAWL_REDIS_POLL_INTERVAL = 0.5

#: Seconds a worker with nothing to do waits for work before it closes; 0 = as
#: long as the job is unfinished (a worker started without targets then waits
#: for pushed targets forever, like scrapy-redis's RedisSpider).
IDCRAWL_REDIS_IDLE_TIMEOUT = 0.0

#: A fleet that makes no progress stops (finish reason idcrawl_no_progress)
#: after this many leases (IDCRAWL_REDIS_LEASE_TIMEOUT) in which its job had
#: lanes unsettled, yet no worker recorded an outcome, had an id, request or
#: retry in flight, nor waited for a shared retry's time: the job's keys are
#: damaged, or a worker holds ids and never answers. A slow download, a
#: politeness gap or a Retry-After keeps its worker busy; a dead worker's ids
#: come back after one lease. 0 = wait for ever.
IDCRAWL_REDIS_NO_PROGRESS_LEASES = 8.0

#: A fleet job's targets are one set: a worker whose targets differ from the
#: job's in Redis (one the job has not, or one of the job's it lacks) is
#: refused. True: it joins all the same, its new targets added as pushed ones.
IDCRAWL_REDIS_MERGE_TARGETS = False

#: Sentinel: "host:port,host:port" of the sentinels that watch the job's Redis
#: primary. Set, workers, commands and the Redis state backend ask them for the
#: primary (IDCRAWL_REDIS_SENTINEL_SERVICE) instead of REDIS_URL's host and
#: port, and follow a failover to the promoted replica. REDIS_URL's password,
#: username and db (and REDIS_PARAMS) apply to the primary. None: no Sentinel.
IDCRAWL_REDIS_SENTINELS = None

#: The name the sentinels monitor the primary by (sentinel monitor <name> ...).
IDCRAWL_REDIS_SENTINEL_SERVICE = "mymaster"

#: The sentinels' own password (requirepass in sentinel.conf), which may differ
#: from the primary's; None: the sentinels ask none.
IDCRAWL_REDIS_SENTINEL_PASSWORD = None

#: Replicas that must have a worker's writes that commit (outcomes, claims,
#: acknowledgements) before the worker goes on: WAIT <n> sent in the same
#: round trip. With 1 and one replica, a failover loses none of them and no
#: item is written twice for it. 0 = off (a failover may lose the last writes:
#: their ids are fetched again, their items may be written twice).
IDCRAWL_REDIS_WAIT_REPLICAS = 0

#: Seconds a worker's WAIT waits for the replicas before it goes on unconfirmed
#: (counted in idcrawl/redis/wait_short).
IDCRAWL_REDIS_WAIT_TIMEOUT = 1.0

#: Deprecated: ``scrapy crawl`` (idcrawl's command) exits with the status of
#: its finish reason (docs/reference/finish-reasons.md). Set, it is the exit
#: status of the reasons in IDCRAWL_FAIL_REASONS instead (with a WARNING).
IDCRAWL_FAIL_EXIT_CODE = None

#: Deprecated: the finish reasons that IDCRAWL_FAIL_EXIT_CODE, when set, gives
#: its exit status.
IDCRAWL_FAIL_REASONS = ["idcrawl_redis_unavailable", "idcrawl_redis_state_lost"]

# -- Crawl scope (idcrawl.core.urlqueue) ----------------------------------------------------------
#: The seed of the random draws that give a contended host slot to a collection, crawl profile and
#: URL (the yield model): the same seed and the same answers give the same order of dispatch.
IDCRAWL_SCOPE_SEED = 0

#: Seconds from now to a postponed URL's next harvest time (its target, crawl profile or collection
#: deactivated); the URL waits for a run that finds them active again.
IDCRAWL_SCOPE_POSTPONE = 3600.0

#: Sitemaps (``sitemaps`` in a job file, docs/scope.md "Sitemaps"): at most this many sitemap files are
#: read per site (robots.txt's, /sitemap.xml, the children of sitemap indexes); a gzip sitemap is
#: decompressed up to DOWNLOAD_MAXSIZE, as Scrapy's SitemapSpider does.
IDCRAWL_SITEMAP_MAX_FILES = 100
#: ... and at most this many URLs are taken per target from its sitemaps (highest priority first).
IDCRAWL_SITEMAP_MAX_URLS = 50000
IDCRAWL_SITEMAP_MAX_REACH = 1000
#: Host names mapped to IP addresses for a crawl, like curl's --resolve: {"gamma.example": "127.0.0.3"}
#: (or gamma.example=127.0.0.3,... with -s). Read by idcrawl.resolver.IdResolver, which a project installs
#: as TWISTED_DNS_RESOLVER (DNS_RESOLVER before Scrapy 2.19); None: nothing mapped.
IDCRAWL_RESOLVE = None

#: With IdResolver: names not in IDCRAWL_RESOLVE fail, without a DNS lookup (a crawl that must stay local).
IDCRAWL_RESOLVE_ONLY = False

# -- The clock (idcrawl.core.clock.Clock) ----------------------------------------------------------
#: "Now" for every time idcrawl records or compares (recrawl due times, fetched_at, the recorder):
#: None = the real clock; an ISO 8601 time (2026-01-12T07:00:00Z; no offset = UTC) fixes it there.
IDCRAWL_NOW = None

#: A found page whose last body (a 200) is older than this is revisited without validators (a forced
#: unconditional refetch, like Nutch's db.fetch.interval.max): a duration (90d, 12h) or seconds; 0 = never.
IDCRAWL_RECRAWL_REFETCH_AFTER = 90 * 86_400.0

#: Late ids (ids below a tail's last found id that were missing when it passed them): resume=due re-probes
#: them every IDCRAWL_LATE_EVERY (a duration such as 1d, or seconds; 0 = never), at most IDCRAWL_LATE_MAX
#: of them per re-probe, newest first (defaults of the target keys late_every, late_max).
IDCRAWL_LATE_EVERY = 0.0
IDCRAWL_LATE_MAX = 1000

# -- Watch mode (idcrawl.extensions.watch.IdWatch) --------------------------------------------------
#: Keep one crawl running (also ``-a watch=true``): resume=due waves, each started when the earliest
#: schedule the last one wrote falls due. Single process only; needs the state (IDCRAWL_STATE).
IDCRAWL_WATCH = False

#: Clock seconds per real second while a watching crawl sleeps between waves (> 0; not 1 only with a
#: fixed clock, IDCRAWL_NOW): 86400 makes a simulated day pass in a second, for tests and demos.
IDCRAWL_WATCH_SPEED = 1.0

#: A watch wave takes every schedule due within its coalescing window of the wave's start:
#: max(IDCRAWL_WATCH_COALESCE, min(IDCRAWL_WATCH_COALESCE_SHARE x the schedule's duration,
#: IDCRAWL_WATCH_COALESCE_MAX)) seconds, so pages due close together share one wave (0, 0: off).
IDCRAWL_WATCH_COALESCE = 60.0
IDCRAWL_WATCH_COALESCE_SHARE = 0.05
IDCRAWL_WATCH_COALESCE_MAX = 3600.0
