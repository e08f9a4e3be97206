"""The smallest cores (issue 44): the Cortex-M0/M0+ class (ARMv6-M) and the rv32imc class.

qemu-microbit (QEMU's nRF51822, 16 KiB of RAM) runs a real TVM archive bit-exact through
``mlf-project run --icount`` and refuses what does not fit with the numbers; qemu-riscv32-imc
runs one on QEMU's ``virt`` with an rv32imc hart; the Cortex-M0+ board (nucleo-g071rb, no QEMU
machine) builds the kernels of CMSIS-NN v7 for ARMv6-M. One build per board, the smallest
archives.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Tuple

import numpy as np
import pytest
from conftest import (
    CMSIS_NN_SKIP,
    cmsis_nn,
    corpus_archive,
    corpus_case,
    requires_arm,
    requires_riscv,
)

from project_api.board import ArmCpu, MemoryRegion, load_board
from project_api.cli import main
from project_api.generate.export.target import cpu_boards
from project_api.run.base import live_children

MICROBIT = "qemu-microbit"
RV32IMC = "qemu-riscv32-imc"
M0PLUS = "nucleo-g071rb"


def cli(capsys: pytest.CaptureFixture, *argv: object) -> Tuple[int, str, str]:
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def corpus(stem: str) -> Path:
    archive = corpus_archive(stem)
    if archive is None:
        pytest.skip(f"corpus archive {stem}.tar is absent (set MLF_PROJECT_CORPUS)")
    return archive


def run_exact(
    capsys: pytest.CaptureFixture, tmp_path: Path, board: str, stem: str = "mlp_default"
) -> dict:
    """``mlf-project run`` of a corpus archive under ``-icount``: outputs equal TVM's own
    bit for bit, and the instruction count repeats exactly on a second run of the project."""
    archive = corpus(stem)
    case = corpus_case(archive)
    project = tmp_path / "project"
    status, out, err = cli(
        capsys, "run", archive, "--board", board, "--icount", "--project-dir", project,
        "--input", case["inputs_npz"], "--output", tmp_path / "out.npz", "--json",
    )  # fmt: skip
    assert status == 0, err
    first = json.loads(out)
    assert first["board"] == board
    got = dict(np.load(tmp_path / "out.npz"))
    want = dict(np.load(str(case["outputs_npz"])))
    assert sorted(got) == sorted(want)
    for name in want:
        assert np.array_equal(got[name], want[name]), (name, got[name], want[name])
    status, out, err = cli(
        capsys, "run", project, "--icount", "--input", case["inputs_npz"], "--json"
    )
    assert status == 0, err
    assert json.loads(out)["instructions"] == first["instructions"]  # -icount: deterministic
    assert live_children() == []
    return first


# --- which CPU names export --cpu knows ---------------------------------------------------


def test_export_knows_the_small_cores() -> None:
    boards = cpu_boards()
    assert boards["cortex-m0"].name == MICROBIT  # the QEMU board stands for its core
    assert boards["cortex-m0plus"].name == M0PLUS
    assert boards["rv32imc"].name == RV32IMC
    assert boards["cortex-m0"].cpu_flags() == ["-mcpu=cortex-m0", "-mthumb", "-mfloat-abi=soft"]
    assert boards["rv32imc"].cpu_flags()[:2] == ["-march=rv32imc", "-mabi=ilp32"]
    for core in ("cortex-m0", "cortex-m0plus"):
        cpu = boards[core].cpu
        assert cpu is not None and not cpu.dsp and not cpu.mve and not cpu.has_fpu


# --- qemu-microbit: the Cortex-M0 with 16 KiB of RAM --------------------------------------


def test_microbit_is_qemus_nrf51822() -> None:
    """The memory map and peripherals of QEMU 7.2's ``microbit`` (hw/arm/nrf51_soc.c): 256 KiB
    of flash at 0, 16 KiB of SRAM at 0x20000000, UART0 at 0x40002000 on IRQ 2, HCLK 16 MHz."""
    board = load_board(MICROBIT)
    assert board.is_qemu and board.run.qemu_machine == "microbit"
    assert board.flash == MemoryRegion(0x0, 256 * 1024)
    assert board.ram == MemoryRegion(0x20000000, 16 * 1024)
    assert (board.console.kind, board.console.address, board.console.irq) == (
        "nrf51-uart", 0x40002000, 2,
    )  # fmt: skip
    assert board.timer.clock_hz == 16_000_000 and board.instructions_per_tick() == 62.5
    assert isinstance(board.cpu, ArmCpu) and board.cpu.armv6m
    an385 = load_board("qemu-mps2-an385").cpu
    assert isinstance(an385, ArmCpu) and not an385.armv6m
    script = board.render_linker_script()
    assert "ORIGIN = 0x20000000, LENGTH = 0x00004000" in script


@requires_arm
@pytest.mark.qemu
def test_microbit_runs_an_archive_exact_with_icount(
    capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    """mlp_default (a real TVM float model) on the nRF51's UART, timed by SysTick at 16 MHz:
    62.5 instructions a tick under -icount."""
    document = run_exact(capsys, tmp_path, MICROBIT)
    assert document["tick_hz"] == 16_000_000
    assert document["instructions_per_tick"] == 62.5
    assert document["instructions"] == round(document["ticks"] * 62.5)
    assert 0 < document["stack_bytes_used"] < 2048


@pytest.mark.parametrize("stem", ["kws_int8", "mnist8"])
def test_microbit_refuses_what_does_not_fit_with_the_numbers(
    capsys: pytest.CaptureFixture, tmp_path: Path, stem: str
) -> None:
    """Refused before anything is built, in one line: what RAM the model needs, made of what,
    against the 16 KiB the board has."""
    status, _, err = cli(capsys, "generate", corpus(stem), tmp_path / "p", "--board", MICROBIT)
    assert status == 2
    line = err.strip().splitlines()[-1]
    found = re.search(
        r"does not fit board qemu-microbit: RAM: needs (\d+) bytes \(arena (\d+), executor "
        r"state (\d+), receive buffer (\d+), stack (\d+)\) but the board has (\d+) "
        r"\((\d+) too many\)",
        line,
    )
    assert found, line
    needs, arena, state, buffer, stack, has, over = map(int, found.groups())
    assert needs == arena + state + buffer + stack
    assert (has, stack) == (16 * 1024, 2048)
    assert over == needs - has > 0
    assert not (tmp_path / "p" / "build").exists()


def test_the_matrix_says_why_kws_is_not_on_the_microbit(
    capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    """``mlf-project matrix``: the cell of a model that does not fit is an error with the fit
    check's numbers (refused before building: no QEMU)."""
    argv = ["matrix", corpus("kws_int8"), "--board", MICROBIT, "--json", "--work", tmp_path]
    status, out, _ = cli(capsys, *argv)
    assert status == 1
    (cell,) = json.loads(out)
    assert (cell["target"], cell["status"]) == (MICROBIT, "error")
    assert "does not fit board qemu-microbit: RAM: needs" in cell["message"]
    assert "but the board has 16384" in cell["message"]


# --- rv32imc on QEMU's virt ---------------------------------------------------------------


@requires_riscv
@pytest.mark.qemu
def test_rv32imc_runs_an_archive_exact_on_virt(
    capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    document = run_exact(capsys, tmp_path, RV32IMC)
    assert document["instructions"] == document["ticks"]  # mcycle: one per instruction
    readelf = shutil.which("riscv64-unknown-elf-readelf")
    if readelf is None:
        return  # the run above is the test; the attribute check needs binutils' readelf
    attributes = subprocess.run(
        [readelf, "-A", str(tmp_path / "project" / "build" / "firmware.elf")],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    # built for rv32imc: compressed, no atomics (the hart has them off: a=off), no FPU
    arch = re.search(r'Tag_RISCV_arch: "(rv32i[^"]*)"', attributes)
    assert arch, attributes
    extensions = {part.rstrip("0123456789p") for part in arch[1].split("_")[1:]}
    assert {"m", "c"} <= extensions and not {"a", "f", "d"} & extensions, arch[1]


# --- the Cortex-M0+: CMSIS-NN v7's portable C for ARMv6-M -------------------------------


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="needs arm-none-eabi-gcc")
def test_cortex_m0plus_builds_cmsis_nn_v7(tmp_path: Path) -> None:
    """Every CMSIS-NN kernel TVM 0.14 calls (tests/cmsis_nn_archive.py), from CMSIS-NN
    v7.0.0, generated and built for the Cortex-M0+: ARMv6-M code, CMSIS-NN's pure-C paths (no
    DSP, no MVE). Build only: no QEMU machine has an M0+, and the microbit's 16 KiB are too
    few for this archive."""
    from cmsis_nn_archive import coverage_files
    from mlf_builders import write_dir

    from project_api.driver import Project

    source = cmsis_nn()
    if source.git_url is None:
        pytest.skip(f"needs CMSIS-NN as a git repository: {CMSIS_NN_SKIP}")
    dependency = {"short_name": "cmsis-nn", "url": source.git_url, "url_type": "git",
                  "version_spec": "v7.0.0"}  # fmt: skip
    archive = write_dir(tmp_path / "cov.mlf", coverage_files())
    project = Project.generate(
        archive, tmp_path / "p", board=M0PLUS,
        options={"dependencies": [dependency], "cache_dir": str(tmp_path / "cache")},
    )  # fmt: skip
    elf = project.build()
    library = tmp_path / "p" / "build" / "libmlf_dep_cmsis_nn.a"
    assert library.is_file()
    readelf = shutil.which("arm-none-eabi-readelf")
    assert readelf is not None
    for binary in (elf, library):
        attributes = subprocess.run(
            [readelf, "-A", str(binary)], capture_output=True, text=True, check=True
        ).stdout
        assert "Tag_CPU_arch: v6S-M" in attributes, binary
        assert "Tag_DSP_extension" not in attributes and "Tag_MVE_arch" not in attributes
