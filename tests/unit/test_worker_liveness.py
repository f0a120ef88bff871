"""Whether a worker of the job is a process of this machine that has ended (a joining worker's take-over)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from idcrawl.processes import process_space, worker_gone, worker_id

pytestmark = pytest.mark.skipif(not process_space(), reason="no /proc: processes are never judged by pid")


def name(pid: int, space: str | None = None, host: str | None = None) -> str:
    return f"{host or socket.gethostname()}:{pid}:0123abcd:{process_space() if space is None else space}"


def test_a_worker_id_names_host_pid_and_the_process_space() -> None:
    host, pid, tail, space = worker_id().split(":")
    assert (host, int(pid), len(tail), space) == (socket.gethostname(), os.getpid(), 8, process_space())
    assert not worker_gone(worker_id())


def test_an_ended_process_is_gone_whether_reaped_or_a_zombie() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not worker_gone(name(child.pid))
        child.kill()
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # ended, not reaped: a zombie
        assert worker_gone(name(child.pid))
    finally:
        child.kill()
        child.wait()
    assert worker_gone(name(child.pid))


def test_a_worker_of_another_machine_or_pid_namespace_is_never_judged() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert worker_gone(name(child.pid))
    assert not worker_gone(name(child.pid, space="ffffffff"))
    assert not worker_gone(name(child.pid, space=""))
    assert not worker_gone(name(child.pid, host="elsewhere"))
    assert not worker_gone(f"{socket.gethostname()}:{child.pid}:0123abcd")  # an id of an older idcrawl
    assert not worker_gone("not a worker id")
