"""Planned code sizes: the model's and the runtime's C compiled to objects with the board's
compiler and flags (no linking: an upper bound). The compiler runs confined as a build does
(:func:`project_api.sandbox.policies.build`): it reads the project, writes a scratch
directory, and gets the environment of a confined build."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..sandbox.compile import compile_each
from .linked import LOOP_SOURCES, elf_sections, section_bucket

# --- planned sizes --------------------------------------------------------------------------


@dataclass
class CodeEstimate:
    """Code + read-only data of objects compiled without linking (an upper bound)."""

    bytes: Optional[int]
    files: int = 0
    note: str = ""


def _code_bytes(obj: Path) -> int:
    return sum(
        s.size for s in elf_sections(obj) if section_bucket(s.name, s.flags) in (".text", ".rodata")
    )


def estimate_code(
    board: Any,
    sources: List[Path],
    include_dirs: List[Path],
    *,
    opt_flags: Optional[List[str]] = None,
    definitions: Optional[List[str]] = None,
    sandbox_option: Optional[bool] = None,
) -> CodeEstimate:
    """Compiles ``sources`` to objects in a scratch directory with the board's compiler and
    sums their code and read-only data (.text + .rodata, as ``size`` counts them). The
    compiler may read the sources' and ``include_dirs``' directories and nothing of the
    user's beyond them; ``sandbox_option`` False lifts that."""
    if not sources:
        return CodeEstimate(0, 0)
    compiler = board.compiler_command()
    if compiler is None:
        packages = board.architecture.compiler_packages
        install = f" (apt-get install {packages})" if packages else ""
        return CodeEstimate(None, 0, f"no compiler for the board on PATH{install}")
    flags = list(opt_flags or (["-O2"]))
    argv = [*compiler, *flags, "-ffunction-sections", "-fdata-sections", "-w"]
    argv += [f"-I{d}" for d in include_dirs]
    argv += [f"-D{d}" for d in (definitions or [])]
    readable = sorted({p.parent for p in sources} | set(include_dirs))
    done = compile_each(argv, sources, readable, measure=_code_bytes, sandbox_option=sandbox_option)
    sizes = [c.measured for c in done]
    failed = sum(1 for s in sizes if s is None)
    total = sum(s for s in sizes if s is not None)
    if failed == len(sizes):
        return CodeEstimate(None, 0, f"{failed} file(s) did not compile outside the build")
    note = f"{failed} of {len(sizes)} files did not compile outside the build" if failed else ""
    return CodeEstimate(total, len(sizes) - failed, note)


def _header_dirs(root: Path) -> List[Path]:
    return sorted({p.parent for p in root.rglob("*.h")} | {root})


def code_estimates(project: Any, notes: List[str]) -> Dict[str, Optional[int]]:
    """The planned code of ``project`` in bytes, compiled but not linked: ``model code`` and
    ``runtime`` (None where it cannot be estimated); what limits the figures goes to
    ``notes``."""
    root = Path(project.dir)
    board = project.board
    runtime_include = root / "runtime" / "include"
    runtime_sources = sorted(
        p
        for p in (root / "runtime" / "src").glob("*.c")
        if p.name.split(".", 1)[0] not in LOOP_SOURCES
    )
    option = getattr(project, "sandbox_option", None)
    runtime = estimate_code(
        board,
        runtime_sources,
        [runtime_include, root / "runtime" / "src"],
        opt_flags=board.runtime_opt_flags(),
        sandbox_option=option,
    )
    model_sources: List[Path] = []
    model_dirs: List[Path] = [runtime_include]
    objects_bytes = 0
    for model in project.models:
        base = root / "model" / str(model.get("c_name", model["name"]))
        if not base.is_dir():
            continue
        model_sources += sorted(base.rglob("*.c")) + sorted(base.rglob("*.cc"))
        model_dirs += _header_dirs(base)
        for obj in sorted(base.rglob("*.o")):
            objects_bytes += _code_bytes(obj)
    deps = root / "deps"
    if deps.is_dir():
        notes.append("model code estimate leaves out external dependencies (deps/)")
    model = estimate_code(
        board, model_sources, model_dirs, opt_flags=board.model_opt_flags(), sandbox_option=option
    )
    for what, found in (("runtime", runtime), ("model code", model)):
        if found.note:
            notes.append(f"{what} estimate: {found.note}")
    if runtime.bytes is not None or model.bytes is not None:
        notes.append(
            "planned code sizes are compiled objects before linking (an upper bound: the "
            "linker drops unused functions)"
        )
    return {
        "model code": None if model.bytes is None else model.bytes + objects_bytes,
        "runtime": runtime.bytes,
    }
