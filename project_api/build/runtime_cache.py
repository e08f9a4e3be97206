"""The cache of built runtime libraries that generated projects share.

The build step — the trusted parent of the confined build — keys a project's runtime library
itself (:func:`runtime_key`): over every file under the project's ``runtime/`` (which holds
the library's sources and, in ``mlf_runtime_build.cmake``, its options, definitions and
flags) and ``board/``, the ``-D`` settings it passes, the compiler variables of the
environment and the compilers (real path, size, modification time). Nothing of the model
enters the key, so projects that differ only in their models — an AutoTVM trial, a
``matrix`` cell, a rebuilt demo — share one library and compile only their own model.

The first configure gets ``-DMLF_RUNTIME_CACHE=<dir> -DMLF_RUNTIME_CACHE_KEY=<key>``
(:meth:`Slot.entries`); the project's ``runtime/mlf_runtime_cache.cmake`` links
``<dir>/<key>/libmlf_runtime.a`` when it is there, else compiles the library and stages it as
``<build>/mlf-runtime-cache/<key>/libmlf_runtime.a``. After a build that succeeded,
:func:`store` copies the staged library into the cache: from the place this module computed
inside the build directory to the place it computed inside :func:`cache_dir`, nothing
followed through a link, under a private name renamed into place, mode 0644. The build
only reads the cache (it runs confined, see :mod:`project_api.sandbox`), and nothing it
prints or writes names a place to the parent.

A stale key only misses: the staged file is removed before each build
(:func:`before_build`), so only a library this build made is stored; a key computed now
finds it only where the configure was given the same key; and the CMake module stages
nothing once the configuration differs from the one the key was given for.

The directory is ``<cache>/runtime`` under the dependency cache's root
(``$MLF_PROJECT_CACHE``, ``$XDG_CACHE_HOME/mlf-project-api``, ...);
``$MLF_PROJECT_RUNTIME_CACHE`` names another, or ``off`` compiles every project's runtime
from its own sources. The newest :data:`KEEP` entries are kept. Nothing is stored for a
project whose dependency ran its own CMake code, which could have changed how the library
was built.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..coercion import OFF_WORDS
from ..resolve.cache import default_cache_dir
from ..resolve.recipes import runs_own_cmake
from ..sandbox import outputs

ENV = "MLF_PROJECT_RUNTIME_CACHE"
CACHE_ENTRY = "MLF_RUNTIME_CACHE"
KEY_ENTRY = "MLF_RUNTIME_CACHE_KEY"
LIBRARY = "libmlf_runtime.a"
STAGING = "mlf-runtime-cache"  # in the build directory
KEEP = 64
MAX_LIBRARY_BYTES = 256 << 20
KEY_VERSION = "mlf-runtime-cache 2"
# What the key covers of the project: the directories the generator writes for the runtime.
KEYED_DIRS = ("runtime", "board")
# Environment variables CMake reads at a first configure (besides every CMAKE_* one).
KEYED_ENVIRONMENT = ("CC", "CXX", "ASM", "CFLAGS", "CXXFLAGS", "ASMFLAGS", "CPPFLAGS",
                     "LDFLAGS")  # fmt: skip
# CMake's first choice of a host C compiler when $CC names none.
DEFAULT_COMPILERS = ("cc",)
_MODULE = "mlf_runtime_cache.cmake"
_ARCHIVE_MAGIC = b"!<arch>\n"


def cache_dir() -> Optional[Path]:
    """Where runtime libraries are cached; None when ``$MLF_PROJECT_RUNTIME_CACHE`` is off."""
    configured = os.environ.get(ENV, "").strip()
    if configured.lower() in OFF_WORDS:
        return None
    if configured:
        return Path(configured).expanduser().resolve()
    return default_cache_dir().resolve() / "runtime"


@dataclass(frozen=True)
class Slot:
    """One build's runtime library in the cache: every place computed by the parent."""

    key: str  # hex digits: one name, so every place below stays inside its directory
    cache: Path  # cache_dir(), resolved
    build_dir: Path  # resolved

    def __post_init__(self) -> None:
        if not self.key or any(c not in "0123456789abcdef" for c in self.key):
            raise ValueError(f"not a runtime cache key: {self.key!r}")

    @property
    def entry(self) -> Path:
        return self.cache / self.key

    @property
    def library(self) -> Path:
        return self.entry / LIBRARY

    @property
    def staged(self) -> Path:
        return self.build_dir / STAGING / self.key / LIBRARY

    def entries(self) -> Dict[str, str]:
        """The ``-D`` settings of a first configure."""
        return {CACHE_ENTRY: str(self.cache), KEY_ENTRY: self.key}


def slot_for(
    project_dir: Path,
    build_dir: Path,
    entries: Mapping[str, str],
    compilers: Sequence[str] = (),
) -> Optional[Slot]:
    """The cache slot of a build configured with ``entries`` (the caller's ``-D`` settings)
    and ``compilers``; None when the cache is off for it: ``$MLF_PROJECT_RUNTIME_CACHE`` is
    off, ``entries`` set ``MLF_RUNTIME_CACHE`` themselves, the project predates parent keys,
    or the build directory holds the project's runtime (the build could rewrite the key's
    inputs)."""
    cache = cache_dir()
    if cache is None or CACHE_ENTRY in entries or not _keyed_by_parent(project_dir):
        return None
    project = Path(os.path.realpath(project_dir))
    build = Path(os.path.realpath(build_dir))
    if (project / "runtime").is_relative_to(build):
        return None
    return Slot(runtime_key(project, entries, compilers), cache, build)


def configure_entries(slot: Optional[Slot]) -> Dict[str, str]:
    """The cache's ``-D`` settings of a first configure (an empty ``MLF_RUNTIME_CACHE``
    turns it off)."""
    return slot.entries() if slot is not None else {CACHE_ENTRY: ""}


def _keyed_by_parent(project_dir: Path) -> bool:
    """Whether the project's CMake module takes its key from the build step (a project
    generated before it did compiles its own runtime)."""
    try:
        script = outputs.read_regular(Path(project_dir), ["runtime", _MODULE], 1 << 20)
    except (OSError, ValueError):
        return False
    return KEY_ENTRY.encode() in script


def runtime_key(
    project_dir: Path,
    entries: Mapping[str, str],
    compilers: Sequence[str] = (),
    environ: Optional[Mapping[str, str]] = None,
) -> str:
    """The key of the runtime library a first configure of ``project_dir`` with ``entries``
    builds (see the module docstring); 64 hex digits."""
    environ = os.environ if environ is None else environ
    digest = hashlib.sha256()

    def line(*parts: object) -> None:
        digest.update(("\0".join(str(p) for p in parts) + "\n").encode("utf-8", "replace"))

    line(KEY_VERSION)
    for name in KEYED_DIRS:
        for relative, kind, content_digest in _tree(Path(project_dir) / name):
            line("file", f"{name}/{relative}", kind, content_digest)
    for name, value in sorted(entries.items()):
        if name not in (CACHE_ENTRY, KEY_ENTRY):
            line("entry", name, value)
    for name in sorted(environ):
        if name in KEYED_ENVIRONMENT or name.startswith("CMAKE_"):
            line("environment", name, environ[name])
    for program in _compiler_programs(compilers, environ):
        line("compiler", program, *_identity(program, environ))
    return digest.hexdigest()


def _tree(root: Path) -> List[Tuple[str, str, str]]:
    """(relative path, kind, sha256) of everything below ``root``, sorted; links are not
    followed (their target is what is hashed)."""
    found = []
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(directory, d))]:
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, root)
            try:
                info = os.lstat(path)
                if stat.S_ISLNK(info.st_mode):
                    found.append((relative, "link", os.readlink(path)))
                elif stat.S_ISREG(info.st_mode):
                    found.append((relative, "file", _file_digest(path)))
                else:
                    found.append((relative, "other", ""))
            except OSError as err:
                found.append((relative, "unreadable", str(err.errno)))
    return sorted(found)


def _file_digest(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _compiler_programs(compilers: Iterable[str], environ: Mapping[str, str]) -> List[str]:
    programs = list(compilers)
    for name in ("CC", "CXX", "ASM"):
        words = environ.get(name, "").split()
        if words:
            programs.append(words[0])
    programs += DEFAULT_COMPILERS
    return sorted(set(programs))


def _identity(program: str, environ: Mapping[str, str]) -> tuple:
    """Where ``program`` is found, its real path, size and modification time."""
    found = program if "/" in program else shutil.which(program, path=environ.get("PATH"))
    if found is None:
        return ("missing",)
    real = os.path.realpath(found)
    try:
        info = os.stat(real)
    except OSError:
        return (found, real, "missing")
    return (found, real, info.st_size, info.st_mtime_ns)


# --- the build step's part ------------------------------------------------------------------


def hit(slot: Optional[Slot]) -> bool:
    """Whether the slot's library is in the cache (what a configure given its key links);
    the entry then becomes the newest, so pruning keeps it."""
    if slot is None or not slot.library.is_file():
        return False
    note_use(slot)
    return True


def note_use(slot: Slot) -> None:
    """The slot's entry becomes the newest."""
    try:
        os.utime(slot.entry)
    except OSError:
        pass


def before_build(slot: Optional[Slot]) -> None:
    """Removes the slot's staged library, so that what is staged after the build is what
    this build made."""
    if slot is not None:
        outputs.remove(slot.build_dir, [STAGING, slot.key, LIBRARY])


def store(slot: Optional[Slot], project_dir: Path) -> Optional[Path]:
    """Copies the library the build staged into the cache (older entries may then have to
    go); returns where, or None when nothing was stored: nothing staged, the entry exists,
    a dependency of the project ran its own CMake code (``deps.cmake``), or the staged file
    is not a static library below the build directory."""
    if slot is None or slot.library.exists() or _foreign_cmake(project_dir):
        return None
    try:
        source = outputs.open_regular(slot.build_dir, [STAGING, slot.key, LIBRARY],
                                      MAX_LIBRARY_BYTES)  # fmt: skip
    except (OSError, ValueError):
        return None
    try:
        if os.pread(source, len(_ARCHIVE_MAGIC), 0) != _ARCHIVE_MAGIC:
            return None
        slot.cache.mkdir(parents=True, exist_ok=True)
        entry = outputs.open_directory(slot.cache, [slot.key], create=True)
        try:
            outputs.replace(entry, LIBRARY, source, mode=0o644, limit=MAX_LIBRARY_BYTES)
        finally:
            os.close(entry)
    except (OSError, ValueError):
        return None
    finally:
        os.close(source)
    prune(slot.cache)
    return slot.library


def _foreign_cmake(project_dir: Path) -> bool:
    try:
        return runs_own_cmake((project_dir / "deps.cmake").read_text("utf-8", "replace"))
    except OSError:
        return False


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
