"""The scratch memory of ``cmsis-nn`` operators, as CMSIS-NN itself answers it.

``compile --cmsis-nn`` resolves the CMSIS-NN the archive names (``--cmsis-path DIR`` or
``--dependency`` satisfy it offline, as for ``generate``), builds a small host program from
that tree's own ``*_get_buffer_size`` functions, and asks each operator's query at the three
CPU levels CMSIS-NN knows: the portable C (the plain query, compiled on the host without DSP or
MVE), ``*_dsp`` and ``*_mve``. The program declares exactly what the operator's C declares
(:meth:`~..modelgen.ops.tflite_cmsis.CmsisCall.setup`), so it asks what the firmware asks.

The build and the run are confined as a firmware's build and a host firmware are
(``sandbox/``): CMSIS-NN's code is a dependency's, whoever named it. The answers go into the
archive (``src/<mod>.kernels.json``); the memory planner puts the
board's level's answer into that operator's workspace window
(``generate/cmsis_nn_workspace.py``). At run time the operator asks the linked library again
and takes its answer from that window: a window too small fails the call, never silently.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..cmsis_nn.release import read_tree
from ..cmsis_nn.sources import needed_sources
from ..errors import CompileError, DependencyError
from ..modelgen.ops import TensorType
from ..modelgen.ops.tflite_cmsis import HEADER, LEVEL_SUFFIXES, CmsisCall
from ..resolve import collect_dependencies, resolve_dependencies
from ..resolve.recipes import cmsis_nn_root
from ..sandbox import policies, prepare
from ..sandbox.confine import Confinement

Query = Tuple[CmsisCall, Sequence[TensorType], TensorType]
PROBE_SECONDS = 120


def cmsis_nn_tree(
    dependency: Dict[str, str],
    *,
    cmsis_path: Optional[str] = None,
    overrides: Sequence[str] = (),
    offline: bool = False,
) -> Tuple[Path, str]:
    """(root, description) of the CMSIS-NN tree ``dependency`` names, resolved as ``generate``
    resolves it (``cmsis_path`` / ``overrides`` replace it); one-line errors."""
    try:
        specs = collect_dependencies(
            [[dependency]], list(overrides), cmsis_path=cmsis_path, model_names=["compile"]
        )
        spec = next((s for s in specs if s.is_cmsis_nn), None)
        if spec is None:
            raise CompileError("--cmsis-nn: no CMSIS-NN dependency to ask its buffer sizes")
        resolved = resolve_dependencies([spec], archive_root=None, base_dir=Path.cwd(),
                                        offline=offline)  # fmt: skip
    except DependencyError as err:
        raise CompileError(f"--cmsis-nn: {err}") from None
    path = resolved[0].path
    if path is None:
        raise CompileError("--cmsis-nn: CMSIS-NN's sources are not on disk")
    root = cmsis_nn_root(Path(path))
    return root, read_tree(root).describe()


def _probe_source(queries: Sequence[Query]) -> Tuple[str, List[str]]:
    lines = ["#include <stdio.h>", f'#include "{HEADER}"', "int main(void) {"]
    roots: List[str] = []
    for call, ins, out in queries:
        lines.append("  {")
        lines += [f"    {line}" for line in call.setup(ins, out)]
        sizes = [call.size_call(suffix) for _, suffix in LEVEL_SUFFIXES]
        for size in sizes:
            if size != "0":
                roots.append(size.split("(", 1)[0])
        lines.append(
            '    printf("%ld %ld %ld\\n", ' + ", ".join(f"(long)({size})" for size in sizes) + ");"
        )
        lines.append("  }")
    lines += ["  return 0;", "}", ""]
    return "\n".join(lines), roots


def _confined(
    argv: List[str], make: Callable[[], Confinement], work: Path
) -> subprocess.CompletedProcess[str]:
    """``argv`` run confined as a build (the compile) or a host firmware (the probe) is:
    CMSIS-NN's code is a dependency's, confined like every build and run of it."""
    confine = prepare(make)
    try:
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=PROBE_SECONDS,
            cwd=work,
            stdin=subprocess.DEVNULL,
            env=policies.build_environment(work) if confine is not None else None,
            preexec_fn=confine.apply if confine is not None else None,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        raise CompileError(
            f"--cmsis-nn: {Path(argv[0]).name} took over {PROBE_SECONDS} s"
        ) from None
    finally:
        if confine is not None:
            confine.close()


def ask_scratch(root: Path, queries: Sequence[Query]) -> List[Dict[str, int]]:
    """{level: bytes} for each query, answered by the tree at ``root`` (built on the host)."""
    if not queries:
        return []
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        raise CompileError("--cmsis-nn: no host C compiler (cc) to ask CMSIS-NN its buffer sizes")
    text, roots = _probe_source(queries)
    sources = sorted(str(p.relative_to(root)) for p in (root / "Source").rglob("*.c"))
    needed = needed_sources(root, sources, ["Include"], set(roots)) if roots else []
    if needed is None:
        raise CompileError(
            f"--cmsis-nn: CMSIS-NN at {root} defines no {', '.join(sorted(set(roots)))}"
        )
    with tempfile.TemporaryDirectory(prefix="mlf-cmsis-probe-") as work:
        probe = Path(work) / "probe.c"
        probe.write_text(text)
        exe = Path(work) / "probe"
        command = [compiler, "-std=c11", "-O0", "-w", f"-I{root / 'Include'}", str(probe)]
        command += [str(root / s) for s in needed] + ["-o", str(exe), "-lm"]
        built = _confined(
            command,
            lambda: policies.build([compiler], [root, Path(work)], [Path(work)]),
            Path(work),
        )
        if built.returncode != 0:
            first = (built.stderr.strip().splitlines() or ["?"])[0]
            raise CompileError(f"--cmsis-nn: asking CMSIS-NN its buffer sizes failed: {first}")
        ran = _confined([str(exe)], lambda: policies.host_firmware(exe), Path(work))
    rows = ran.stdout.split("\n")
    answers: List[Dict[str, int]] = []
    for number in range(len(queries)):
        values = rows[number].split() if number < len(rows) else []
        if ran.returncode != 0 or len(values) != len(LEVEL_SUFFIXES):
            raise CompileError("--cmsis-nn: CMSIS-NN's buffer-size probe gave no answer")
        answers.append({level: max(int(v), 0) for (level, _), v in zip(LEVEL_SUFFIXES, values)})
    return answers
