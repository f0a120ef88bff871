"""Every idcrawl setting with its default, in one place, alphabetical.

Components read these through :func:`idcrawl.utils.setting` so that a project
which wires a single piece by hand (only ``SCHEDULER``, say) still gets the
documented default. The README's setting reference is checked against this
module by the test suite.
"""

from idcrawl.core.targets import DEFAULTS as _TARGET_DEFAULTS

#: Whether an id that ends ``failed`` (errors on every attempt) counts toward
#: the margin like a missing one. With False, failed ids neither extend nor
#: reset the run of misses: a host that is down then walks on to the bound.
IDCRAWL_MARGIN_COUNTS_FAILED = True

#: Seconds between the periodic progress lines (one per target). 0 = off.
IDCRAWL_PROGRESS_INTERVAL = 60.0

#: Default consecutive-miss margin that cuts a lane (per target key ``margin``).
IDCRAWL_MARGIN: int = _TARGET_DEFAULTS["margin"]  # 10

#: Default number of ids a lane may dispense past its first undecided id (per
#: target key ``window``). It bounds the requests wasted past a cut and the
#: items held in memory. In practice the waste past a cut is about the slot's
#: concurrency; the window only caps the worst case. Too small a window stalls
#: a lane behind one slow response (measured: 32 ran at ~0.6x plain Scrapy).
IDCRAWL_WINDOW: int = _TARGET_DEFAULTS["window"]  # 128

#: Statuses whose response means "this id does not exist" (outcome missing).
IDCRAWL_MISSING_STATUSES = [404, 410]

#: Random lengthening of each retry's cool-down, as a fraction (0.1 = up to +10%),
#: so that many ids failing together do not come back together.
IDCRAWL_RETRY_JITTER = 0.1

#: Longest wait, in seconds, that a ``Retry-After`` header may impose.
IDCRAWL_RETRY_AFTER_MAX = 600.0
