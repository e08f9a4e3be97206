"""CMSIS-NN for one firmware, once its tree is resolved: refused when the models' calls are
TVM's and the tree is not one the adapter covers; else the CPU level it is compiled at, the
files it compiles and the adapter (``crt/cmsis_nn/``) that keeps TVM's calls meaning what TVM
meant, its kept kernel sums added to the fit check (its scratch is planned into the operators'
workspace windows when the firmware is planned: :mod:`.cmsis_nn_workspace`)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..board import Board
from ..cmsis_nn.adapter import HEADER, AdapterPlan, plan_adapter, refuse_uncovered
from ..cmsis_nn.calls import CmsisNnCalls
from ..cmsis_nn.features import CmsisNnBuild
from ..cmsis_nn.release import TVM_TARGET_RELEASE, CmsisNnTree, read_tree
from ..cmsis_nn.sources import CmsisNnCompile, called_functions
from ..errors import DependencyError
from ..resolve import ResolvedDependency
from ..resolve.recipes import cmsis_nn_root
from ..resources import crt_dir
from .cmsis_nn_workspace import firmware_cmsis_nn_build, keeps_kernel_sums
from .plan import ModelPlan, Progress, pointer_bytes

# Where a project keeps the adapter's C (beside the runtime's).
ADAPTER_DIR = "runtime/cmsis_nn"


@dataclass(frozen=True)
class CmsisNnSetup:
    """How the firmware compiles CMSIS-NN: ``build`` (CPU level, -U flags), ``compile`` (the
    files and the adapter), ``tree`` as read, ``adapter`` (None when no call needs it)."""

    build: CmsisNnBuild
    compile: CmsisNnCompile
    tree: CmsisNnTree
    adapter: Optional[AdapterPlan]

    def describe(self) -> Dict[str, Any]:
        """project.json's words for the cmsis-nn dependency."""
        info: Dict[str, Any] = {
            "cpu_features": self.build.name,
            "cpu_features_note": self.build.reason,
            "release": self.tree.release,
            "release_covered": self.tree.covered,
        }
        if self.adapter is not None:
            info["adapter"] = {**self.adapter.describe(), "ram": self.adapter.ram_items()}
            info["adapter_note"] = self.adapter_note()
        return info

    def adapter_note(self) -> str:
        adapter = self.adapter
        assert adapter is not None
        sums = f", kernel sums {adapter.sums_bytes} B" if adapter.sum_slots else ""
        return (
            f"CMSIS-NN {self.tree.release}: TVM's calls keep their {TVM_TARGET_RELEASE} meaning "
            f"through the adapter ({', '.join('arm_' + k for k in adapter.kernels)}; scratch up "
            f"to {adapter.scratch_bytes} B a call, in its operator's workspace{sums})"
        )


def _sources_text(paths: Sequence[Path]) -> List[str]:
    texts = []
    for path in paths:
        try:
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
    return texts


def plan_cmsis_nn(
    resolved: Sequence[ResolvedDependency],
    plans: Sequence[ModelPlan],
    board: Board,
    opts: Mapping[str, Any],
    say: Progress,
    adapter_dir: str = ADAPTER_DIR,
) -> Optional[CmsisNnSetup]:
    """How CMSIS-NN is compiled for ``plans`` on ``board`` (None without a CMSIS-NN built from
    its sources), the adapter's C files named under ``adapter_dir``; nothing is written.
    Raises a one-line DependencyError when TVM's calls meet a tree the adapter does not cover."""
    calls = [(plan.name, plan.cmsis_nn_calls) for plan in plans]
    _refuse_own_builds(resolved, calls)
    dep = next((d for d in resolved if d.recipe.kind == "cmsis-nn" and not d.skipped), None)
    if dep is None or dep.path is None:
        return None
    tree = read_tree(cmsis_nn_root(Path(dep.path)))
    refuse_uncovered(calls, tree, dep.spec.describe())
    adapted = tree.covered and any(c.adapted for _, c in calls)
    build = firmware_cmsis_nn_build([plan.model for plan in plans], board, adapted)
    if build.reason:
        say(build.reason)
    fp16 = board.cpu is not None and board.cpu.mve_float
    texts = _sources_text([p for plan in plans for p in plan.model.sources])
    if not adapted:
        return CmsisNnSetup(build, CmsisNnCompile(called_functions(texts), fp16), tree, None)
    adapter = plan_adapter(
        [c for _, c in calls],
        tree,
        build.level,
        keep_sums=keeps_kernel_sums(opts),
        pointer_bytes=pointer_bytes(board),
    )
    assert adapter is not None
    texts += _sources_text([crt_dir() / "cmsis_nn" / name for name in adapter.sources])
    compile = CmsisNnCompile(
        roots=called_functions(texts),
        fp16=fp16,
        adapter_sources=tuple(f"{adapter_dir}/{name}" for name in adapter.sources),
        adapter_include=adapter_dir,
        adapter_defines=adapter.defines,
        renames=adapter.renames,
    )
    setup = CmsisNnSetup(build, compile, tree, adapter)
    say(setup.adapter_note())
    return setup


def prepare_cmsis_nn(
    root: Path,
    resolved: Sequence[ResolvedDependency],
    plans: Sequence[ModelPlan],
    board: Board,
    opts: Mapping[str, Any],
    say: Progress,
) -> Optional[CmsisNnSetup]:
    """:func:`plan_cmsis_nn` for the project at ``root``, the adapter's C copied into it."""
    setup = plan_cmsis_nn(resolved, plans, board, opts, say)
    if setup is not None and setup.adapter is not None:
        (root / ADAPTER_DIR).mkdir(parents=True, exist_ok=True)
        for name in [HEADER] + setup.adapter.sources:
            shutil.copyfile(crt_dir() / "cmsis_nn" / name, root / ADAPTER_DIR / name)
    return setup


def _refuse_own_builds(
    resolved: Sequence[ResolvedDependency], calls: Sequence[Tuple[str, CmsisNnCalls]]
) -> None:
    """TVM's calls need the adapter, which only the cmsis-nn recipe compiles in: a CMSIS-NN
    built by its own CMakeLists.txt or the generic recipe would take them as they are."""
    users = [name for name, c in calls if c.api == "v4" and c.adapted]
    for dep in resolved:
        if dep.spec.is_cmsis_nn and not dep.skipped and dep.recipe.kind != "cmsis-nn" and users:
            raise DependencyError(
                f"model {users[0]} calls CMSIS-NN as TVM generated it, which needs the adapter "
                f"of the cmsis-nn recipe; dependency {dep.short_name} is built with recipe "
                f"{dep.recipe.kind!r}",
                hint="leave its recipe out (or recipe=cmsis-nn)",
            )


def adapter_ram_items(dependencies: Optional[Sequence[Mapping[str, Any]]]) -> Dict[str, int]:
    """The fit check's RAM items of the adapter described in project.json's dependencies."""
    items: Dict[str, int] = {}
    for entry in dependencies or ():
        adapter = entry.get("adapter")
        if isinstance(adapter, Mapping):
            items.update({str(k): int(v) for k, v in dict(adapter.get("ram", {})).items()})
    return items
