"""Exported models in a firmware that is not ours (issues 35, 44): the test's own main.c (and a
C++ one), start-up and linker script, and its own CPU flags; built through add_subdirectory,
find_package after an install, and the Make fragments; outputs bit-exact to the corpus
references.

One portable export (no --cpu: graph and AOT, TVM named both ``kws``, two models in one
firmware) goes into every target of :data:`TARGETS`: the host (gcc, clang, ``-m32``), QEMU
Cortex-M3 (an385), Cortex-M4F with ``-mfloat-abi=hard`` (an386), the Cortex-M0 micro:bit
(the MLP's graph and AOT archives: KWS needs more than its 16 KiB) and RISC-V (rv64:
compile-only); each target reserves the arena its pointer width needs. CMSIS-NN exports are
CPU-specific: exact on the CPU they were exported for (an386: DSP, an547: MVE), an ``#error``
naming the CPU and the export command that fits when compiled for another."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import pytest
from conftest import (
    cmsis_nn_dependency,
    corpus_archive,
    requires_arm,
    requires_riscv,
)
from export_user import (
    Exported,
    Toolchain,
    arena_sizes,
    build_cmake,
    build_make,
    check_outputs,
    run_firmware,
)

from project_api.board import load_board
from project_api.generate.export import export_library

# (corpus archive, C name): the models every portable target runs, in one firmware.
KWS_PAIR = (("kws_int8", "kws"), ("kws_int8_aot", "kws_aot"))


def _export(
    target: Path, stem: str, name: str, board: Optional[str] = None, deps: Optional[list] = None
) -> Exported:
    archive = corpus_archive(stem)
    if archive is None:
        pytest.skip(f"corpus archive {stem}.tar is absent (set MLF_PROJECT_CORPUS)")
    options = {"dependencies": deps} if deps else {}
    info = export_library(archive, target, board=board, name=name, options=options)
    assert info["kind"] == ("portable" if board is None else "cpu")
    base = str(archive)[: -len(".tar")]
    with np.load(f"{base}.inputs.npz") as inputs, np.load(f"{base}.outputs.npz") as outputs:
        ins = {k: inputs[k] for k in inputs.files}
        outs = [outputs[f"output{i}"] for i in range(len(outputs.files))]
    return Exported(target, name, ins, outs)


# Every case a target may name, C name → corpus archive (a small board's may be a smaller model).
SMALL_PAIR = (("mlp_default", "mlp"), ("mlp_default_aot_packed", "mlp_aot"))
CASES = {name: stem for stem, name in (*KWS_PAIR, *SMALL_PAIR, ("mnist8", "mnist8"))}


class PortableExports(Dict[str, Exported]):
    """Each case exported once, without --cpu or --board, when a test first asks for it."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def __missing__(self, name: str) -> Exported:
        self[name] = _export(self.root / f"export-{name}", CASES[name], name)
        return self[name]


@pytest.fixture(scope="module")
def portable(tmp_path_factory: pytest.TempPathFactory) -> PortableExports:
    return PortableExports(tmp_path_factory.mktemp("portable"))


@dataclass(frozen=True)
class UserTarget:
    """A firmware of the user's: the board it runs on, the user's compiler on the host, the
    ways it is built (``subdirectory``, ``package``, ``package-cxx``, ``make``), the models."""

    board: str
    ways: Tuple[str, ...]
    cc: Optional[str] = None
    flags: Tuple[str, ...] = ()
    models: Tuple[str, ...] = ("kws", "kws_aot")


def _m32_works() -> bool:
    """gcc-multilib: gcc links a 32-bit program."""
    if shutil.which("gcc") is None:
        return False
    done = subprocess.run(
        ["gcc", "-m32", "-x", "c", "-o", "/dev/null", "-"],
        input="int main(void){return 0;}", capture_output=True, text=True, check=False,
    )  # fmt: skip
    return done.returncode == 0


requires_m32 = pytest.mark.skipif(
    not _m32_works(), reason="needs gcc -m32 (apt-get install gcc-multilib)"
)
requires_clang = pytest.mark.skipif(shutil.which("clang") is None, reason="needs clang")

# Each claim once: every way in on the host (one compiler each: gcc with a C++ main, clang,
# gcc -m32) and on a microcontroller. Data: a board joins with one row (and its marks).
TARGETS = [
    pytest.param(UserTarget("host", ("package-cxx",), cc="gcc"), id="host-gcc"),
    pytest.param(UserTarget("host", ("make",), cc="clang"), id="host-clang", marks=requires_clang),
    pytest.param(UserTarget("host", ("subdirectory",), cc="gcc", flags=("-m32",)),
                 id="host-m32", marks=requires_m32),
    pytest.param(UserTarget("qemu-mps2-an385", ("make", "package")), id="an385",
                 marks=[requires_arm, pytest.mark.qemu]),
    pytest.param(UserTarget("qemu-mps2-an386", ("subdirectory",)), id="an386-hard-float",
                 marks=[requires_arm, pytest.mark.qemu]),
    pytest.param(UserTarget("qemu-riscv32", ("subdirectory",)), id="riscv32",
                 marks=[requires_riscv, pytest.mark.qemu]),
    # the Cortex-M0 with 16 KiB of RAM: neither KWS nor mnist8 fits, the MLP graph and AOT do
    pytest.param(UserTarget("qemu-microbit", ("subdirectory",), models=("mlp", "mlp_aot")),
                 id="microbit", marks=[requires_arm, pytest.mark.qemu]),
]  # fmt: skip


def _pointer_bits(target: UserTarget) -> int:
    return 32 if target.board != "host" or "-m32" in target.flags else 64


def _arena_for(model: Exported, bits: int) -> int:
    import json

    info = json.loads((model.dir / "export.json").read_text())
    (described,) = [m for m in info["models"] if m["name"] == model.name]
    return int(described["arena_by_pointer_bits"][str(bits)]["arena_bytes"])


@pytest.mark.parametrize("target", TARGETS)
def test_portable_export_in_a_user_firmware(
    portable: PortableExports, tmp_path: Path, target: UserTarget
) -> None:
    """The same folder, built for each target with the user's own flags, runs bit-exact, and
    each build reserves the arena planned for its pointer width."""
    board = load_board(target.board)
    chain = Toolchain(board, target.cc, target.flags)
    if board.is_host:
        assert not board.cpu_flags()
    elif target.board == "qemu-mps2-an386":
        assert "-mfloat-abi=hard" in board.cpu_flags()  # the firmware's, not the export's
    models = [portable[name] for name in target.models]
    bits = _pointer_bits(target)
    for way in target.ways:
        if way == "make":
            app = build_make(tmp_path / way, models, chain)
        else:
            mode = way.split("-")[0]
            app = build_cmake(tmp_path / way, models, chain, mode=mode, cxx=way.endswith("cxx"))
        text = run_firmware(app, board)
        check_outputs(text, models)
        assert arena_sizes(text) == {m.name: _arena_for(m, bits) for m in models}, way


def test_the_two_widths_differ(portable: PortableExports) -> None:
    """A control: the 32- and 64-bit arenas the header chooses between are not the same."""
    model = portable["kws"]
    assert _arena_for(model, 32) < _arena_for(model, 64)


def _compile_errors(argv: List[str], cwd: Path) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode != 0, f"{' '.join(argv)} compiled"
    return done.stderr


@requires_arm
@pytest.mark.qemu
@pytest.mark.parametrize(
    "board_name, wrong, fits",
    [
        ("qemu-mps2-an386", "qemu-mps2-an385", "--cpu cortex-m3"),
        ("qemu-mps3-an547", "qemu-mps2-an386", "--cpu cortex-m4"),
    ],
)
def test_cmsis_nn_for_the_cpu(
    portable: PortableExports, tmp_path: Path, board_name: str, wrong: str, fits: str
) -> None:
    """CMSIS-NN built for the CPU (an386: DSP, an547: MVE) beside the portable AOT model; the
    an547 firmware's main is C++. The adapter takes its scratch from the operators' windows,
    inside the arena the header states: it has no static buffer. Compiled for another CPU
    (the board's below, the host) its files stop at an #error that says which --cpu fits."""
    board = load_board(board_name)
    deps = [cmsis_nn_dependency()]
    cmsis = _export(tmp_path / "export-cmsis", "kws_int8_cmsisnn", "kws_cmsis", board.name, deps)
    models = [cmsis, portable["kws_aot"]]
    adapter = (cmsis.dir / "src" / "cmsis_nn" / "mlf_cmsis_nn_memory.c").read_text()
    assert "TVMBackendAllocWorkspace" in adapter and "SCRATCH_BYTES" not in adapter
    window = 4480 if "an547" in board_name else 2752  # the largest call's, in 64-byte blocks
    assert f", {window}u}}" in (cmsis.dir / "src" / "kws_cmsis.c").read_text()
    for name in ("kws_cmsis.mk", "CMakeLists.txt", "library.json"):
        assert "-mcpu" not in (cmsis.dir / name).read_text(), name
    app = build_cmake(
        tmp_path / "user", models, board, mode="subdirectory", cxx="an547" in board_name
    )
    check_outputs(run_firmware(app, board), models)

    other = load_board(wrong)
    kernel = next((cmsis.dir / "src" / "cmsis_nn").glob("*/*.c")).relative_to(cmsis.dir)
    for source in ("src/kws_cmsis.c", str(kernel)):
        argv = [other.architecture.compiler, *other.cpu_flags(), "-Isrc", "-c", source]
        errors = _compile_errors([*argv, "-o", "/dev/null"], cmsis.dir)
        assert "#error" in errors and board.cpu.core in errors and fits in errors, errors
    if shutil.which("cc"):
        errors = _compile_errors(["cc", "-Isrc", "-c", "src/kws_cmsis.c", "-o", "/dev/null"],
                                 cmsis.dir)  # fmt: skip
        assert "#error" in errors and "no Arm CPU" in errors, errors


@pytest.mark.skipif(
    shutil.which("riscv64-unknown-elf-gcc") is None, reason="needs riscv64-unknown-elf-gcc"
)
def test_portable_export_compiles_for_rv64(portable: PortableExports, tmp_path: Path) -> None:
    """Compile-only (no rv64 machine here): every C file of the portable exports compiles for
    RISC-V rv64 (8-byte pointers on a microcontroller compiler) under the user's -Werror, and
    its header picks the 64-bit arena."""
    flags = ["-march=rv64imac", "-mabi=lp64", "--specs=picolibc.specs"]
    cc = ["riscv64-unknown-elf-gcc", *flags, "-O2", "-Wall", "-Wextra", "-Werror", "-Isrc"]
    for model in (portable["kws"], portable["kws_aot"]):
        check = tmp_path / f"{model.name}_width.c"
        check.write_text(
            f'#include "{model.name}.h"\n'
            f"_Static_assert({model.name.upper()}_ARENA_BYTES == {_arena_for(model, 64)}u, "
            '"the 64-bit plan");\n'
        )
        for source in [check, *sorted((model.dir / "src").rglob("*.c"))]:
            done = subprocess.run(
                [*cc, "-c", str(source), "-o", str(tmp_path / "out.o")],
                cwd=model.dir, capture_output=True, text=True, check=False,
            )  # fmt: skip
            assert done.returncode == 0, f"{source}: {done.stderr[-2000:]}"
