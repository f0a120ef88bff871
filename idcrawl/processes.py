"""Process identity: a name unique to this process (a fleet worker, a state owner key's holder), and whether
the process a name stands for has ended (a killed holder's key is taken over at once)."""

from __future__ import annotations

import hashlib
import os
import socket
import uuid
from functools import cache
from pathlib import Path

__all__ = ["process_space", "worker_gone", "worker_id"]


def worker_id() -> str:
    """A name unique to this process: host, pid, a random tail (a restarted worker is a new one) and
    :func:`process_space` (which processes can tell whether this one is still running)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}:{process_space()}"


@cache
def process_space() -> str:
    """A short hash of this machine's boot id and pid namespace (Linux): two processes with the same
    one see each other's pids. ``""`` where they cannot be read (then no process is judged by pid)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""
    return hashlib.sha256(f"{socket.gethostname()}|{boot}|{namespace}".encode()).hexdigest()[:8]


def worker_gone(worker: str) -> bool:
    """Whether the worker named ``worker`` (a :func:`worker_id`) is a process of this machine and pid
    namespace that has ended (no such pid, or a zombie). False whenever it cannot be known for sure: a
    worker of another machine or container, a pid reused since, no ``/proc``."""
    host, _, rest = worker.partition(":")
    pid_text, _, rest = rest.partition(":")
    space = rest.partition(":")[2]
    here = process_space()
    if not here or space != here or host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # exists (another user's process, say)
    try:  # a killed process its parent has not reaped yet: "Z" in /proc/<pid>/stat
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("Z", "X")
