"""A project's external dependencies: declared and judged before anything is written
(:func:`declare_dependencies`), then resolved, placed and pinned in the project being written
(:func:`install_project_dependencies`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ..board import Board
from ..read import Archive
from ..resolve import DependencySpec, LockFile
from ..resolve.trust import TrustPolicy, Verdict
from .cmsis_nn import prepare_cmsis_nn
from .plan import ModelPlan, Progress


@dataclass(frozen=True)
class DeclaredDependencies:
    """The merged dependencies (archive, the user's overrides, or a lock file given with
    ``lock_file``), each allowed by the trust rule; ``base_dir`` is where relative locations
    are taken from (the archive's directory)."""

    specs: List[DependencySpec]
    policy: TrustPolicy
    base_dir: Path
    lock: Optional[LockFile] = None
    verdicts: List[Verdict] = field(default_factory=list)


def archive_base_dir(archive_path: Path) -> Path:
    return (archive_path if archive_path.is_dir() else archive_path.parent).resolve()


def declare_dependencies(
    archive: Archive,
    archive_path: Path,
    plans: Sequence[ModelPlan],
    opts: Mapping[str, Any],
    say: Progress,
) -> DeclaredDependencies:
    """The dependencies the project will build, checked against the trust rule
    (:mod:`project_api.resolve.trust`) before anything is fetched, read outside the archive or
    written: a refusal is a one-line :class:`~project_api.errors.DependencyError`."""
    from ..resolve import (
        collect_dependencies,
        detect_cmsis_nn,
        read_lock,
        require_cmsis_nn,
        specs_from_lock,
    )
    from ..resolve.trust import check_trust

    sources = [p for plan in plans for p in plan.model.sources]
    cmsis_path = opts["cmsis_path"]
    if cmsis_path is None and os.environ.get("CMSIS_PATH") and detect_cmsis_nn(sources):
        cmsis_path = os.environ["CMSIS_PATH"]  # TVM's convention, only when the code needs it
    overrides = opts["dependencies"] or []
    if isinstance(overrides, dict):
        overrides = [overrides]
    specs = collect_dependencies(
        [plan.model.external_dependencies for plan in plans],
        overrides=overrides,
        cmsis_path=cmsis_path,
        model_names=[plan.name for plan in plans],
    )
    lock = None
    if opts["lock_file"]:
        lock = read_lock(Path(opts["lock_file"]).expanduser())
        user = collect_dependencies([], overrides=overrides, cmsis_path=cmsis_path)
        specs = specs_from_lock(specs, lock, user_names=[spec.short_name for spec in user])
        say(f"dependencies as pinned by {lock.path}")
    require_cmsis_nn(sources, specs, cmsis_path=cmsis_path)
    policy = TrustPolicy.from_options(opts)
    base_dir = archive_base_dir(archive_path)
    verdicts = check_trust(specs, policy, archive_root=archive.root, base_dir=base_dir)
    for verdict in verdicts:
        if verdict.spec.from_archive:
            say(f"{verdict.spec.short_name}: named by the archive; {verdict.reason}")
    return DeclaredDependencies(specs, policy, base_dir, lock, verdicts)


def install_project_dependencies(
    root: Path,
    archive: Archive,
    declared: DeclaredDependencies,
    plans: Sequence[ModelPlan],
    board: Board,
    opts: Mapping[str, Any],
    say: Progress,
    *,
    previous: Path,
) -> Optional[List[Dict[str, Any]]]:
    """Resolve, place and pin the declared dependencies; ``deps.cmake`` builds them.

    Lock files: ``lock_file`` regenerates exactly what it pins (every dependency must be in
    it; it supplies those only it lists). Otherwise a project regenerated in place reuses its
    own ``dependencies.lock.json`` for every dependency declared as before (same commit or
    archive digest, even for a moving branch) and resolves changed or new ones afresh;
    ``refresh_dependencies`` ignores it and fetches git/url dependencies again.
    """
    from ..errors import DependencyError
    from ..resolve import (
        LOCK_FILE_NAME,
        LockFile,
        install_dependencies,
        read_lock,
        resolve_dependencies,
        reusable_lock,
    )
    from ..resolve.trust import check_builds

    specs = declared.specs
    if not specs:
        return None
    lock = declared.lock
    partial = False
    own_lock = previous / LOCK_FILE_NAME
    if lock is None and own_lock.is_file() and not opts["refresh_dependencies"]:
        try:
            old_lock = read_lock(own_lock)
        except DependencyError as err:  # the project is being replaced anyway
            say(f"ignoring the project's damaged lock file: {err.message}")
            old_lock = LockFile()
        lock, fresh = reusable_lock(specs, old_lock)
        partial = True
        if lock.entries:
            say(f"reusing the pins of {own_lock} for {', '.join(lock.entries)}")
        for spec in fresh:
            say(f"{spec.short_name}: not pinned as declared in {own_lock}; resolving it afresh")
    say(f"resolving {len(specs)} external dependenc{'y' if len(specs) == 1 else 'ies'}")
    cache_dir = Path(opts["cache_dir"]).expanduser() if opts["cache_dir"] else None
    resolved = resolve_dependencies(
        specs,
        archive_root=archive.root,
        base_dir=declared.base_dir,
        cache_dir=cache_dir,
        offline=bool(opts["offline"]),
        lock=lock,
        partial_lock=partial,
        refresh=bool(opts["refresh_dependencies"]),
        progress=say,
        notify=say,
        policy=declared.policy,
    )
    check_builds(resolved, declared.policy)
    cmsis = prepare_cmsis_nn(root, resolved, plans, board, opts, say)
    targets = ["firmware"] + [f"mlf_model_{plan.c_name}" for plan in plans]
    placed = install_dependencies(
        resolved,
        root,
        cpu=None,
        target_name=targets,
        lock=lock,
        cmsis_nn_flags=cmsis.build.flags if cmsis else (),
        cmsis_nn=cmsis.compile if cmsis else None,
    )
    described = []
    for dep in placed:
        entry: Dict[str, Any] = {
            "short_name": dep.short_name,
            "placed": dep.placed,
            "resolved": dep.resolved,
            "compiled": not dep.skipped,
        }
        if dep.spec.is_tvm_crt:
            entry["note"] = dep.note
        if cmsis is not None and dep.recipe.kind == "cmsis-nn" and not dep.skipped:
            entry.update(cmsis.describe())
        described.append(entry)
    return described
