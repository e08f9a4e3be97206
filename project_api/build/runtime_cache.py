"""The cache of built runtime libraries that generated projects share.

A project's CMakeLists.txt keys its runtime library (``runtime/mlf_runtime_cache.cmake``
says over what) and, given ``-DMLF_RUNTIME_CACHE=<dir>``, links one an earlier project built
instead of compiling it again: an AutoTVM trial, a ``matrix`` cell or a rebuilt demo then
compiles only its own model. The directory is ``<cache>/runtime`` under the dependency
cache's root (``$MLF_PROJECT_CACHE``, ``$XDG_CACHE_HOME/mlf-project-api``, ...);
``$MLF_PROJECT_RUNTIME_CACHE`` names another, or ``off`` compiles every project's runtime
from its own sources. The newest :data:`KEEP` entries are kept.

The build itself may only read the cache (it runs confined, see :mod:`project_api.sandbox`):
a miss stages the library it built in the build directory, and :func:`after_build`, in the
trusted parent, stores it — unless a dependency of the project ran its own CMake code, which
could have changed how the library was built.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Dict, Optional

from ..coercion import OFF_WORDS
from ..resolve.cache import default_cache_dir
from ..resolve.recipes import runs_own_cmake

ENV = "MLF_PROJECT_RUNTIME_CACHE"
CACHE_ENTRY = "MLF_RUNTIME_CACHE"
KEEP = 64
_HIT = re.compile(r"mlf-runtime-cache: hit (.+)$", re.MULTILINE)
_MISS = re.compile(r"mlf-runtime-cache: miss (.+) staged (.+)$", re.MULTILINE)


def cache_dir() -> Optional[Path]:
    """Where runtime libraries are cached; None when ``$MLF_PROJECT_RUNTIME_CACHE`` is off."""
    configured = os.environ.get(ENV, "").strip()
    if configured.lower() in OFF_WORDS:
        return None
    if configured:
        return Path(configured).expanduser().resolve()
    return default_cache_dir().resolve() / "runtime"


def configure_entries(project_dir: Path) -> Dict[str, str]:
    """The ``-D`` setting a first configure gets (an empty one turns the cache off, as for
    a project generated before its build could only stage what it built)."""
    directory = cache_dir()
    if directory is None or not _stages_misses(project_dir):
        return {CACHE_ENTRY: ""}
    return {CACHE_ENTRY: str(directory)}


def _stages_misses(project_dir: Path) -> bool:
    try:
        script = (project_dir / "runtime" / "mlf_runtime_cache.cmake").read_text("utf-8")
    except OSError:
        return False
    return " staged " in script


def cached_library(configure_log: str) -> Optional[Path]:
    """The cached library a configure chose, from its log; None when it compiles its own."""
    found = _HIT.findall(configure_log)
    return Path(found[-1].strip()) if found else None


def after_build(build_log: str, project_dir: Path) -> Optional[Path]:
    """Stores the library a build whose configure missed staged (older entries may then have
    to go); returns where, or None when nothing was stored. Not for a project whose
    dependency ran its own CMake code (``deps.cmake``)."""
    found = _MISS.findall(build_log)
    if not found:
        return None
    library, staged = (Path(part.strip()) for part in found[-1])
    source = staged / library.name
    if not source.is_file() or library.exists() or _foreign_cmake(project_dir):
        return None
    try:
        library.parent.mkdir(parents=True, exist_ok=True)
        handle, private = tempfile.mkstemp(prefix=library.name + ".", dir=library.parent)
        os.close(handle)
        shutil.copyfile(source, private)
        os.chmod(private, 0o644)
        os.replace(private, library)
    except OSError:
        with contextlib.suppress(OSError, UnboundLocalError):
            os.unlink(private)
        return None
    prune()
    return library


def _foreign_cmake(project_dir: Path) -> bool:
    try:
        return runs_own_cmake((project_dir / "deps.cmake").read_text("utf-8", "replace"))
    except OSError:
        return False


def note_use(library: Path) -> None:
    """A hit: the entry becomes the newest, so pruning keeps it."""
    try:
        os.utime(library.parent)
    except OSError:
        pass


def prune(directory: Optional[Path] = None, keep: int = KEEP) -> None:
    """Removes all but the ``keep`` most recently used entries (best effort: another build
    may be using the cache at the same time)."""
    directory = directory if directory is not None else cache_dir()
    if directory is None or not directory.is_dir():
        return
    entries = []
    for entry in directory.iterdir():
        try:
            if entry.is_dir() and not entry.is_symlink():
                entries.append((entry.stat().st_mtime, entry))
        except OSError:
            continue
    for _, entry in sorted(entries, reverse=True)[keep:]:
        shutil.rmtree(entry, ignore_errors=True)
