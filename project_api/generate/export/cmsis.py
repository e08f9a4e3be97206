"""External dependencies of an exported model: judged by the trust rule as for a generated
project (:func:`..dependencies.declare_dependencies`, before anything is written), resolved
through the same cache, and CMSIS-NN's sources copied into ``src/`` beside the runtime.

CMSIS-NN is built for the export's CPU as a generated project builds it
(:func:`...cmsis_nn.features.cmsis_nn_build`): what a command line would pass (``-U`` of a
feature macro, ``-include stdint.h``) opens each copied file instead, so that build systems
without per-file flags (Arduino) compile it the same way; its headers sit at the top of
``src/``; TVM's calls go through the adapter (``crt/cmsis_nn/``, :mod:`..cmsis_nn`), its
configuration written into its files, the calls renamed in the model's own renames header.
Only the CMSIS-NN files the calls reach are carried.

CMSIS-NN is the one CPU-specific thing an export carries: ``src/cmsis_nn/mlf_cmsis_nn_target.h``
(included first by each of its files and by the model's C API) stops a compiler that targets
another CPU with an ``#error`` naming the CPU it needs and the ``export`` command that fits;
on a larger core of the same line its files are held at the level they were planned for.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence, Tuple

from ...cmsis_nn.features import level_pins
from ...errors import GenerateError
from ...resources import crt_dir
from .sources import warning_pragmas

CMSIS_DIR = "cmsis_nn"


TARGET_HEADER = "mlf_cmsis_nn_target.h"
_TARGET_INCLUDE = f'#include "{CMSIS_DIR}/{TARGET_HEADER}"'
# What a compiler targets, from the most to the least (CMSIS-NN's levels: mve, dsp, portable).
_LEVEL_TESTS = ("defined(__ARM_FEATURE_MVE)", "defined(__ARM_FEATURE_DSP)", "defined(__ARM_ARCH)")
_LEVEL_WORDS = ("Arm with MVE", "Arm with DSP", "Arm")


@dataclass
class Carried:
    """What an export carries of its dependencies."""

    sources: List[str] = field(default_factory=list)  # C files under src/, from the root
    described: List[Dict[str, Any]] = field(default_factory=list)  # export.json's record
    cmsis_nn: bool = False  # CMSIS-NN is among them: the export is for its CPU only
    # TVM's calls taken over by the adapter (arm_... -> its function), in every model's renames
    renames: Dict[str, str] = field(default_factory=dict)


def write_dependencies(
    root: Path,
    archive: Any,
    declared: Any,
    plans: Sequence[Any],
    board: Any,
    opts: Mapping[str, Any],
    say: Any,
    archive_name: str = "ARCHIVE",
) -> Carried:
    """The dependencies' sources under ``src/`` (relative to ``root``), their record, whether
    CMSIS-NN is among them (the export is then for ``board``'s CPU only) and the renames of
    TVM's calls that go through the adapter."""
    carried = Carried()
    if not declared.specs:
        return carried
    from ...resolve import resolve_dependencies
    from ...resolve.recipes import plan_build
    from ...resolve.trust import check_builds
    from ..cmsis_nn import HEADER, plan_cmsis_nn

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
    sources = carried.sources
    described = carried.described
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
        setup = plan_cmsis_nn(resolved, plans, board, opts, say, adapter_dir=CMSIS_DIR)
        assert setup is not None
        build = plan_build(dep.path, dep.recipe, f"dependency {dep.short_name}", setup.compile)
        if build.layout != "CMSIS-NN >= 4":
            raise GenerateError(
                f"dependency {dep.short_name!r}: an export carries CMSIS-NN >= 4 (its own "
                f"repository), not the {build.layout} tree",
                hint="point cmsis_path or the dependency at CMSIS-NN v4.1.0 or later",
            )
        write_target_header(root / "src", board, setup.build.level, archive_name)
        carried.cmsis_nn = True
        pins = [f for f in level_pins(setup.build.level) if f not in setup.build.flags]
        prologue = _prologue([*setup.build.flags, *pins], build.defines)
        sources += _copy_cmsis_nn(dep.path, build, root / "src", prologue)
        if setup.adapter is not None:  # its configuration opens each of its C files
            configuration = _defines(setup.adapter.defines)
            for name in [HEADER] + setup.adapter.sources:
                target = Path("src") / CMSIS_DIR / name
                opening = prologue + configuration if name.endswith(".c") else []
                sources += _copy_file(crt_dir() / CMSIS_DIR / name, root, target, opening)
            carried.renames.update(
                (old, new) for old, _, new in (r.partition("=") for r in setup.adapter.renames)
            )
        entry.update(compiled=True, **setup.describe())
    return carried


def write_target_header(src: Path, board: Any, level: int, archive_name: str) -> None:
    """``src/cmsis_nn/mlf_cmsis_nn_target.h``: an ``#error`` unless the compiler targets a
    CPU with CMSIS-NN's ``level`` (0 any Arm core, 1 DSP, 2 MVE)."""
    cpu = board.cpu.core if board.cpu is not None else board.name
    need = f"{cpu} ({_LEVEL_WORDS[2 - level]}: {_LEVEL_TESTS[2 - level][8:-1]})"
    lines = [
        f"/* This export's CMSIS-NN was built for {need}: its kernels and the scratch",
        " * the arena holds for them were planned for that CPU. A compiler that targets another",
        " * stops here. (Build the firmware for it, or export again with the --cpu below.) */",
        "#ifndef MLF_CMSIS_NN_TARGET_H_",
        "#define MLF_CMSIS_NN_TARGET_H_",
        f"#if !({_LEVEL_TESTS[2 - level]})",
    ]
    head = f"exported with CMSIS-NN for {need}; this compiler targets"
    for index, (test, words, other) in enumerate(_fitting_cpus()):
        lines += [
            f"#{'if' if index == 0 else 'elif'} {test}",
            f'#error "{head} {words}: export for it: mlf-project export {archive_name} DIR '
            f'--cpu {other}"',
        ]
    lines += [
        "#else",
        f"#error \"{head} no Arm CPU, and the model's C calls CMSIS-NN: build for {cpu}, or "
        "export an archive TVM built without CMSIS-NN (mlf-project export ARCHIVE DIR: portable "
        'C99)"',
        "#endif",
        "#endif",
        "#endif",
        "",
    ]
    (src / CMSIS_DIR).mkdir(parents=True, exist_ok=True)
    (src / CMSIS_DIR / TARGET_HEADER).write_text("\n".join(lines))


def _fitting_cpus() -> List[Tuple[str, str, str]]:
    """(what the compiler defines, in words, a ``--cpu`` for it), from the largest CPU class
    down: MVE, DSP, Armv7-M and later, Armv6-M (when a ``--cpu`` exists for it)."""
    from .target import cpu_boards

    known = cpu_boards()

    def first(cores: Sequence[str]) -> str:
        return next((c for c in cores if c in known), cores[0])

    rows = [
        (_LEVEL_TESTS[0], _LEVEL_WORDS[0], first(("cortex-m55", "cortex-m85"))),
        (_LEVEL_TESTS[1], _LEVEL_WORDS[1], first(("cortex-m4", "cortex-m7", "cortex-m33"))),
    ]
    armv6 = next((c for c in ("cortex-m0plus", "cortex-m0") if c in known), None)
    if armv6 is not None:
        rows.append(("defined(__ARM_ARCH) && __ARM_ARCH < 7", "Armv6-M", armv6))
    rows.append((_LEVEL_TESTS[2], _LEVEL_WORDS[2], first(("cortex-m3",))))
    return rows


def _prologue(undefine: List[str], defines: Sequence[str]) -> List[str]:
    """What opens each copied C file: what a generated project passes as flags."""
    lines = ["/* CMSIS-NN as the export builds it (see export.json). */", _TARGET_INCLUDE]
    lines += ["#include <stdint.h>"]
    lines += warning_pragmas()
    lines += [f"#undef {flag[2:]}" for flag in undefine if flag.startswith("-U")]
    return lines + _defines(defines)


def _defines(definitions: Sequence[str]) -> List[str]:
    """``NAME=VALUE`` compile definitions as ``#define`` lines."""
    return [f"#define {d.replace('=', ' ', 1)}" for d in definitions]


def _copy_file(source: Path, root: Path, target: Path, prologue: List[str]) -> List[str]:
    """``source`` copied to ``root``/``target`` behind ``prologue``; ``target`` when it is a C
    file to compile."""
    (root / target).parent.mkdir(parents=True, exist_ok=True)
    text = source.read_text(encoding="utf-8", errors="replace")
    (root / target).write_text("\n".join(prologue) + "\n" + text if prologue else text)
    return [target.as_posix()] if target.suffix == ".c" else []


def _copy_cmsis_nn(tree: Path, build: Any, src: Path, prologue: List[str]) -> List[str]:
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
    copied = []
    for rel in build.sources:
        target = Path("src") / CMSIS_DIR / Path(rel).relative_to("Source")
        copied += _copy_file(tree / rel, src.parent, target, prologue)
    return copied
