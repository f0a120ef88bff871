"""A small file system a test mounts itself (a tmpfs; root only, as CI runs), for full and read-only disks."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def mounted_tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``192k``, ``48m``) mounted at ``path`` (made here), unmounted on exit; the
    test is skipped with the reason where it cannot be mounted."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    if shutil.which("mount") is None or shutil.which("umount") is None:
        pytest.skip("mount/umount not installed")
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def remount(path: Path, options: str) -> None:
    """Mount options changed in place (``size=64m``: space freed; ``ro``: read-only)."""
    subprocess.run(["mount", "-o", f"remount,{options}", str(path)], check=True)
