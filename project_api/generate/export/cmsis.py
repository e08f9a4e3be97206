"""External dependencies of an exported model: judged by the trust rule as for a generated
project (:func:`..dependencies.declare_dependencies`, before anything is written), resolved
through the same cache, and CMSIS-NN's sources copied into ``src/`` beside the runtime.

CMSIS-NN is built for the export's CPU as a generated project builds it
(:func:`...resolve.features.cmsis_nn_build`): what a command line would pass (``-U`` of a
feature macro, ``-include stdint.h``) opens each copied file instead, so that build systems
without per-file flags (Arduino) compile it the same way; its headers sit at the top of
``src/``; when TVM sized no scratch memory for the CPU's faster kernels the calls go through
the scratch shim (``crt/cmsis_nn/``), renamed in the model's own renames header.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence, Tuple

from ...errors import GenerateError
from ...resources import crt_dir
from .sources import warning_pragmas

CMSIS_DIR = "cmsis_nn"
_SCRATCH_SHIM = "mlf_cmsis_nn_scratch.c"


def write_dependencies(
    root: Path,
    archive: Any,
    declared: Any,
    plans: Sequence[Any],
    board: Any,
    opts: Mapping[str, Any],
    say: Any,
) -> Tuple[List[str], List[Dict[str, Any]]]:
    """The dependencies' sources under ``src/`` (relative to ``root``) and their record."""
    if not declared.specs:
        return [], []
    from ...resolve import assumed_features, cmsis_nn_build, detect_cmsis_nn, resolve_dependencies
    from ...resolve.recipes import SCRATCH_KERNELS, plan_build
    from ...resolve.trust import check_builds

    cache_dir = Path(opts["cache_dir"]).expanduser() if opts["cache_dir"] else None
    resolved = resolve_dependencies(
        declared.specs,
        archive_root=archive.root,
        base_dir=declared.base_dir,
        cache_dir=cache_dir,
        offline=bool(opts["offline"]),
        lock=declared.lock,
        refresh=bool(opts["refresh_dependencies"]),
        progress=say,
        notify=say,
        policy=declared.policy,
    )
    check_builds(resolved, declared.policy)
    sources: List[str] = []
    described: List[Dict[str, Any]] = []
    for dep in resolved:
        entry: Dict[str, Any] = {"short_name": dep.short_name, "resolved": dep.resolved}
        described.append(entry)
        if dep.skipped:
            entry.update(compiled=False, note=dep.note)
            continue
        if dep.recipe.kind != "cmsis-nn" or dep.path is None:
            raise GenerateError(
                f"dependency {dep.short_name!r} (recipe {dep.recipe.kind}) cannot travel in an "
                "exported package: only CMSIS-NN's sources are carried",
                hint="build the model without it, or add it to your firmware yourself",
            )
        build = plan_build(dep.path, dep.recipe, f"dependency {dep.short_name}")
        if build.layout != "CMSIS-NN >= 4":
            raise GenerateError(
                f"dependency {dep.short_name!r}: an export carries CMSIS-NN >= 4 (its own "
                f"repository), not the {build.layout} tree",
                hint="point cmsis_path or the dependency at CMSIS-NN v4.1.0 or later",
            )
        assumed = [
            (plan.name, assumed_features(plan.model.targets))
            for plan in plans
            if detect_cmsis_nn(plan.model.sources)
        ]
        cmsis = cmsis_nn_build(assumed, board.cpu, board.name, scratch_shim=True)
        if cmsis.reason:
            say(cmsis.reason)
        sources += _copy_cmsis_nn(dep.path, build, root / "src", list(cmsis.flags))
        if cmsis.scratch:
            sources.append(_copy_shim(root / "src"))
            renames = {f"arm_{k}": f"mlf_cmsis_nn_{k}" for k in SCRATCH_KERNELS}
            for plan in plans:
                plan.renames.update(renames)
        entry.update(compiled=True, cpu_features=cmsis.name, cpu_features_note=cmsis.reason)
    return sources, described


def _copy_cmsis_nn(tree: Path, build: Any, src: Path, undefine: List[str]) -> List[str]:
    for include in build.include_dirs:
        for header in sorted((tree / include).rglob("*.h")):
            target = src / header.relative_to(tree / include)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(header, target)
    licences = src.parent / "licenses"
    for name in build.copy:
        path = tree / name
        if path.is_file():
            licences.mkdir(exist_ok=True)
            shutil.copyfile(path, licences / f"CMSIS-NN-{path.name}")
    prologue = ["/* CMSIS-NN as the export builds it (see export.json). */", "#include <stdint.h>"]
    prologue += warning_pragmas()
    prologue += [f"#undef {flag[2:]}" for flag in undefine if flag.startswith("-U")]
    copied = []
    for rel in build.sources:
        target = src / CMSIS_DIR / Path(rel).relative_to("Source")
        target.parent.mkdir(parents=True, exist_ok=True)
        text = (tree / rel).read_text(encoding="utf-8", errors="replace")
        target.write_text("\n".join(prologue) + "\n" + text)
        copied.append(target.relative_to(src.parent).as_posix())
    return copied


def _copy_shim(src: Path) -> str:
    target = src / CMSIS_DIR / _SCRATCH_SHIM
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(crt_dir() / CMSIS_DIR / _SCRATCH_SHIM, target)
    return target.relative_to(src.parent).as_posix()
