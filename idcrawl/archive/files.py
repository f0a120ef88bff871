"""The WARC files of one process: rotation by size, a warcinfo record per file, flush + fsync, the
repair of a cut last record left by a kill, and a CDXJ index beside each finished file (made by a
thread of its own: the crawl does not wait for it; :meth:`WarcFiles.close` does).

A file is written as ``NAME.warc.gz.open`` under an exclusive ``flock`` and renamed to ``NAME.warc.gz``
when finished; a ``.open`` file nobody holds was left by a killed process: it is cut after its last
whole record (each record is one gzip member), indexed and renamed by the next one that opens the folder.
"""

from __future__ import annotations

import fcntl
import functools
import io
import logging
import os
import socket
import threading
import warnings
import zlib
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any
from weakref import WeakKeyDictionary

from warcio.warcwriter import WARCWriter

from idcrawl.storage import fsync_directory

__all__ = ["ARCHIVES", "OPEN_SUFFIX", "WarcFiles", "complete_prefix", "index_missing", "repair_folder", "write_index"]

logger = logging.getLogger(__name__)

#: The suffix of a file still being written (Heritrix's convention).
OPEN_SUFFIX = ".open"
_CHUNK = 1 << 20
#: gzip's own default level: warcio's writer compresses at 9, which costs about twice the CPU for a
#: few percent of size on HTML (bench/warc.py)
GZIP_LEVEL = 6

#: The WARC files of each crawl writing some (crawler -> files; the middleware registers them, the
#: feeds' flush before a commit flushes them: :func:`idcrawl.feeds.flush_feeds`).
ARCHIVES: WeakKeyDictionary[Any, WarcFiles] = WeakKeyDictionary()


def complete_prefix(path: str | Path) -> int:
    """The length of the run of whole gzip members at the start of ``path`` (its whole records)."""
    end = 0
    with open(path, "rb") as file:
        pending = b""
        consumed = 0  # bytes fed to the member being read
        inflater = zlib.decompressobj(wbits=31)
        while True:
            chunk = pending or file.read(_CHUNK)
            pending = b""
            if not chunk:
                return end
            try:
                inflater.decompress(chunk)
            except zlib.error:
                return end
            consumed += len(chunk)
            if inflater.eof:
                rest = inflater.unused_data
                end += consumed - len(rest)
                consumed = 0
                inflater = zlib.decompressobj(wbits=31)
                pending = rest


#: The record types a CDXJ index lists, named rather than cdxj-indexer's default: py-wacz appends
#: warcinfo to that default list when imported, which would make the index depend on the process.
INDEXED = "response,revisit,resource,metadata"


@functools.cache
def _cdx_writer() -> Callable[..., Any]:
    """cdxj-indexer's writer, imported once; first called on the crawl's thread (:meth:`WarcFiles.finish`):
    the warnings filter it changes is process-wide, not for an indexing thread to touch."""
    with warnings.catch_warnings():  # its AMF reader imports pkg_resources (deprecated), irrelevant here
        warnings.simplefilter("ignore")
        from cdxj_indexer.main import write_cdx_index
    return write_cdx_index  # type: ignore[no-any-return]


def write_index(warc: str | Path) -> Path:
    """Write ``<warc>.cdxj`` beside a finished file (cdxj-indexer, sorted), by rename."""
    write_cdx_index = _cdx_writer()
    warc = Path(warc)
    target = warc.with_name(warc.name + ".cdxj")
    # a name of its own: two processes may index one file at once (a run repairing what a killed one left)
    temp = target.with_name(f"{target.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        with open(temp, "w", encoding="utf-8") as out:
            write_cdx_index(out, [str(warc)], {"sort": True, "dir_root": str(warc.parent), "records": INDEXED})
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)
    return target


def _finish(path: Path) -> Path:
    """``X.warc.gz.open`` -> ``X.warc.gz``, indexed."""
    final = path.with_name(path.name.removesuffix(OPEN_SUFFIX))
    os.replace(path, final)
    fsync_directory(path.parent)
    _index(final)
    return final


def _index(final: Path) -> None:
    try:
        write_index(final)
    except Exception as exc:  # an index can be made again from the file; the crawl goes on
        logger.warning("idcrawl: no CDXJ index for %s (%s)", final, exc)


def repair_folder(folder: Path, job: str) -> list[tuple[Path, int]]:
    """Finish the ``<job>-*.warc.gz.open`` files no running process holds: each is cut after its last
    whole record, indexed and renamed. Returns (file, bytes cut) of each."""
    repaired = []
    for path in sorted(folder.glob(f"{job}-*.warc.gz{OPEN_SUFFIX}")):
        try:
            with open(path, "r+b") as file:
                try:
                    fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue  # a running process writes it
                size = os.fstat(file.fileno()).st_size
                keep = complete_prefix(path)
                if keep < size:
                    file.truncate(keep)
                    file.flush()
                    os.fsync(file.fileno())
                    logger.warning("idcrawl: WARC file %s ended with a record cut short (a killed run): "
                                   "%d bytes cut", path.name, size - keep)
                final = _finish(path)
        except OSError as exc:
            logger.warning("idcrawl: WARC file %s left by a killed run cannot be repaired (%s)", path, exc)
            continue
        repaired.append((final, size - keep))
    return repaired


def index_missing(folder: Path, job: str) -> list[Path]:
    """Index the finished ``<job>-*.warc.gz`` files that have no ``.cdxj`` beside them (a run killed while
    its indexing thread worked); returns them."""
    missing = [path for path in sorted(folder.glob(f"{job}-*.warc.gz"))
               if not path.with_name(path.name + ".cdxj").exists()]
    for path in missing:
        _index(path)
    return missing


class WarcFiles:
    """The WARC files one process writes in ``folder``: ``<job>-<UTC time>-<host>-<pid>-<serial>.warc.gz``.

    ``info``: the warcinfo fields written first in each file (job, settings profile, software);
    ``max_size``: a file is finished once it reaches this many bytes (0: one file per run).
    """

    def __init__(self, folder: str | Path, job: str, info: Mapping[str, Any], max_size: int = 0) -> None:
        self.folder = Path(folder)
        self.job = job
        self.info = dict(info)
        self.max_size = max_size
        self.serial = 0
        self.stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S%f")
        self.host = socket.gethostname().replace("-", "_") or "host"
        self.file: IO[bytes] | None = None
        self.path: Path | None = None
        self.writer: WARCWriter | None = None
        self.finished: list[Path] = []
        self.bytes = 0
        self.unsynced = False
        #: the thread that indexes finished files, started by the first one (the crawl does not wait for it)
        self._indexer: ThreadPoolExecutor | None = None

    def open(self) -> list[tuple[Path, int]]:
        """Make the folder; finish what killed runs of this job left (:func:`repair_folder`, and
        :func:`index_missing`: a run killed while indexing)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        repaired = repair_folder(self.folder, self.job)
        for path in index_missing(self.folder, self.job):
            logger.info("idcrawl: WARC file %s had no CDXJ index (a killed run): indexed", path.name)
        return repaired

    def _name(self) -> str:
        return f"{self.job}-{self.stamp}-{self.host}-{os.getpid()}-{self.serial:05d}.warc.gz"

    def _new_file(self) -> WARCWriter:
        while True:  # a name no other writer of this process took (watch waves: one writer each)
            self.serial += 1
            name = self._name()
            self.path = self.folder / (name + OPEN_SUFFIX)
            if (self.folder / name).exists():
                continue
            try:
                file = open(self.path, "xb")  # noqa: SIM115 - held until the file is finished
            except FileExistsError:
                continue
            break
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.file = file
        self.writer = WARCWriter(io.BytesIO(), gzip=False, warc_version="WARC/1.1")  # builds the records
        self._append(self.writer.create_warcinfo_record(name, self.info))
        return self.writer

    def _append(self, record: Any) -> None:
        """One record as one gzip member (what a reader, the repair and a CDXJ offset count on)."""
        assert self.file is not None
        plain = io.BytesIO()
        WARCWriter(plain, gzip=False, warc_version="WARC/1.1").write_record(record)
        packer = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
        self.file.write(packer.compress(plain.getbuffer()) + packer.flush())

    def current(self) -> WARCWriter:
        """What builds the records of the file being written (a new file first if none is)."""
        return self.writer if self.writer is not None else self._new_file()

    @property
    def filename(self) -> str:
        """The finished name of the file being written (what a CDXJ line and a capture will name)."""
        return self.path.name.removesuffix(OPEN_SUFFIX) if self.path is not None else ""

    def write(self, *records: Any) -> None:
        """Write records to the current file (one gzip member each); rotate past ``max_size``."""
        self.current()
        assert self.file is not None
        before = self.file.tell()
        for record in records:
            self._append(record)
        self.bytes += self.file.tell() - before
        self.unsynced = True
        if self.max_size and self.file.tell() >= self.max_size:
            self.finish()

    def flush(self) -> None:
        """Flush and fsync the file being written: every record written so far is on disk."""
        if self.file is not None and self.unsynced:
            self.file.flush()
            os.fsync(self.file.fileno())
        self.unsynced = False

    def finish(self) -> None:
        """Finish the file being written: synced, closed, renamed; its index is made by the indexing
        thread (:meth:`close` waits for it)."""
        if self.file is None or self.path is None:
            return
        self.file.flush()
        os.fsync(self.file.fileno())
        path, file = self.path, self.file
        self.file = self.writer = self.path = None
        self.unsynced = False
        final = path.with_name(path.name.removesuffix(OPEN_SUFFIX))
        os.replace(path, final)  # under the lock: no repairing process takes it meanwhile
        file.close()
        fsync_directory(final.parent)
        if self._indexer is None:
            _cdx_writer()  # imported here, not in the thread
            self._indexer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="idcrawl-cdxj")
        self._indexer.submit(_index, final)
        self.finished.append(final)

    def close(self) -> None:
        """Finish the file being written and wait until every finished file has its index."""
        try:
            self.finish()
        finally:
            indexer, self._indexer = self._indexer, None
            if indexer is not None:
                indexer.shutdown(wait=True)
