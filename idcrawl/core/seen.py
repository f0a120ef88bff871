"""Which request fingerprints a crawl has seen: swappable backends and their file (no Scrapy imports).

The backends, how a full filter grows, the pending rule and the file format: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import json
import math
import os
import struct
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar, Protocol

import pybloom_live
import rbloom

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "FORMAT",
    "GROWTH",
    "INITIAL_CAPACITY",
    "LIBRARY_VERSIONS",
    "MAGIC",
    "TIGHTENING",
    "ExactSeen",
    "FingerprintSet",
    "PyBloomSeen",
    "RBloomSeen",
    "Seen",
    "SeenConfigError",
    "SeenFileError",
    "dump",
    "is_seen_file",
    "load",
    "make_backend",
    "stable_hash",
]

#: The backend of the dupefilter when the settings name none: pybloom-live, the
#: library the project chose; rbloom checks and adds faster at the same memory
#: and false-positive rate (docs/benchmarks.md, "Request dupefilter") and is one
#: setting away (the ``fast`` profile picks it).
DEFAULT_BACKEND = "pybloom"
#: Capacity of the first layer of a filter whose capacity is unknown (``capacity=0``):
#: 100,000 fingerprints at 0.1% take about 200 KB, so a small crawl pays little,
#: and a million fingerprints need three layers.
INITIAL_CAPACITY = 100_000
#: Each chained layer holds this many times the fingerprints of the previous one
#: (pybloom-live's ``LARGE_SET_GROWTH``): few layers, so few lookups per check.
GROWTH = 4
#: Each chained layer's rate is this times the previous one's, so the layers'
#: rates add up to less than the configured rate. (pybloom-live's own default,
#: 0.9 from ``error_rate * 0.9``, adds up to several times the configured rate.)
TIGHTENING = 0.5

#: First line of a filter file.
MAGIC = b"idcrawl-seen\n"
#: Version of the file layout; a newer file is refused, not misread.
FORMAT = 1


def _installed(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - vendored or renamed
        return "unknown"


#: Versions of the libraries whose bits a filter file holds (written in its header):
#: a file from another major version is refused, since its hashing may differ.
LIBRARY_VERSIONS = {"pybloom-live": _installed("pybloom-live"), "rbloom": _installed("rbloom")}

OnFull = Callable[[str], None]


class SeenConfigError(ValueError):
    """A bad backend name, error rate or capacity: ``field``, ``value`` and why."""

    def __init__(self, field: str, value: object, reason: str) -> None:
        super().__init__(f"{field}={value!r}: {reason}")
        self.field, self.value, self.reason = field, value, reason


class SeenFileError(ValueError):
    """A filter file that cannot be used as it is (corrupt, foreign, another backend)."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = Path(path), reason


class FingerprintSet(Protocol):
    """What the dupefilter needs of a backend (a Redis one would implement the same)."""

    #: The backend's name (``IDCRAWL_DUPEFILTER_BACKEND``), also written in its files.
    name: ClassVar[str]
    #: The package whose layout and hashing the payload depends on (None: the standard library).
    library: ClassVar[str | None]
    #: The configured false-positive rate and capacity (0 = unknown: it grows).
    error_rate: float
    configured_capacity: int

    def add(self, fp: bytes) -> bool:
        """Record ``fp``; True if it was (probably, for a Bloom filter) there already."""

    def __contains__(self, fp: bytes) -> bool: ...

    def __len__(self) -> int:
        """Fingerprints added (each counted once, as far as the backend can tell)."""

    @property
    def capacity(self) -> int:
        """Fingerprints it holds at its rate before it grows again; 0 = no limit (exact)."""

    def estimated_error_rate(self) -> float:
        """The false-positive rate now, estimated from how full each layer is (0 when exact)."""

    def dumps(self) -> bytes:
        """The backend's payload (its file holds it after a header)."""


def _bloom_rate(count: int, bits: int, hashes: int) -> float:
    """Expected false-positive rate of a Bloom filter of ``bits`` bits and ``hashes``
    hash functions holding ``count`` items: ``(1 - e^(-k n / m))^k``. The same holds
    for a partitioned filter (pybloom-live: k slices of m/k bits)."""
    if count <= 0 or bits <= 0 or hashes <= 0:
        return 0.0
    return float((1.0 - math.exp(-hashes * count / bits)) ** hashes)


def _compound(rates: Iterable[float]) -> float:
    """A fingerprint is a false positive if any layer says yes: ``1 - prod(1 - r)``
    (computed with log1p/expm1, so that a tiny rate does not round to 0)."""
    return max(0.0, -math.expm1(math.fsum(math.log1p(-rate) for rate in rates)))


def _layer_plan(capacity: int, error_rate: float, index: int) -> tuple[int, float]:
    """Capacity and rate of layer ``index`` of a chain (see the module docstring).

    Known capacity: layer 0 is exactly what was configured; the layers chained
    behind it when it is full start at the same capacity and half its rate's
    remainder (p/4, p/8, ...), so the compound rate stays under 1.5 p.
    Unknown capacity: :data:`INITIAL_CAPACITY` at p/2, then p/4, ...
    """
    if capacity:
        if index == 0:
            return capacity, error_rate
        return capacity * GROWTH ** (index - 1), error_rate * TIGHTENING ** (index + 1)
    return INITIAL_CAPACITY * GROWTH**index, error_rate * TIGHTENING ** (index + 1)


def _check_params(error_rate: float, capacity: int) -> None:
    if isinstance(error_rate, bool) or not isinstance(error_rate, int | float) or not 0.0 < error_rate < 1.0:
        raise SeenConfigError("error_rate", error_rate, "must be a number between 0 and 1 (exclusive)")
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
        raise SeenConfigError("capacity", capacity, "must be an integer >= 0 (0 = unknown: the filter grows)")


# -- exact -----------------------------------------------------------------------------


class ExactSeen:
    """A Python set of fingerprints: exact, and the memory baseline the Bloom filters beat."""

    name: ClassVar[str] = "set"
    library: ClassVar[str | None] = None

    def __init__(self, error_rate: float = 0.001, capacity: int = 0, on_full: OnFull | None = None) -> None:
        _check_params(error_rate, capacity)
        self.error_rate, self.configured_capacity = float(error_rate), capacity
        self._set: set[bytes] = set()

    def add(self, fp: bytes) -> bool:
        if fp in self._set:
            return True
        self._set.add(fp)
        return False

    def __contains__(self, fp: bytes) -> bool:
        return fp in self._set

    def __len__(self) -> int:
        return len(self._set)

    @property
    def capacity(self) -> int:
        return 0

    def estimated_error_rate(self) -> float:
        return 0.0

    def dumps(self) -> bytes:
        # Scrapy's requests.seen layout: a 2-byte big-endian length, then the fingerprint
        return b"".join(len(fp).to_bytes(2, "big") + fp for fp in self._set)

    @classmethod
    def loads(cls, payload: bytes, header: dict[str, Any], on_full: OnFull | None = None) -> ExactSeen:
        seen = cls(header["error_rate"], header["capacity"])
        pos, end = 0, len(payload)
        while pos < end:
            if pos + 2 > end:
                raise ValueError("truncated fingerprint length")
            size = int.from_bytes(payload[pos : pos + 2], "big")
            pos += 2
            if pos + size > end:
                raise ValueError("truncated fingerprint")
            seen._set.add(payload[pos : pos + size])
            pos += size
        return seen


# -- pybloom-live ----------------------------------------------------------------------


class PyBloomSeen:
    """pybloom-live: a fixed ``BloomFilter`` (known capacity) or a ``ScalableBloomFilter``.

    A full fixed filter gets a ``ScalableBloomFilter`` chained behind it (once,
    with one ``on_full`` message): pybloom-live's own ``add`` would raise
    ``IndexError`` mid-crawl. pybloom-live hashes ``str`` keys with SHA or
    xxHash (seeded constants, stable across processes); the fingerprint goes in
    as hex.
    """

    name: ClassVar[str] = "pybloom"
    library: ClassVar[str | None] = "pybloom-live"

    def __init__(self, error_rate: float = 0.001, capacity: int = 0, on_full: OnFull | None = None) -> None:
        _check_params(error_rate, capacity)
        self.error_rate, self.configured_capacity = float(error_rate), capacity
        self._on_full = on_full
        self._fixed: Any = None  # pybloom_live.BloomFilter, or None with capacity 0
        self._scalable: Any = None  # pybloom_live.ScalableBloomFilter: capacity 0, or the fixed one overflowed
        if capacity:
            self._fixed = pybloom_live.BloomFilter(capacity=capacity, error_rate=error_rate)
        else:
            self._scalable = self._new_scalable(INITIAL_CAPACITY, error_rate)

    @staticmethod
    def _new_scalable(initial_capacity: int, error_rate: float) -> Any:
        scalable = pybloom_live.ScalableBloomFilter(
            initial_capacity=initial_capacity, error_rate=error_rate,
            mode=pybloom_live.ScalableBloomFilter.LARGE_SET_GROWTH,
        )
        # its layers' rates are error_rate * ratio**(i + 1): 0.5 keeps their sum under error_rate
        scalable.ratio = TIGHTENING
        return scalable

    def add(self, fp: bytes) -> bool:
        key = fp.hex()
        fixed = self._fixed
        if fixed is not None:
            if key in fixed:
                return True
            if self._scalable is None:
                if fixed.count < fixed.capacity:
                    fixed.add(key, skip_check=True)
                    return False
                # the overflow's first layer: the fixed capacity at a quarter of the rate (see _layer_plan)
                self._scalable = self._new_scalable(fixed.capacity, self.error_rate * TIGHTENING)
                if self._on_full is not None:
                    self._on_full(
                        f"the fixed Bloom filter is full ({fixed.capacity} fingerprints); a growing filter "
                        f"is chained behind it, and checks get slower and the false-positive rate may reach "
                        f"1.5x the configured {self.error_rate}: raise the capacity for the next job"
                    )
        return bool(self._scalable.add(key))

    def __contains__(self, fp: bytes) -> bool:
        key = fp.hex()
        if self._fixed is not None and key in self._fixed:
            return True
        return self._scalable is not None and key in self._scalable

    def _layers(self) -> list[Any]:
        layers = [self._fixed] if self._fixed is not None else []
        if self._scalable is not None:
            layers.extend(self._scalable.filters)
        return layers

    def __len__(self) -> int:
        return sum(int(layer.count) for layer in self._layers())

    @property
    def capacity(self) -> int:
        total = sum(int(layer.capacity) for layer in self._layers())
        return total or INITIAL_CAPACITY

    def estimated_error_rate(self) -> float:
        return _compound(
            _bloom_rate(int(layer.count), int(layer.num_bits), int(layer.num_slices)) for layer in self._layers()
        )

    def dumps(self) -> bytes:
        out = io.BytesIO()
        for tag, part in ((b"F", self._fixed), (b"S", self._scalable)):
            if part is None:
                continue
            buffer = io.BytesIO()
            part.tofile(buffer)
            data = buffer.getvalue()
            out.write(tag + struct.pack("<Q", len(data)) + data)
        return out.getvalue()

    @classmethod
    def loads(cls, payload: bytes, header: dict[str, Any], on_full: OnFull | None = None) -> PyBloomSeen:
        seen = cls(header["error_rate"], header["capacity"], on_full)
        seen._fixed = seen._scalable = None
        pos = 0
        while pos < len(payload):
            tag = payload[pos : pos + 1]
            if pos + 9 > len(payload):
                raise ValueError("truncated part header")
            (size,) = struct.unpack_from("<Q", payload, pos + 1)
            pos += 9
            data = payload[pos : pos + size]
            if len(data) != size:
                raise ValueError("truncated part")
            pos += size
            if tag == b"F" and seen._fixed is None and seen._scalable is None:
                seen._fixed = pybloom_live.BloomFilter.fromfile(io.BytesIO(data), size)
            elif tag == b"S" and seen._scalable is None:
                seen._scalable = pybloom_live.ScalableBloomFilter.fromfile(io.BytesIO(data))
            else:
                raise ValueError(f"unexpected part {tag!r}")
        if (seen._fixed is None) != (header["capacity"] == 0):
            raise ValueError("parts do not match the capacity in the header")
        if seen._fixed is None and seen._scalable is None:
            raise ValueError("no filter in the payload")
        return seen


# -- rbloom ----------------------------------------------------------------------------


def stable_hash(fp: bytes) -> int:
    """rbloom's hash of a fingerprint: a signed 128-bit integer, the same in every process.

    A request fingerprint is already a cryptographic digest (SHA-1 for Scrapy's
    fingerprinter), so its first 16 bytes are uniform; anything shorter, or a
    custom fingerprinter's readable key, goes through BLAKE2b first.
    """
    if len(fp) < 16:
        fp = hashlib.blake2b(fp, digest_size=16).digest()
    return int.from_bytes(fp[:16], "big", signed=True)


#: rbloom's ``hash_func`` for keys that are already :func:`stable_hash` integers (see RBloomSeen).
_SAME_INT = int


class _RLayer:
    __slots__ = ("bloom", "capacity", "count", "error_rate", "hashes")

    def __init__(self, capacity: int, error_rate: float, bloom: Any = None, count: int = 0) -> None:
        self.capacity, self.error_rate, self.count = capacity, error_rate, count
        self.bloom = bloom if bloom is not None else rbloom.Bloom(capacity, error_rate, _SAME_INT)
        # rbloom's own k: floor(m/n * ln 2) with m = -n ln(p) / ln(2)^2
        self.hashes = max(1, int(-math.log(error_rate) / math.log(2)))


class RBloomSeen:
    """rbloom Bloom filters in a chain: one of the configured capacity (or
    :data:`INITIAL_CAPACITY`), more chained behind it as it fills (see :func:`_layer_plan`).

    rbloom has no notion of full (past its expected items its rate just climbs),
    so the chain counts what it adds and opens the next layer itself. The
    fingerprint is hashed once per call (:func:`stable_hash`) and the layers get
    that integer; their ``hash_func`` is ``int``, which returns it unchanged
    without a Python frame (rbloom calls ``hash_func`` on every check).
    """

    name: ClassVar[str] = "rbloom"
    library: ClassVar[str | None] = "rbloom"

    def __init__(self, error_rate: float = 0.001, capacity: int = 0, on_full: OnFull | None = None) -> None:
        _check_params(error_rate, capacity)
        self.error_rate, self.configured_capacity = float(error_rate), capacity
        self._on_full = on_full
        self._layers: list[_RLayer] = [_RLayer(*_layer_plan(capacity, self.error_rate, 0))]

    def add(self, fp: bytes) -> bool:
        key = int.from_bytes(fp[:16], "big", signed=True) if len(fp) >= 16 else stable_hash(fp)  # inlined: hot
        layers = self._layers
        for layer in layers:
            if key in layer.bloom:
                return True
        last = layers[-1]
        if last.count >= last.capacity:
            if len(layers) == 1 and self.configured_capacity and self._on_full is not None:
                self._on_full(
                    f"the fixed Bloom filter is full ({last.capacity} fingerprints); larger ones are chained "
                    f"behind it, and checks get slower and the false-positive rate may reach 1.5x the "
                    f"configured {self.error_rate}: raise the capacity for the next job"
                )
            last = _RLayer(*_layer_plan(self.configured_capacity, self.error_rate, len(layers)))
            layers.append(last)
        last.bloom.add(key)
        last.count += 1
        return False

    def __contains__(self, fp: bytes) -> bool:
        key = int.from_bytes(fp[:16], "big", signed=True) if len(fp) >= 16 else stable_hash(fp)
        for layer in self._layers:  # noqa: SIM110 - a loop: any() over a generator is slower here
            if key in layer.bloom:
                return True
        return False

    def __len__(self) -> int:
        return sum(layer.count for layer in self._layers)

    @property
    def capacity(self) -> int:
        return sum(layer.capacity for layer in self._layers)

    def estimated_error_rate(self) -> float:
        return _compound(
            _bloom_rate(layer.count, int(layer.bloom.size_in_bits), layer.hashes) for layer in self._layers
        )

    def dumps(self) -> bytes:
        out = io.BytesIO()
        for layer in self._layers:
            data = bytes(layer.bloom.save_bytes())
            out.write(struct.pack("<QdQQ", layer.capacity, layer.error_rate, layer.count, len(data)) + data)
        return out.getvalue()

    @classmethod
    def loads(cls, payload: bytes, header: dict[str, Any], on_full: OnFull | None = None) -> RBloomSeen:
        seen = cls(header["error_rate"], header["capacity"], on_full)
        seen._layers = []
        pos, head = 0, struct.calcsize("<QdQQ")
        while pos < len(payload):
            if pos + head > len(payload):
                raise ValueError("truncated layer header")
            capacity, error_rate, count, size = struct.unpack_from("<QdQQ", payload, pos)
            pos += head
            data = payload[pos : pos + size]
            if len(data) != size:
                raise ValueError("truncated layer")
            pos += size
            if capacity <= 0 or not 0.0 < error_rate < 1.0:
                raise ValueError("bad layer parameters")
            bloom = rbloom.Bloom.load_bytes(data, _SAME_INT)
            seen._layers.append(_RLayer(capacity, error_rate, bloom, count))
        if not seen._layers:
            raise ValueError("no filter in the payload")
        return seen


#: Backends by name (``IDCRAWL_DUPEFILTER_BACKEND``).
BACKENDS: dict[str, type[ExactSeen] | type[PyBloomSeen] | type[RBloomSeen]] = {
    "pybloom": PyBloomSeen,
    "rbloom": RBloomSeen,
    "set": ExactSeen,
}


def make_backend(name: str, error_rate: float, capacity: int, on_full: OnFull | None = None) -> FingerprintSet:
    """A new, empty backend; :class:`SeenConfigError` names a bad value."""
    cls = BACKENDS.get(name)
    if cls is None:
        raise SeenConfigError("backend", name, f"must be one of {', '.join(sorted(BACKENDS))}")
    return cls(error_rate, capacity, on_full)


# -- files -----------------------------------------------------------------------------


def dump(backend: FingerprintSet, path: Path | str) -> int:
    """Write ``backend`` to ``path`` atomically (a temporary file, fsync, then
    ``os.replace``): a crash leaves the old file or the new one, never half of one.
    Returns the file's size."""
    path = Path(path)
    payload = backend.dumps()
    header = {
        "format": FORMAT,
        "backend": backend.name,
        "error_rate": backend.error_rate,
        "capacity": backend.configured_capacity,
        "count": len(backend),
        "payload_bytes": len(payload),
        "sha256": hashlib.sha256(payload).hexdigest(),
    }
    if backend.library:
        header["library"] = f"{backend.library} {LIBRARY_VERSIONS.get(backend.library, 'unknown')}"
    data = MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + payload
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(data)


def is_seen_file(path: Path | str) -> bool:
    """Whether ``path`` starts like a filter file (only its first bytes are read)."""
    with open(path, "rb") as fh:
        return fh.read(len(MAGIC)) == MAGIC


def load(path: Path | str, backend: str, on_full: OnFull | None = None) -> FingerprintSet:
    """Read a filter file written by :func:`dump` with ``backend``.

    Raises :class:`SeenFileError` (naming the file and what is wrong) for a file
    that is not a filter file, a newer format, another backend, a truncated or
    altered payload. The file is only read.
    """
    path = Path(path)
    data = path.read_bytes()
    if not data.startswith(MAGIC):
        raise SeenFileError(path, "not an idcrawl dupefilter file")
    end = data.find(b"\n", len(MAGIC))
    try:
        if end < 0:
            raise ValueError("no header line")
        header = json.loads(data[len(MAGIC) : end])
        if not isinstance(header, dict):
            raise ValueError("the header is not an object")
        version = header["format"]
        if not isinstance(version, int) or version > FORMAT or version < 1:
            raise SeenFileError(path, f"file format {version!r}: this idcrawl reads format {FORMAT}")
        stored = header["backend"]
        payload = data[end + 1 :]
        size, digest = int(header["payload_bytes"]), str(header["sha256"])
        error_rate, capacity = header["error_rate"], header["capacity"]
    except SeenFileError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise SeenFileError(path, f"corrupt header ({exc})") from None
    if stored != backend:
        raise SeenFileError(path, f"holds a {stored!r} filter, not {backend!r} (IDCRAWL_DUPEFILTER_BACKEND)")
    library = str(header.get("library") or "")
    if library:
        package, _, written = library.partition(" ")
        installed = LIBRARY_VERSIONS.get(package, "unknown")
        if "unknown" not in (written, installed) and written.split(".")[0] != installed.split(".")[0]:
            raise SeenFileError(
                path, f"written with {package} {written}, this is {package} {installed}, which may hash "
                f"differently: remove it (the next run starts a new filter)"
            )
    if len(payload) != size:
        raise SeenFileError(path, f"truncated or extended: {len(payload)} payload bytes, the header says {size}")
    if hashlib.sha256(payload).hexdigest() != digest:
        raise SeenFileError(path, "corrupt: the payload does not match its checksum")
    try:
        _check_params(error_rate, capacity)
        return BACKENDS[backend].loads(payload, header, on_full)
    except (ValueError, KeyError, TypeError, struct.error) as exc:
        raise SeenFileError(path, f"corrupt payload ({exc})") from None


# -- the crawl's rule ------------------------------------------------------------------


class Seen:
    """A backend plus the fingerprints scheduled but not yet answered (``pending``).

    ``seen_or_add`` is the dupefilter's question; ``fetched`` moves a
    fingerprint from pending into the backend once a response arrived; only the
    backend is saved (see the module docstring for why).
    """

    def __init__(self, backend: FingerprintSet, loaded: int = 0) -> None:
        self.backend = backend
        #: Fingerprints read from a previous run's file.
        self.loaded = loaded
        self.pending: set[bytes] = set()
        #: Fingerprints moved into the backend since the last save.
        self.unsaved = 0

    def __contains__(self, fp: bytes) -> bool:
        return fp in self.pending or fp in self.backend

    def seen_or_add(self, fp: bytes) -> bool:
        """True if ``fp`` was seen (this run, or fetched by a saved run); else remember it as pending."""
        if fp in self.pending or fp in self.backend:
            return True
        self.pending.add(fp)
        return False

    def add(self, fp: bytes) -> None:
        """Remember ``fp`` as pending without asking (a request scheduled by other means)."""
        if fp not in self.backend:
            self.pending.add(fp)

    def fetched(self, fp: bytes) -> None:
        """A response for ``fp`` arrived: it goes into the backend (and the next save)."""
        self.pending.discard(fp)
        if not self.backend.add(fp):
            self.unsaved += 1

    def is_pending(self, fp: bytes) -> bool:
        return fp in self.pending
