"""The RISC-V boards under qemu-system-riscv32: the seam test firmware (tests/firmware_qemu/)
echoes, logs, exits with a status, counts instructions exactly under -icount (mcycle), reports
an illegal instruction and a stack overflow (the PMP guard) by name, and sleeps in `wfi` while
it waits for input; then real TVM archives run bit-exact through ``mlf-project run``: a graph
and an AOT int8 model on qemu-riscv32 and a float model on the hard-float qemu-riscv32-imafc.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Tuple

import numpy as np
import pytest
from conftest import corpus_archive, corpus_case, requires_riscv
from test_boards import _compile_and_link
from test_qemu import firmware_builder, measure, no_children_left, read_exactly, start

from project_api.board import load_board
from project_api.cli import main
from project_api.modelgen import compare_outputs
from project_api.run.qemu import EXIT_FAULT

pytestmark = [pytest.mark.qemu, requires_riscv]
__all__ = ["firmware_builder", "no_children_left"]  # fixtures shared with test_qemu.py

RISCV_BOARDS = ["qemu-riscv32", "qemu-riscv32-imafc"]
TIMEOUT = 10.0


@pytest.mark.parametrize("board_name", RISCV_BOARDS)
def test_echo_float_log_and_exit_status(board_name, firmware_builder):
    board = load_board(board_name)
    runner, port = start(board, firmware_builder(board))
    with runner:
        payload = bytes(range(256))
        for offset in range(0, len(payload), 200):
            chunk = payload[offset : offset + 200]
            port.write(b"e" + bytes([len(chunk)]) + chunk)
            assert read_exactly(port, len(chunk)) == bytes(b ^ 0x5A for b in chunk)
        port.write(b"p")  # traps on rv32imafc unless start-up switched the FPU on
        assert np.frombuffer(read_exactly(port, 4), "<f4")[0] == 4.0
        port.write(b"l")
        assert read_exactly(port, 1) == b"L"
        port.write(b"x\x2a")
        assert runner.wait(TIMEOUT) == 42
        assert "seam_test: diagnostic line" in runner.log


def test_icount_ticks_are_exact_instruction_counts(firmware_builder):
    """mcycle under -icount shift=0 is the instruction count: 2 per loop iteration, the same
    whether the command arrived at once or a byte at a time (the wfi in between)."""
    board = load_board("qemu-riscv32")
    short, long = 100_000, 300_000
    runs = []
    for dribble in (False, True):
        runner, port = start(board, firmware_builder(board), icount=True)
        with runner:
            runs.append((measure(port, short, dribble=dribble), measure(port, long)))
    assert runs[0] == runs[1]
    (short_ticks, tick_hz), (long_ticks, _) = runs[0]
    assert tick_hz == 1_000_000_000
    assert long_ticks - short_ticks == 2 * (long - short)


def _fault(board, firmware_builder, command: bytes) -> str:
    """How the seam firmware ended after ``command``, which must make it fault."""
    runner, port = start(board, firmware_builder(board))
    with runner:
        port.write(command)
        assert runner.wait(TIMEOUT) == EXIT_FAULT
        return runner.exit_reason() or ""


def test_illegal_instruction_is_reported_by_name(firmware_builder):
    reason = _fault(load_board("qemu-riscv32"), firmware_builder, b"f")
    assert reason.startswith(f"firmware fault (status {EXIT_FAULT}): illegal instruction ")
    assert "mcause=0x00000002" in reason


def test_stack_overflow_hits_the_guard(firmware_builder):
    board = load_board("qemu-riscv32")
    reason = _fault(board, firmware_builder, b"o")
    assert "store access fault mcause=0x00000007" in reason
    assert board.ram is not None and board.flash is not None
    mtval = int(reason.split("mtval=0x", 1)[1][:8], 16)
    # In the guard, or (a frame bigger than the guard jumps it) in the write-protected code
    # region just below RAM.
    assert board.ram.origin - 4096 <= mtval < board.ram.origin + 32
    assert board.flash.end == board.ram.origin


THREAD_LOCALS = """
#include <errno.h>
#include "mlf_platform.h"
static volatile char pad = 3;
static __thread int tls_value = 0x1234;
static __thread int tls_zero;
static volatile double d = 2.5;
int main(void) {
  mlf_platform_init();
  int ok = pad == 3 && tls_value == 0x1234 && tls_zero == 0 && d == 2.5;
  tls_value++;
  errno = 5;
  return ok && tls_value == 0x1235 && errno == 5 ? 7 : 9;
}
"""


@pytest.mark.parametrize("board_name", RISCV_BOARDS)
def test_data_and_thread_locals_are_set_up(board_name, tmp_path):
    """.data and picolibc's thread-local block (errno) get their initial values from one copy,
    its zeroed part from the .bss clear, and tp points at it."""
    board = load_board(board_name)
    built = _compile_and_link(board, tmp_path, THREAD_LOCALS, board.architecture.library_flags)
    assert built.returncode == 0, built.stderr
    command = board.qemu_command(tmp_path / "fw.elf", serial="null")
    assert subprocess.run(command, capture_output=True, timeout=60).returncode == 7


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_waiting_for_input_sleeps(firmware_builder):
    """The console read waits in wfi (receive interrupt enabled, never taken): an idle QEMU
    uses next to no host CPU, where polling the UART kept a core busy."""
    board = load_board("qemu-riscv32")
    runner, port = start(board, firmware_builder(board), icount=True)
    with runner:
        assert runner.pid is not None
        began_cpu, began = _cpu_seconds(runner.pid), time.monotonic()
        time.sleep(2.0)
        used = _cpu_seconds(runner.pid) - began_cpu
        elapsed = time.monotonic() - began
        port.write(b"g")  # and it still wakes for input
        assert read_exactly(port, 5) == b"SEAM\n"
    assert used / elapsed < 0.1, f"idle QEMU used {used:.2f} s of CPU in {elapsed:.1f} s"


# --- real TVM archives ----------------------------------------------------------------------------

CORPUS = [
    ("kws_int8", "qemu-riscv32"),
    ("kws_int8_aot_usmp", "qemu-riscv32"),
    ("mlp_default", "qemu-riscv32-imafc"),
]


def _run(capsys, archive: Path, board: str, tmp_path: Path) -> Tuple[int, str, str]:
    case = corpus_case(archive)
    status = main(
        [
            "run", str(archive), "--board", board, "--icount", "--json",
            "--input", str(case["inputs_npz"]), "--output", str(tmp_path / "out.npz"),
            "--project-dir", str(tmp_path / "project"),
        ]
    )  # fmt: skip
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.slow
@pytest.mark.parametrize("stem, board", CORPUS)
def test_corpus_archive_runs_bit_exact(stem, board, tmp_path, capsys):
    archive = corpus_archive(stem)
    if archive is None:
        pytest.skip(f"no corpus archive {stem}")
    status, out, err = _run(capsys, archive, board, tmp_path)
    assert status == 0, err
    document = json.loads(out)
    assert document["board"] == board and document["instructions"] == document["ticks"] > 0
    reference = dict(np.load(corpus_case(archive)["outputs_npz"]))
    outputs = dict(np.load(tmp_path / "out.npz"))
    assert not compare_outputs(outputs, reference), "outputs differ from TVM's"
