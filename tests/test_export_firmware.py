"""Exported models in a firmware that is not ours (issue 35): the test's own main.c (and a C++
one), start-up and linker script; built through add_subdirectory, find_package after an
install, and the Make fragments; run on the host, QEMU Cortex-M (an385, an386 with CMSIS-NN's
DSP code, an547 with MVE) and RISC-V; outputs bit-exact to the corpus references. Each target
builds one firmware holding two models (graph and AOT, TVM named both ``kws``)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import numpy as np
import pytest
from conftest import (
    cmsis_nn_dependency,
    corpus_archive,
    requires_arm,
    requires_riscv,
)
from export_user import Exported, build_cmake, build_make, check_outputs, run_firmware

from project_api.board import load_board
from project_api.generate.export import export_library


def _export(tmp: Path, stem: str, name: str, board: str, deps: Optional[list] = None) -> Exported:
    archive = corpus_archive(stem)
    if archive is None:
        pytest.skip(f"corpus archive {stem}.tar is absent (set MLF_PROJECT_CORPUS)")
    options = {"dependencies": deps} if deps else {}
    target = tmp / f"export-{name}"
    export_library(archive, target, board=board, name=name, options=options)
    base = str(archive)[: -len(".tar")]
    with np.load(f"{base}.inputs.npz") as inputs, np.load(f"{base}.outputs.npz") as outputs:
        ins = {k: inputs[k] for k in inputs.files}
        outs = [outputs[f"output{i}"] for i in range(len(outputs.files))]
    return Exported(target, name, ins, outs)


def _graph_and_aot(tmp: Path, board: str) -> List[Exported]:
    return [
        _export(tmp, "kws_int8", "kws", board),
        _export(tmp, "kws_int8_aot", "kws_aot", board),
    ]


def test_host_three_ways_and_cxx(tmp_path: Path) -> None:
    board = load_board("host")
    models = _graph_and_aot(tmp_path, "host")
    for mode in ("subdirectory", "package"):
        app = build_cmake(tmp_path / mode, models, board, mode=mode, cxx=mode == "package")
        check_outputs(run_firmware(app, board), models)
    app = build_make(tmp_path / "make", models, board)
    check_outputs(run_firmware(app, board), models)


@requires_arm
@pytest.mark.qemu
def test_an385_make_and_find_package(tmp_path: Path) -> None:
    board = load_board("qemu-mps2-an385")
    models = _graph_and_aot(tmp_path, board.name)
    app = build_make(tmp_path / "make", models, board)
    check_outputs(run_firmware(app, board), models)
    app = build_cmake(tmp_path / "package", models[:1], board, mode="package")
    check_outputs(run_firmware(app, board), models[:1])


@requires_arm
@pytest.mark.qemu
@pytest.mark.parametrize("board_name", ["qemu-mps2-an386", "qemu-mps3-an547"])
def test_cmsis_nn_for_the_cpu(tmp_path: Path, board_name: str) -> None:
    """CMSIS-NN built for the CPU (an386: DSP, an547: MVE) beside a graph model without it;
    the an547 firmware's main is C++. The adapter takes its scratch from the operators'
    windows, inside the arena the header states: it has no static buffer."""
    board = load_board(board_name)
    deps = [cmsis_nn_dependency()]
    models = [
        _export(tmp_path, "kws_int8_cmsisnn", "kws_cmsis", board.name, deps),
        _export(tmp_path, "kws_int8_aot", "kws_aot", board.name),
    ]
    adapter = (models[0].dir / "src" / "cmsis_nn" / "mlf_cmsis_nn_memory.c").read_text()
    assert "TVMBackendAllocWorkspace" in adapter and "SCRATCH_BYTES" not in adapter
    window = 4480 if "an547" in board_name else 2752  # the largest call's, in 64-byte blocks
    assert f", {window}u}}" in (models[0].dir / "src" / "kws_cmsis.c").read_text()
    app = build_cmake(
        tmp_path / "user", models, board, mode="subdirectory", cxx="an547" in board_name
    )
    check_outputs(run_firmware(app, board), models)


@requires_riscv
@pytest.mark.qemu
def test_riscv32(tmp_path: Path) -> None:
    board = load_board("qemu-riscv32")
    models = _graph_and_aot(tmp_path, board.name)
    app = build_cmake(tmp_path / "user", models, board, mode="subdirectory")
    check_outputs(run_firmware(app, board), models)
