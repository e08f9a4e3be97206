"""The RISC-V boards as data: qemu-riscv32 and qemu-riscv32-imafc load and mean what they say,
every rule of the riscv32 ``[cpu]`` table rejects bad input naming the file and key, the
linker script and toolchain file fit the architecture, the seam compiles warning-free and
links with picolibc, and a CMSIS-NN archive is refused in one line (CMSIS-NN is Arm-only)."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any, Dict

import pytest
from conftest import corpus_archive, have_tool
from test_boards import DELETE, MINIMAL_MAIN, _compile_and_link, _set, raw

from project_api.board import ARCHITECTURES, load_board, parse_board
from project_api.cli import main as cli_main
from project_api.errors import BoardError
from project_api.run.qemu import describe_exit

RISCV_BOARDS = ["qemu-riscv32", "qemu-riscv32-imafc"]
GCC = "riscv64-unknown-elf-gcc"
requires_riscv_gcc = pytest.mark.skipif(
    not have_tool(GCC),
    reason="needs riscv64-unknown-elf-gcc (apt-get install gcc-riscv64-unknown-elf "
    "picolibc-riscv64-unknown-elf)",
)


def test_the_boards_say_what_they_are():
    imac, imafc = (load_board(name) for name in RISCV_BOARDS)
    assert imac.arch == imafc.arch == "riscv32"
    assert imac.cpu_flags() == ["-march=rv32imac", "-mabi=ilp32", "-misa-spec=2.2"]
    assert imafc.cpu_flags() == ["-march=rv32imafc", "-mabi=ilp32f", "-misa-spec=2.2"]
    assert imac.cpu is not None and not imac.cpu.has_fpu and not imac.cpu.dsp
    assert imafc.cpu is not None and imafc.cpu.has_fpu and imafc.cpu.label == "rv32imafc/ilp32f"
    for board in (imac, imafc):
        assert board.flash is not None and board.ram is not None
        # The image starts where the virt machine jumps (0x80000000) and stays clear of the
        # device tree QEMU puts in the top 2 MiB of its default 128 MiB.
        assert board.flash.origin == 0x80000000
        assert board.ram.end <= 0x80000000 + (126 << 20)
        assert board.console.address == 0x10000000
        assert board.instructions_per_tick() == 1
        assert board.qemu_binary == "qemu-system-riscv32"
        command = board.qemu_command(Path("fw.elf"), icount=True)
        assert command[:3] == ["qemu-system-riscv32", "-machine", "virt"]
        assert "-bios" in command and command[command.index("-bios") + 1] == "none"
        assert "enable=on,target=native" in command  # semihosting: log and exit status
        assert board.summary()["cpu"]["march"] == board.cpu_flags()[0].split("=")[1]


def test_architecture_seam():
    riscv = ARCHITECTURES["riscv32"]
    board = load_board("qemu-riscv32")
    assert [d.name for d in board.seam_dirs()] == ["common", "riscv", "riscv_virt"]
    assert board.linker_template is not None and board.linker_template.parent.name == "riscv"
    assert board.toolchain_file is not None and board.toolchain_file.name == (
        "riscv64-unknown-elf.cmake"
    )
    assert board.cmake_args()[1] == "-DMLF_CPU_FLAGS=-march=rv32imac;-mabi=ilp32;-misa-spec=2.2"
    assert riscv.compiler == GCC and ARCHITECTURES["cortex-m"].compiler == "arm-none-eabi-gcc"
    assert not riscv.runs_cmsis_nn and ARCHITECTURES["cortex-m"].runs_cmsis_nn


def test_linker_script_places_start_first_and_bounds_the_heap():
    script = load_board("qemu-riscv32").render_linker_script(heap_bytes=1024)
    assert "ENTRY(_start)" in script
    text = script.index(".text :")
    assert script.index("KEEP(*(.text.mlf_start))", text) < script.index("*(.text .text.*)")
    assert "ORIGIN = 0x80000000, LENGTH = 0x00400000" in script
    assert "__mlf_heap_size = 1024;" in script and "__heap_end = __mlf_heap_end;" in script
    assert "__mlf_tls_base" in script and "__global_pointer$" in script


def test_fault_reports_are_named_by_their_architecture():
    riscv = "mlf: fault: mcause=0x00000002 mepc=0x80000010 mtval=0x00000000 sp=0x0 ra=0x0"
    assert describe_exit(0xFA, riscv).startswith(
        "firmware fault (status 250): illegal instruction mcause=0x00000002"
    )
    arm = "mlf: fault: exception=0x00000003 pc=0x00000100"
    assert describe_exit(0xFA, arm).startswith("firmware fault (status 250): HardFault ")


# --- schema rules of the riscv32 [cpu] table: one bad input each -------------------------------


def variant(path: str, value: Any) -> Dict[str, Any]:
    data = copy.deepcopy(raw("qemu-riscv32-imafc"))
    _set(path, value)(data)
    return data


BAD_INPUTS = [
    ("cpu.march", DELETE, "cpu.march is missing"),
    ("cpu.march", "rv64imac", "cpu.march must be rv32i or rv32e"),
    ("cpu.march", "rv32imac_zicsr", "cpu.march must be rv32i or rv32e"),
    ("cpu.march", "rv32icam", "cpu.march must be rv32i or rv32e .* in that order"),
    ("cpu.march", "rv32imdc", "cpu.march has d without f"),
    ("cpu.mabi", DELETE, "cpu.mabi is missing"),
    ("cpu.mabi", "lp64", "cpu.mabi must be one of ilp32, ilp32f, ilp32d, ilp32e"),
    ("cpu.mabi", "ilp32d", "cpu.mabi ilp32d passes floats in FP registers: march needs 'd'"),
    ("cpu.mabi", "ilp32e", "cpu.mabi ilp32e needs an rv32e march"),
    ("cpu.mcpu", "cortex-m4", "cpu.mcpu is not a known key"),
    ("console.kind", "cmsdk-uart", "console.kind must be one of ns16550 for riscv32"),
    ("timer.kind", "systick", "timer.kind must be one of mcycle for riscv32"),
]


@pytest.mark.parametrize("path, value, message", BAD_INPUTS)
def test_schema_rule(path, value, message):
    with pytest.raises(BoardError, match=message):
        parse_board(variant(path, value))


def test_rv32e_needs_ilp32e():
    data = variant("cpu.march", "rv32emac")
    data["cpu"]["mabi"] = "ilp32"
    with pytest.raises(BoardError, match="an rv32e march needs mabi = 'ilp32e'"):
        parse_board(data)
    data["cpu"]["mabi"] = "ilp32e"
    assert parse_board(data).cpu_flags()[1] == "-mabi=ilp32e"


def test_cli_describes_a_riscv_board(capsys):
    assert cli_main(["boards", "qemu-riscv32"]) == 0
    out = capsys.readouterr().out
    assert "cpu flags  -march=rv32imac -mabi=ilp32 -misa-spec=2.2" in out
    assert "run        qemu-system-riscv32 -machine virt" in out
    assert "1 instructions per tick" in out


# --- the seam builds --------------------------------------------------------------------------


@requires_riscv_gcc
@pytest.mark.parametrize("name", RISCV_BOARDS)
def test_seam_compiles_warning_free_and_links_with_picolibc(name, tmp_path):
    board = load_board(name)
    libraries = board.architecture.library_flags
    result = _compile_and_link(board, tmp_path, MINIMAL_MAIN, libraries)
    assert result.returncode == 0, result.stderr
    symbols = subprocess.run(
        ["riscv64-unknown-elf-nm", str(tmp_path / "fw.elf")], capture_output=True, text=True
    ).stdout.split()
    for symbol in ("_start", "mlf_trap_entry", "mlf_fault_report", "mlf_semihosting_call"):
        assert symbol in symbols
    # The machine starts at the first byte of the image: _start must be there.
    entry = symbols[symbols.index("_start") - 2]
    assert int(entry, 16) == 0x80000000


# --- CMSIS-NN is Arm-only -----------------------------------------------------------------------


def test_cmsis_nn_archive_is_refused_in_one_line(tmp_path, capsys):
    archive = corpus_archive("kws_int8_cmsisnn")
    if archive is None:
        pytest.skip("no corpus archive kws_int8_cmsisnn")
    status = cli_main(["generate", str(archive), str(tmp_path / "p"), "--board", "qemu-riscv32"])
    err = capsys.readouterr().err
    assert status == 2
    lines = [line for line in err.splitlines() if "error" in line]
    assert lines == [
        "mlf-project generate: error: model kws calls CMSIS-NN kernels, which are Arm-only: "
        "board qemu-riscv32 is riscv32; choose a Cortex-M board, or generate the model "
        "without CMSIS-NN"
    ]
    assert not (tmp_path / "p" / "CMakeLists.txt").exists()
