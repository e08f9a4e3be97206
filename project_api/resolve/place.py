"""Copy resolved dependencies into the generated project (``deps/<short_name>``), and the
one-call helper :func:`install_dependencies` (place + CMake fragment + lock file).

Only what the recipe needs is copied (for CMSIS-NN: ``Include``, ``Source`` and the license;
for a CMSIS 5 tree the NN, Core and DSP parts), never ``.git``. The copy is staged beside its
final place and swapped in, so a failed copy leaves the previous one intact. Links are
followed when they stay inside the dependency; one that leads out is an error. The digest of
what was copied (``tree_sha256``, see :mod:`.lock`) is recorded and, with a lock, checked.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ..cmsis_nn.sources import CmsisNnCompile
from ..errors import DependencyError
from .lock import LOCK_FILE_NAME, LockFile, write_lock
from .recipes import cmake_fragment, plan_build
from .resolved import ResolvedDependency

DEPS_DIR = "deps"
FRAGMENT_NAME = "deps.cmake"
MAX_PLACED_BYTES = 512 << 20
MAX_PLACED_FILES = 100_000
_SKIP_DIRS = (".git", ".hg", ".svn", "__pycache__")


def _selected_files(root: Path, copy: Tuple[str, ...], what: str) -> List[Tuple[str, Path]]:
    """(relative posix path, real source file) of everything ``copy`` selects, sorted."""
    real_root = os.path.realpath(root)
    found: Dict[str, Path] = {}
    total = 0

    def add(rel: str, path: str) -> None:
        nonlocal total
        real = os.path.realpath(path)
        if real != real_root and not real.startswith(real_root + os.sep):
            raise DependencyError(
                f"{what}: {rel} is a link leading out of the dependency ({os.readlink(path)})",
                hint="narrow the dependency with a recipe (sources=…,include_dirs=…)",
            )
        if not os.path.isfile(real):
            return
        total += os.path.getsize(real)
        if len(found) >= MAX_PLACED_FILES or total > MAX_PLACED_BYTES:
            raise DependencyError(
                f"{what}: more than {MAX_PLACED_FILES} files or {MAX_PLACED_BYTES >> 20} MiB to "
                f"copy from {root}",
                hint="is the path right? a recipe (sources=…,include_dirs=…) can narrow it",
            )
        found[rel] = Path(real)

    for item in copy:
        start = root / item if item else root
        if start.is_file():
            add(item, str(start))
            continue
        if not start.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(start, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
            for name in list(dirnames):
                full = os.path.join(dirpath, name)
                if os.path.islink(full):  # a linked directory: check, then walk it as files
                    dirnames.remove(name)
                    rel_dir = Path(full).relative_to(root).as_posix()
                    add(rel_dir, full)  # raises if it leads out
                    for sub in sorted(Path(os.path.realpath(full)).rglob("*")):
                        if sub.is_file():
                            inner = sub.relative_to(os.path.realpath(full)).as_posix()
                            add(f"{rel_dir}/{inner}", str(sub))
            for name in filenames:
                full = os.path.join(dirpath, name)
                add(Path(full).relative_to(root).as_posix(), full)
    return sorted(found.items())


def tree_digest(files: Sequence[Tuple[str, Path]]) -> str:
    """SHA-256 over ``<file sha256> <x|-> <relative path>`` lines (see :mod:`.lock`)."""
    lines = []
    for rel, path in files:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        executable = "x" if os.stat(path).st_mode & 0o111 else "-"
        lines.append(f"{digest.hexdigest()} {executable} {rel}\n")
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def place_dependencies(
    resolved: Sequence[ResolvedDependency],
    project_dir: Path,
    *,
    lock: Optional[LockFile] = None,
) -> List[ResolvedDependency]:
    """Copy each compiled dependency to ``<project_dir>/deps/<short_name>``.

    Returns the dependencies with ``placed`` (``deps/<short_name>``) and ``tree_sha256`` set
    (skipped ones unchanged). With ``lock``, a digest different from the locked one is a
    :class:`DependencyError` (the dependency changed since the lock was written).
    """
    project_dir = Path(project_dir)
    deps_root = project_dir / DEPS_DIR
    placed: List[ResolvedDependency] = []
    for dep in resolved:
        if dep.skipped or dep.path is None:
            placed.append(dep)
            continue
        plan = plan_build(dep.path, dep.recipe, dep.short_name)
        files = _selected_files(dep.path, plan.copy, dep.short_name)
        digest = tree_digest(files)
        entry = lock.get(dep.short_name) if lock is not None else None
        if entry is not None and entry.tree_sha256 and entry.tree_sha256 != digest:
            raise DependencyError(
                f"{dep.short_name}: the files of {dep.spec.describe()} differ from the locked "
                f"ones (tree sha256 {digest[:16]}…, locked {entry.tree_sha256[:16]}…)",
                hint="the dependency changed since the lock was written; delete the lock file "
                "to accept the new content",
            )
        deps_root.mkdir(parents=True, exist_ok=True)
        final = deps_root / dep.short_name
        staging = Path(tempfile.mkdtemp(prefix=f".{dep.short_name}-", dir=deps_root))
        old: Optional[Path] = None
        try:
            tree = staging / "tree"
            for rel, source in files:
                target = tree.joinpath(*rel.split("/"))
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
                os.chmod(target, 0o755 if os.stat(source).st_mode & 0o111 else 0o644)
            tree.mkdir(exist_ok=True)
            if final.exists() or final.is_symlink():
                old = staging / "old"
                os.rename(final, old)
            try:
                os.rename(tree, final)
            except OSError:
                if old is not None and not final.exists():
                    os.rename(old, final)
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        placed.append(
            dep.replace(placed=f"{DEPS_DIR}/{dep.short_name}", tree_sha256=digest, path=final)
        )
    return placed


def install_dependencies(
    resolved: Sequence[ResolvedDependency],
    project_dir: Path,
    *,
    cpu: Any = None,
    target_name: Union[str, Sequence[str]] = "firmware",
    lock: Optional[LockFile] = None,
    cmsis_nn_flags: Sequence[str] = (),
    cmsis_nn: Optional[CmsisNnCompile] = None,
) -> List[ResolvedDependency]:
    """Place the dependencies, write ``deps.cmake`` and ``dependencies.lock.json`` in
    ``project_dir``; return the placed dependencies. The project's CMakeLists.txt then does
    ``include(${CMAKE_CURRENT_LIST_DIR}/deps.cmake)`` after defining ``target_name``."""
    project_dir = Path(project_dir)
    placed = place_dependencies(resolved, project_dir, lock=lock)
    text = cmake_fragment(
        placed,
        project_dir=project_dir,
        cpu=cpu,
        target_name=target_name,
        cmsis_nn_flags=cmsis_nn_flags,
        cmsis_nn=cmsis_nn,
    )
    (project_dir / FRAGMENT_NAME).write_text(text, encoding="utf-8")
    write_lock(project_dir / LOCK_FILE_NAME, placed)
    return placed
