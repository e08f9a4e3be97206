"""The cache of built runtime libraries that generated projects share.

A project's CMakeLists.txt keys its runtime library (``runtime/mlf_runtime_cache.cmake``
says over what) and, given ``-DMLF_RUNTIME_CACHE=<dir>``, links one an earlier project built
instead of compiling it again: an AutoTVM trial, a ``matrix`` cell or a rebuilt demo then
compiles only its own model. The directory is ``<cache>/runtime`` under the dependency
cache's root (``$MLF_PROJECT_CACHE``, ``$XDG_CACHE_HOME/mlf-project-api``, ...);
``$MLF_PROJECT_RUNTIME_CACHE`` names another, or ``off`` compiles every project's runtime
from its own sources. The newest :data:`KEEP` entries are kept.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Dict, Optional

from ..resolve.cache import default_cache_dir

ENV = "MLF_PROJECT_RUNTIME_CACHE"
CACHE_ENTRY = "MLF_RUNTIME_CACHE"
KEEP = 64
_HIT = re.compile(r"mlf-runtime-cache: hit (.+)$", re.MULTILINE)
_MISS = "mlf-runtime-cache: miss"
_OFF = {"0", "off", "no", "false", "none"}


def cache_dir() -> Optional[Path]:
    """Where runtime libraries are cached; None when ``$MLF_PROJECT_RUNTIME_CACHE`` is off."""
    configured = os.environ.get(ENV, "").strip()
    if configured.lower() in _OFF:
        return None
    if configured:
        return Path(configured).expanduser().resolve()
    return default_cache_dir().resolve() / "runtime"


def configure_entries() -> Dict[str, str]:
    """The ``-D`` setting a first configure gets (an empty one turns the cache off)."""
    directory = cache_dir()
    return {CACHE_ENTRY: str(directory) if directory is not None else ""}


def cached_library(configure_log: str) -> Optional[Path]:
    """The cached library a configure chose, from its log; None when it compiles its own."""
    found = _HIT.findall(configure_log)
    return Path(found[-1].strip()) if found else None


def after_build(build_log: str) -> None:
    """A build whose configure missed stored a library: older entries may have to go."""
    if _MISS in build_log:
        prune()


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
