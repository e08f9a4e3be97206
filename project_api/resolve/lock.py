"""The lock file of a generated project: ``dependencies.lock.json``.

It records, for every dependency, what was asked (url, url_type, version_spec, sha256,
recipe), what it resolved to, where it was placed in the project and a digest of the files
placed there::

    {
      "mlf_project_lock": 1,
      "dependencies": [
        {
          "short_name": "cmsis-nn",
          "url_type": "git",
          "url": "https://github.com/ARM-software/CMSIS-NN.git",
          "version_spec": "v4.1.0",
          "resolved": {"commit": "61d1bb6c4428ad730e525d0164e12df12b789985"},
          "recipe": "cmsis-nn",
          "placed": "deps/cmsis-nn",
          "tree_sha256": "…"
        }
      ]
    }

``resolved`` is ``{"commit": sha}`` (git), ``{"sha256": hex}`` (url: the downloaded archive)
or ``null`` (path, mlf_path); ``placed`` and ``tree_sha256`` are ``null`` for a dependency
that is not compiled. ``tree_sha256`` is the SHA-256 of the sorted lines
``<sha256 of file> <x or -> <relative path>`` of the placed files. The file holds no time
stamp, so regenerating with the lock writes the same bytes.

Resolving with a lock fetches exactly the recorded commit / archive digest; placing with a
lock insists on the recorded ``tree_sha256`` (so a changed ``path`` dependency is noticed).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import DependencyError
from ..jsontext import parse_json
from .resolved import ResolvedDependency
from .spec import DependencySpec, parse_dependency

LOCK_FILE_NAME = "dependencies.lock.json"
LOCK_FORMAT = 1
# What stands in for TVM's standalone C runtime (an archive's tvm_standalone_crt).
SATISFIED_BY_OWN_RUNTIME = "mlf-project-api's runtime (runtime/ in the project)"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class LockEntry:
    spec: DependencySpec
    resolved: Optional[str]  # commit or archive sha256
    placed: Optional[str]
    tree_sha256: Optional[str]

    @property
    def short_name(self) -> str:
        return self.spec.short_name

    def to_json(self) -> Dict[str, Any]:
        out = self.spec.to_json()
        spec_recipe = out.pop("recipe", None)
        if self.resolved is None:
            out["resolved"] = None
        elif self.spec.url_type == "git":
            out["resolved"] = {"commit": self.resolved}
        else:
            out["resolved"] = {"sha256": self.resolved}
        out["recipe"] = (
            spec_recipe if spec_recipe is not None else self.spec.effective_recipe().kind
        )
        out["placed"] = self.placed
        out["tree_sha256"] = self.tree_sha256
        if self.spec.is_tvm_crt:
            out["satisfied_by"] = SATISFIED_BY_OWN_RUNTIME
        return out

    def differs_from(self, spec: DependencySpec) -> List[str]:
        """Fields in which the project's current dependency differs from the locked one."""
        return [
            name
            for name in ("url", "url_type", "version_spec", "sha256")
            if getattr(self.spec, name) != getattr(spec, name)
        ] + (["recipe"] if self.spec.effective_recipe() != spec.effective_recipe() else [])


@dataclass
class LockFile:
    entries: Dict[str, LockEntry] = field(default_factory=dict)
    path: Optional[Path] = None

    def get(self, short_name: str) -> Optional[LockEntry]:
        return self.entries.get(short_name)

    def to_json(self) -> Dict[str, Any]:
        return {
            "mlf_project_lock": LOCK_FORMAT,
            "dependencies": [entry.to_json() for entry in self.entries.values()],
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=False) + "\n"


def lock_from(resolved: Sequence[ResolvedDependency]) -> LockFile:
    lock = LockFile()
    for dep in resolved:
        lock.entries[dep.short_name] = LockEntry(
            spec=dep.spec,
            resolved=dep.resolved,
            placed=dep.placed,
            tree_sha256=dep.tree_sha256,
        )
    return lock


def write_lock(path: Path, resolved: Sequence[ResolvedDependency]) -> LockFile:
    """Write the lock file for ``resolved`` (placed dependencies) atomically; return it."""
    lock = lock_from(resolved)
    lock.path = Path(path)
    lock.path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=".lock-", dir=lock.path.parent)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(lock.dumps())
    os.replace(tmp, lock.path)
    return lock


def _bad(path: Path, where: str, problem: str) -> DependencyError:
    return DependencyError(
        f"{path}: {where}: {problem}",
        hint="the lock file is damaged; delete it to resolve the dependencies afresh",
    )


def read_lock(path: Path) -> LockFile:
    """Read and check a lock file written by :func:`write_lock`."""
    path = Path(path)
    try:
        data = parse_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DependencyError(f"{path}: no such lock file") from None
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise _bad(path, "top", f"not readable JSON: {err}") from None
    if not isinstance(data, dict) or data.get("mlf_project_lock") != LOCK_FORMAT:
        raise _bad(path, "top", f"not a lock file of format {LOCK_FORMAT}")
    items = data.get("dependencies")
    if not isinstance(items, list):
        raise _bad(path, "dependencies", "must be a list")
    lock = LockFile(path=path)
    for index, item in enumerate(items):
        where = f"dependencies[{index}]"
        if not isinstance(item, dict):
            raise _bad(path, where, "must be an object")
        raw = {
            k: item[k]
            for k in ("short_name", "url", "url_type", "version_spec", "sha256", "recipe")
            if k in item
        }
        spec = parse_dependency(raw, f"{path} {where}")
        resolved_raw = item.get("resolved")
        resolved: Optional[str] = None
        if resolved_raw is not None:
            expected = "commit" if spec.url_type == "git" else "sha256"
            pattern = _COMMIT if expected == "commit" else _SHA256
            value = resolved_raw.get(expected) if isinstance(resolved_raw, dict) else None
            if not isinstance(value, str) or not pattern.match(value):
                raise _bad(path, where, f"'resolved' must be {{\"{expected}\": <hex>}}")
            resolved = value
        elif spec.url_type in ("git", "url") and spec.effective_recipe().kind != "none":
            raise _bad(path, where, f"a {spec.url_type} dependency needs 'resolved'")
        placed = item.get("placed")
        if placed is not None and (
            not isinstance(placed, str)
            or placed.startswith("/")
            or ".." in placed.replace("\\", "/").split("/")
        ):
            raise _bad(path, where, "'placed' must be a path inside the project")
        tree = item.get("tree_sha256")
        if tree is not None and (not isinstance(tree, str) or not _SHA256.match(tree)):
            raise _bad(path, where, "'tree_sha256' must be 64 hex digits")
        if spec.short_name in lock.entries:
            raise _bad(path, where, f"'{spec.short_name}' is listed twice")
        lock.entries[spec.short_name] = LockEntry(spec, resolved, placed, tree)
    return lock


def specs_from_lock(
    specs: Sequence[DependencySpec],
    lock: LockFile,
    *,
    user_names: Sequence[str] = (),
) -> List[DependencySpec]:
    """The dependencies to regenerate *exactly* as ``lock`` pins them (``--lock FILE``).

    ``specs`` are the archive's dependencies with the user's overrides applied;
    ``user_names`` the short_names the user gave (``--dependency``, ``cmsis_path``). Every
    dependency in ``specs`` must be in the lock; one the archive declares differently is
    taken from the lock (it was overridden when the lock was written), one the user gives
    differently is an error; dependencies only the lock lists (overrides at the time) are
    added. Order: the lock's.
    """
    where = f" {lock.path}" if lock.path else ""
    problems = []
    for spec in specs:
        entry = lock.get(spec.short_name)
        if entry is None:
            problems.append(f"{spec.describe()} is not in it")
        elif spec.short_name in user_names and entry.differs_from(spec):
            problems.append(
                f"{spec.describe()} differs from the locked {entry.spec.describe()} "
                f"({', '.join(entry.differs_from(spec))})"
            )
    if problems:
        raise DependencyError(
            f"the lock file{where} cannot be used: " + "; ".join(problems),
            hint="regenerate without the lock file (or without the conflicting --dependency)",
        )
    origin = f"lock file{where}"
    return [replace(entry.spec, origin=origin) for entry in lock.entries.values()]


def reusable_lock(
    specs: Sequence[DependencySpec], lock: LockFile
) -> Tuple[LockFile, List[DependencySpec]]:
    """The part of a project's own lock that still applies when it is regenerated.

    Entries whose dependency is declared as before are kept (the same commit / archive
    digest is used again, a moving branch stays where it was); a ``path``/``mlf_path``
    entry keeps no tree digest (a local directory is used as it is now). Returns that lock
    and the dependencies that changed or are new (resolved afresh).
    """
    kept = LockFile(path=lock.path)
    fresh: List[DependencySpec] = []
    for spec in specs:
        entry = lock.get(spec.short_name)
        if entry is None or entry.differs_from(spec):
            fresh.append(spec)
            continue
        if spec.url_type in ("path", "mlf_path"):
            entry = replace(entry, tree_sha256=None)
        kept.entries[spec.short_name] = entry
    return kept, fresh
