"""Content fingerprints: exact duplicates, near-duplicates and learned soft 404s.

No Scrapy; ``datasketch`` is imported on first use only. The three questions and the thresholds:
docs/architecture.md, "Module notes" (and docs/outcomes.md, docs/dedup.md).
"""

from __future__ import annotations

import functools
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lxml import etree
from lxml import html as lxml_html

__all__ = [
    "ITEM_SIGNATURE_KEY",
    "NUM_PERM",
    "SHINGLE_WORDS",
    "ContentIndex",
    "Match",
    "SoftPage",
    "html_text",
    "jaccard",
    "shingles",
    "signature",
    "visible_text",
    "words",
]

#: Words per shingle. 3-word shingles tell apart pages that share most of
#: their vocabulary (boilerplate) but say different things; single words would not.
SHINGLE_WORDS = 3
#: MinHash permutations: the estimate's standard error is about
#: sqrt(J (1 - J) / NUM_PERM), 0.03 at J = 0.85 with 128.
NUM_PERM = 128
#: Seed of the MinHash permutations: signatures are comparable across runs and processes.
MINHASH_SEED = 1
#: The item key on which the spider hands a page's MinHash signature to the
#: ``ContentDuplicates`` pipeline (items do not carry the body); the pipeline removes it.
ITEM_SIGNATURE_KEY = "_idcrawl_minhash"
#: Bits of a packed first-item value that hold the target's index.
_TARGET_BITS = 20

#: Text nodes a reader sees: not inside script, style, noscript or template.
_VISIBLE_TEXT = etree.XPath(
    "//text()[not(ancestor::script or ancestor::style or ancestor::noscript or ancestor::template)]",
    smart_strings=False,  # plain strings: smart ones keep their whole tree alive
)
_WORD = re.compile(r"\w+")
_DIGIT = re.compile(r"\d")


# -- text ---------------------------------------------------------------------------------


def visible_text(root: Any) -> str:
    """The visible text of a parsed lxml HTML tree (``response.selector.root``), space-joined."""
    try:
        nodes = _VISIBLE_TEXT(root)
    except (TypeError, ValueError, etree.XPathError):  # not an element (an empty document)
        return ""
    return " ".join(str(node) for node in nodes) if isinstance(nodes, list) else ""


def html_text(body: bytes, encoding: str | None = None) -> str:
    """The visible text of an HTML body (parsed here, as parsel would)."""
    body = body.strip().replace(b"\x00", b"")
    if not body:
        return ""
    parser = lxml_html.HTMLParser(recover=True, encoding=encoding, huge_tree=True)
    root = etree.fromstring(body, parser=parser)
    return "" if root is None else visible_text(root)


def words(text: str, *, normalise_digits: bool = False) -> list[str]:
    """Lower-cased words of a text; with ``normalise_digits`` words with a digit are left out.

    That makes the soft-404 page of id 1052 requested at 2026-11-26T04:06:37Z
    equal to that of id 7 requested at 1764130000.5: ids, times, counters and
    their formats (which split into a varying number of words) all drop out.
    """
    found = _WORD.findall(text.lower())
    if normalise_digits:
        return [word for word in found if _DIGIT.search(word) is None]
    return found


def shingles(tokens: list[str], size: int = SHINGLE_WORDS) -> frozenset[int]:
    """32-bit hashes of the runs of ``size`` consecutive words (a shorter text is one shingle).

    CRC-32 is stable across processes (unlike ``hash()``) and costs a tenth of
    a sha1; two shingles that differ in at most 4 bytes never collide.
    """
    if not tokens:
        return frozenset()
    if len(tokens) <= size:
        return frozenset({zlib.crc32(" ".join(tokens).encode())})
    return frozenset(
        zlib.crc32(" ".join(tokens[i : i + size]).encode()) for i in range(len(tokens) - size + 1)
    )


def jaccard(a: frozenset[int], b: frozenset[int]) -> float:
    """|a & b| / |a | b|; two empty sets are 1.0 (the same empty page)."""
    if not a and not b:
        return 1.0
    common = len(a & b)
    return common / (len(a) + len(b) - common)


# -- MinHash (datasketch, imported on first use) --------------------------------------------


@functools.cache
def _template() -> Any:
    """One MinHash whose permutations every signature reuses (generating them costs more than hashing a page)."""
    from datasketch import MinHash

    return MinHash(num_perm=NUM_PERM, seed=MINHASH_SEED)


def _identity(value: int) -> int:
    return value


def signature(hashes: Iterable[int]) -> Any:
    """The MinHash (``datasketch.MinHash``) of a set of 32-bit shingle hashes."""
    from datasketch import MinHash

    template = _template()
    minhash = MinHash(
        num_perm=NUM_PERM, seed=MINHASH_SEED, hashfunc=_identity,
        permutations=template.permutations, scheme=template.scheme,
    )
    minhash.update_batch(list(hashes))
    return minhash


def _similarity(a: Any, b: Any) -> float:
    """Estimated Jaccard similarity of two signatures' hash values (equal positions / positions)."""
    import numpy

    return float(numpy.count_nonzero(a == b)) / len(a)


# -- the content index (exact + near) ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Match:
    """An earlier item with the same (``exact``) or nearly the same (``near``) content."""

    kind: str  # "exact" | "near"
    target: str
    id: int
    similarity: float = 1.0


class ContentIndex:
    """The first item of each content seen in one crawl.

    ``near_threshold`` 0 keeps exact duplicates only (checksums); above 0,
    items that come with a signature are also checked for near-duplicates:
    an LSH query returns candidates and the best one whose estimated
    similarity is >= the threshold is the match (ties: the earliest).
    """

    def __init__(self, near_threshold: float = 0.0) -> None:
        if not 0.0 <= near_threshold <= 1.0:
            raise ValueError(f"near_threshold must be in [0, 1], not {near_threshold!r}")
        self.near_threshold = near_threshold
        self._first: dict[bytes, int] = {}  # checksum digest -> id << _TARGET_BITS | target index
        self._targets: list[str] = []
        self._target_index: dict[str, int] = {}
        self._lsh: Any = None
        self._near: list[tuple[int, Any]] = []  # LSH key -> (packed first item, hash values)
        if near_threshold > 0:
            from datasketch import MinHashLSH

            self._lsh = MinHashLSH(threshold=near_threshold, num_perm=NUM_PERM)

    def __len__(self) -> int:
        """Distinct contents (checksums) remembered."""
        return len(self._first)

    def check(self, target: str, id_: int, checksum: str, minhash: Any = None) -> Match | None:
        """The earlier item this one duplicates, or None (and it is remembered as a first)."""
        key = _digest(checksum)
        packed = self._first.get(key)
        if packed is not None:
            return Match("exact", *self._unpack(packed))
        packed = self._pack(target, id_)
        self._first[key] = packed
        if self._lsh is None or minhash is None:
            return None
        match = self._near_match(minhash)
        self._lsh.insert(len(self._near), minhash, check_duplication=False)
        self._near.append((packed, minhash.hashvalues))
        return match

    def _near_match(self, minhash: Any) -> Match | None:
        best: tuple[float, int] | None = None
        values = minhash.hashvalues
        for key in self._lsh.query(minhash):
            similarity = _similarity(values, self._near[key][1])
            if similarity >= self.near_threshold and (best is None or (-similarity, key) < (-best[0], best[1])):
                best = (similarity, key)
        if best is None:
            return None
        target, id_ = self._unpack(self._near[best[1]][0])
        return Match("near", target, id_, best[0])

    def _pack(self, target: str, id_: int) -> int:
        index = self._target_index.get(target)
        if index is None:
            index = self._target_index[target] = len(self._targets)
            if index >= 1 << _TARGET_BITS:
                raise ValueError(f"more than {1 << _TARGET_BITS} targets")
            self._targets.append(target)
        return id_ << _TARGET_BITS | index

    def _unpack(self, packed: int) -> tuple[str, int]:
        return self._targets[packed & ((1 << _TARGET_BITS) - 1)], packed >> _TARGET_BITS


def _digest(checksum: str) -> bytes:
    """20 bytes for a sha1 hex digest (53 bytes as a Python object instead of 89); any other text as is."""
    try:
        return bytes.fromhex(checksum)
    except ValueError:
        return checksum.encode()


# -- learned soft 404s --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SoftPage:
    """The fingerprint of a site's "not found" page, learned from a probe.

    Built from the page's visible text with digits normalised; compare other
    pages' texts with :meth:`similarity`.
    """

    shingles: frozenset[int]

    @classmethod
    def learn(cls, text: str) -> SoftPage | None:
        """The fingerprint of a probe page's text, or None if it has no words (nothing to learn)."""
        found = shingles(words(text, normalise_digits=True))
        return cls(found) if found else None

    def similarity(self, text: str) -> float:
        """Jaccard similarity (0..1) of a page's text to the learned page, digits normalised alike."""
        return jaccard(self.shingles, shingles(words(text, normalise_digits=True)))
