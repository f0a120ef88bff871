"""Print "X.Y PATH" of the newest Python on this machine newer than the one running this, or nothing.

`make test-newest` (Makefile) runs the unit tier and the floor tier's crawl tests on it. Looked for:
python3.N on PATH and pyenv's versions ($PYENV_ROOT or ~/.pyenv); each must run and have venv and
ensurepip (Debian's python3.N without python3.N-venv has not). NEWEST_PYTHON=PATH picks one by hand;
NEWEST_PYTHON= (empty) skips the tier.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
from pathlib import Path

PROBE = "import sys, venv, ensurepip; print('%d.%d' % sys.version_info[:2])"


def candidates() -> list[str]:
    found: list[str] = []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if "shims" not in folder:  # pyenv's shims answer for the pyenv version of the folder, not their name
            found += glob.glob(os.path.join(folder, "python3.[0-9]*"))
    pyenv = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    found += glob.glob(os.path.join(pyenv, "versions", "3.*", "bin", "python3"))
    return [path for path in found if re.search(r"python3(\.\d+)?$", path)]


def version_of(python: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=20, check=False)
    except OSError:
        return None
    match = re.fullmatch(r"(\d+)\.(\d+)\s*", out.stdout) if out.returncode == 0 else None
    return (int(match[1]), int(match[2])) if match else None


def main() -> None:
    chosen = os.environ.get("NEWEST_PYTHON")
    if chosen is not None:
        version = version_of(chosen) if chosen else None
        if chosen and version is None:
            sys.exit(f"NEWEST_PYTHON={chosen} does not run, or has no venv/ensurepip")
        if version:
            print(f"{version[0]}.{version[1]} {chosen}")
        return
    best: tuple[tuple[int, int], str] | None = None
    for python in sorted(set(candidates())):
        version = version_of(python)
        if version and version > sys.version_info[:2] and (best is None or version > best[0]):
            best = (version, python)
    if best:
        print(f"{best[0][0]}.{best[0][1]} {best[1]}")


if __name__ == "__main__":
    main()
