"""Which cmake and ninja a build uses.

The cmake is, in order: the ``cmake`` option / ``$MLF_CMAKE``; a system cmake >= 3.20
(``/usr/bin``, ``/usr/local/bin``, then PATH); the cmake of the PyPI ``cmake`` package (its
binary directly, not the Python wrapper). Ninja is used when it is installed, from PATH or
the PyPI ``ninja`` package.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import List, Optional, Tuple

from ..errors import BuildError

MIN_CMAKE = (3, 20)
CMAKE_ENV = "MLF_CMAKE"
_VERSION_RE = re.compile(r"cmake version (\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class CMakeTool:
    path: str
    version: Tuple[int, int, int]

    def __str__(self) -> str:
        return f"{self.path} ({'.'.join(map(str, self.version))})"


def _version_of(path: str) -> Optional[Tuple[int, int, int]]:
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = _VERSION_RE.search(out)
    if match is None:
        return None
    return (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))


def _is_python_wrapper(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            head = handle.read(128)
    except OSError:
        return False
    return head.startswith(b"#!") and b"python" in head.split(b"\n", 1)[0]


def _pypi_cmake() -> Optional[str]:
    try:
        import cmake  # the PyPI wheel

        bin_dir = getattr(cmake, "CMAKE_BIN_DIR", None)
    except ImportError:
        return None
    if bin_dir:
        candidate = Path(bin_dir) / "cmake"
        if candidate.is_file():
            return str(candidate)
    return None


@lru_cache(maxsize=8)
def find_cmake(preferred: Optional[str] = None) -> CMakeTool:
    """The cmake to use (see the module docstring); BuildError when none is usable."""
    candidates: List[str] = []
    chosen = preferred or os.environ.get(CMAKE_ENV)
    if chosen:
        found = shutil.which(chosen) or chosen
        version = _version_of(found)
        if version is None:
            raise BuildError(f"cmake {chosen!r} does not run (cmake option or ${CMAKE_ENV})")
        return CMakeTool(found, version)
    for system in ("/usr/bin/cmake", "/usr/local/bin/cmake"):
        if os.access(system, os.X_OK):
            candidates.append(system)
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        path = os.path.join(directory, "cmake")
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            candidates.append(path)
    pypi = _pypi_cmake()
    if pypi:
        candidates.append(pypi)
    seen = set()
    too_old = []
    for candidate in candidates:
        real = os.path.realpath(candidate)
        if real in seen:
            continue
        seen.add(real)
        if _is_python_wrapper(real):
            continue  # the PyPI wrapper script: its binary is in the candidates already
        version = _version_of(candidate)
        if version is None:
            continue
        if version[:2] >= MIN_CMAKE:
            return CMakeTool(candidate, version)
        too_old.append(f"{candidate} {'.'.join(map(str, version))}")
    raise BuildError(
        "no usable cmake >= 3.20 found" + (f" (too old: {', '.join(too_old)})" if too_old else ""),
        hint="pip install cmake, or install CMake 3.20+ from your distribution",
    )


@lru_cache(maxsize=1)
def find_ninja() -> Optional[str]:
    found = shutil.which("ninja")
    if found:
        return found
    try:
        import ninja  # PyPI wheel, when present

        bin_dir = getattr(ninja, "BIN_DIR", None)
        if bin_dir and (Path(bin_dir) / "ninja").is_file():
            return str(Path(bin_dir) / "ninja")
    except ImportError:
        pass
    return None
