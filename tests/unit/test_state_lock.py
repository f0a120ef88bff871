"""``idcrawl.state.lock.FileLock``: one holder at a time, named in the refusal; a clean release deletes the file,
a killed holder's name stays for the next one to report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from idcrawl.state.lock import FileLock, Holder, Locks, StateLocked, lock_path


def test_a_second_lock_on_one_file_is_refused_naming_the_holder_and_taken_after_release(tmp_path: Path) -> None:
    path = lock_path(tmp_path / "state.sqlite")
    first = FileLock(path, "state file 'x'")
    first.acquire()
    assert first.left_by is None
    held = json.loads(path.read_text())
    assert held["pid"] == os.getpid() and held["host"] and held["since"].endswith("Z")
    second = FileLock(path, "state file 'x'")  # another open file description: flock refuses it, even here
    with pytest.raises(StateLocked) as refused:
        second.acquire()
    message = str(refused.value)
    assert message.startswith(f"state file 'x' is in use by another crawl (held by pid {os.getpid()} on host ")
    assert "\n" not in message and not second.held
    first.release()
    assert not path.exists(), "a clean release leaves no lock file"
    second.acquire()
    assert second.left_by is None
    second.release()


def test_a_killed_holder_leaves_its_name_and_its_lock_is_free(tmp_path: Path) -> None:
    path = lock_path(tmp_path / "state.sqlite")
    code = ("import sys; from pathlib import Path; from idcrawl.state.lock import FileLock; "
            "FileLock(Path(sys.argv[1]), 'x').acquire(); import os; os._exit(0)")  # no clean-up, as a SIGKILL
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, timeout=60)
    dead = Holder.parse(path.read_text())
    assert dead is not None and dead.pid != os.getpid()
    lock = FileLock(path, "x")
    lock.acquire()
    assert lock.left_by == dead
    lock.release()


def test_locks_take_each_key_once_and_release_all(tmp_path: Path) -> None:
    locks = Locks()
    one = FileLock(tmp_path / "a.lock", "a")
    assert locks.take("a", one) is True
    assert locks.take("a", FileLock(tmp_path / "a.lock", "a")) is False  # watch mode's next wave: held already
    assert locks.take("b", FileLock(tmp_path / "b.lock", "b")) is True
    locks.release()
    assert not one.held and locks.held == {}
    again = FileLock(tmp_path / "a.lock", "a")
    again.acquire()
    again.release()


def test_a_lock_file_that_cannot_be_created_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(Exception, match=r"^x: cannot create its lock file '.*file/sub/s.lock': ") as error:
        FileLock(tmp_path / "file" / "sub" / "s.lock", "x").acquire()
    assert not isinstance(error.value, StateLocked)


def test_a_taker_that_opened_the_file_its_holder_deletes_on_release_locks_the_new_one(tmp_path: Path) -> None:
    path = tmp_path / "s.lock"
    holder = FileLock(path, "x")
    holder.acquire()
    late = FileLock(path, "x")
    opened = late._open  # the late taker opens the old file, then its holder releases (deletes) it

    def open_then_release() -> int:
        fd = opened()
        holder.release()
        late._open = opened  # type: ignore[method-assign]
        return fd

    late._open = open_then_release  # type: ignore[method-assign]
    late.acquire()
    other = FileLock(path, "x")
    with pytest.raises(StateLocked):  # one holder: the late taker locked the file that is at the path now
        other.acquire()
    late.release()
