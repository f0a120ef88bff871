"""One process per state: a lock that dies with its holder, taken before anything is written.

A SQLite state and a ``JOBDIR`` are guarded by ``fcntl.flock`` on a file beside them
(``<state>.lock``), which holds who has it (pid, host, since) for the refusal line. The Redis state
backend is guarded by an owner key with a lease (``IDCRAWL_STATE_LEASE``), renewed while the crawl
runs. Readers (``scrapy idplan``, ...) take no lock.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from idcrawl.core.safetext import safe
from idcrawl.processes import worker_gone, worker_id
from idcrawl.state.base import StateError
from idcrawl.state.keys import JobKeys

__all__ = ["FileLock", "Holder", "Locks", "RedisOwner", "StateLocked", "lock_path", "state_owner"]

#: Compare-and-renew and compare-and-delete of the owner key (only its holder's value may).
_RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
_TAKE_OVER = ("if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) end "
              "return redis.call('set', KEYS[1], ARGV[2], 'NX', 'PX', ARGV[3])")


class StateLocked(StateError):
    """Another process holds the state; the message names it."""


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds (or last held) a lock."""

    pid: int | None
    host: str
    since: str

    @classmethod
    def me(cls) -> Holder:
        return cls(os.getpid(), socket.gethostname(), datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))

    @classmethod
    def parse(cls, raw: bytes | str | None) -> Holder | None:
        try:
            data = json.loads(raw or "")
            return cls(int(data["pid"]), str(data["host"]), str(data["since"]))
        except (ValueError, TypeError, KeyError):
            return None

    def to_json(self, **more: Any) -> str:
        return json.dumps({"pid": self.pid, "host": self.host, "since": self.since, **more})

    def __str__(self) -> str:
        return safe(f"pid {self.pid} on host {self.host}, since {self.since}")


def lock_path(path: str | Path) -> Path:
    """The lock file of a state file (or of a JOBDIR's state file): ``<path>.lock``."""
    return Path(f"{path}.lock")


class FileLock:
    """``flock(LOCK_EX | LOCK_NB)`` on ``path``; the kernel releases it when the holder dies.

    A clean release deletes the file while still holding it (a taker checks that the file it locked is
    still the one at ``path``), so a file that names a holder was left by one that was killed.
    """

    def __init__(self, path: Path, what: str) -> None:
        self.path = path
        self.what = what  # e.g. "state file '/x/idcrawl-state.sqlite'", for the refusal line
        self._file: Any = None  # the open lock file (closed by the garbage collector too)
        #: the holder a killed run left in the file (None: it was released cleanly, or is new)
        self.left_by: Holder | None = None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`StateLocked` naming its holder (nothing is written then)."""
        while self._file is None:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = Holder.parse(_read(fd))
                os.close(fd)
                who = f"held by {holder}" if holder else "held by a process that has not written its name yet"
                raise StateLocked(f"{self.what} is in use by another crawl ({who}; lock {str(self.path)!r}); "
                                  "only one process may write a state: wait for it to end, or stop it") from None
            if not self._same_file(fd):  # its holder deleted it on release in between: lock the new one
                os.close(fd)
                continue
            self._file = os.fdopen(fd, "r+b", buffering=0)
            self.left_by = Holder.parse(_read(fd))
            os.ftruncate(fd, 0)
            os.pwrite(fd, Holder.me().to_json().encode() + b"\n", 0)

    def _open(self) -> int:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StateError(f"{self.what}: cannot create its lock file {str(self.path)!r}: "
                             f"{exc.strerror or exc}") from None

    def _same_file(self, fd: int) -> bool:
        try:
            at_path = os.stat(self.path)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (held.st_dev, held.st_ino) == (at_path.st_dev, at_path.st_ino)

    def release(self) -> None:
        if self._file is not None:
            file, self._file = self._file, None
            try:
                self.path.unlink()  # while still locked: see acquire()
            except OSError:
                with contextlib.suppress(OSError):
                    os.ftruncate(file.fileno(), 0)
            file.close()  # closing the last descriptor releases the lock

    @property
    def held(self) -> bool:
        return self._file is not None


def _read(fd: int) -> bytes:
    try:
        return os.pread(fd, 4096, 0)
    except OSError:
        return b""


class RedisOwner:
    """The owner key of a job's state in Redis: ``SET NX PX lease``, renewed by :meth:`renew`.

    A key left by a killed holder expires after the lease; one of this machine and pid namespace
    whose process is gone (:func:`idcrawl.processes.worker_gone`) is taken over at once.
    """

    def __init__(self, client: Any, keys: JobKeys, lease: float, what: str, *, fleet_lease: float = 0.0) -> None:
        """The owner key of the job ``keys`` names. ``fleet_lease``: a distributed job's worker lease; its
        live workers (heartbeats in the job's ``workers`` set fresher than that) refuse the key too."""
        self.client, self.keys, self.what = client, keys, what
        self.key = keys.owner
        self.fleet_lease_ms = int(fleet_lease * 1000)
        self.lease_ms = max(1, int(lease * 1000))
        self.me = Holder.me()
        self.value = self.me.to_json(worker=worker_id())
        self.held = False
        #: the killed holder whose key this one took over at once (None: the key was free)
        self.left_by: Holder | None = None

    def acquire(self) -> None:
        """Take the key, or raise :class:`StateLocked` naming its holder and when its lease ends."""
        import redis

        try:
            self._acquire()
            self._no_fleet()
        except redis.RedisError as exc:
            raise StateError(f"{self.what}: cannot take its owner key {self.key!r}: {safe(exc)}") from None

    def _acquire(self) -> None:
        if self.client.set(self.key, self.value, nx=True, px=self.lease_ms):
            self.held = True
            return
        raw, ttl = self.client.get(self.key), self.client.pttl(self.key)
        data = _json(raw)
        holder = Holder.parse(raw)
        if holder is not None and worker_gone(str(data.get("worker", ""))):
            if self.client.eval(_TAKE_OVER, 1, self.key, raw, self.value, self.lease_ms):
                self.held, self.left_by = True, holder
                return
        elif raw is None and self.client.set(self.key, self.value, nx=True, px=self.lease_ms):
            self.held = True  # it expired in between
            return
        who = f"held by {holder}" if holder else "held by another process"
        lease = f"; its lease ends in {max(ttl, 0) / 1000:.0f} s if its holder is gone" if ttl and ttl > 0 else ""
        raise StateLocked(f"{self.what} is in use by another crawl ({who}{lease}; owner key {self.key!r}); "
                          "only one process may write a state: wait for it to end, or stop it")

    def _no_fleet(self) -> None:
        """A distributed job's workers write the same keys: refused while one of them is alive."""
        if not self.fleet_lease_ms:
            return
        from idcrawl.state.redis import redis_now_ms  # the Redis owner only: no import for file locks

        now_ms = redis_now_ms(self.client, self.keys.workers)
        alive = self.client.zrangebyscore(self.keys.workers, now_ms - self.fleet_lease_ms, "+inf")
        if alive:
            self.release()
            raise StateLocked(f"{self.what} is in use by {len(alive)} live worker(s) of a distributed job "
                              f"(such as {safe(_text(alive[0]))}); only one process may write a state: "
                              "stop them, or crawl with the fleet's settings")

    def renew(self) -> bool:
        """Extend the lease; False if the key is no longer this process's (expired and taken)."""
        if not self.held:
            return False
        if self.client.eval(_RENEW, 1, self.key, self.value, self.lease_ms):
            return True
        # expired while this process could not reach Redis: take it again if nobody else did
        return bool(self.client.set(self.key, self.value, nx=True, px=self.lease_ms))

    def release(self) -> None:
        if self.held:
            self.held = False
            self.client.eval(_RELEASE, 1, self.key, self.value)


def state_owner(client: Any, key: str) -> Holder | None:
    """The live holder of an owner key (a distributed worker checks it before joining), or None."""
    raw = client.get(key)
    if raw is None or worker_gone(str(_json(raw).get("worker", ""))):
        return None
    return Holder.parse(raw) or Holder(None, "?", "?")


def _text(value: bytes | str) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _json(raw: bytes | str | None) -> dict[str, Any]:
    try:
        data = json.loads(raw or "")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


class Locks:
    """The locks one crawl holds, each taken once (watch mode's waves reopen the state) until :meth:`release`
    (at the latest when the interpreter exits: a crawl refused later than its locks releases them too)."""

    def __init__(self) -> None:
        self.held: dict[str, FileLock | RedisOwner] = {}
        atexit.register(self.release)

    def take(self, key: str, lock: FileLock | RedisOwner) -> bool:
        """Acquire ``lock`` unless one under ``key`` is held already (False then); StateError if refused."""
        if key in self.held:
            return False
        lock.acquire()
        self.held[key] = lock
        return True

    def release(self) -> None:
        for lock in self.held.values():
            with contextlib.suppress(Exception):  # a Redis gone at close: the lease expires by itself
                lock.release()
        self.held.clear()
