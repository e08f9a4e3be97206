"""End to end on the QEMU boards: the same generator, cross-built with each board's toolchain,
linker script and seam, run under qemu-system-arm through the device protocol.

A real TVM archive on the default QEMU board with exact, repeatable instruction counts; one
factory model on every QEMU board; the standalone project type and the JSON graph format
under QEMU; a firmware that crashes gives a clear error and leaves no QEMU behind.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, Tuple

import numpy as np
import pytest
from conftest import corpus_case, requires_arm

from project_api.boards import list_boards
from project_api.cli import main
from project_api.driver import Project
from project_api.errors import DeviceError, TransportClosedError
from project_api.modelgen import catalog, compare_outputs
from project_api.run.base import live_children

pytestmark = [pytest.mark.slow, pytest.mark.qemu, requires_arm]

QEMU_BOARDS = [board.name for board in list_boards() if board.is_qemu]


def cli(capsys: pytest.CaptureFixture, *argv: object) -> Tuple[int, str, str]:
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture(scope="module")
def mlp_on_every_board(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    root = tmp_path_factory.mktemp("qemu")
    archive = catalog()["mlp"]().write(root / "mlp.tar")

    def one(board: str) -> Any:
        try:
            project = Project.generate(archive, root / board, board=board)
            project.build()
            return project
        except Exception as err:  # noqa: BLE001 - reported by the test of that board
            return err

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(QEMU_BOARDS, pool.map(one, QEMU_BOARDS)))


@pytest.mark.parametrize("board", QEMU_BOARDS)
def test_factory_model_on_every_qemu_board(board: str, mlp_on_every_board: Dict[str, Any]) -> None:
    project = mlp_on_every_board[board]
    if isinstance(project, Exception):
        raise project
    model = catalog()["mlp"]()
    inputs = model.sample_inputs()
    with project.session(timeout=30) as session:
        assert session.info.board == board
        outputs = session.run(inputs)
        assert session.last_stats.tick_hz == project.board.timer.clock_hz
    assert compare_outputs(outputs, model.reference(inputs)) == []
    assert live_children() == []


def test_corpus_archive_with_exact_instruction_counts(
    mlf_corpus: Path, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    case = corpus_case(mlf_corpus / "kws_int8.tar")
    counts = []
    for attempt in range(2):
        output = tmp_path / f"out{attempt}.npz"
        status, out, err = cli(
            capsys, "run", case["archive"], "--board", "qemu-mps2-an385", "--icount",
            "--input", case["inputs_npz"], "--output", output, "--json",
            "--project-dir", tmp_path / "p",
        )  # fmt: skip
        assert status == 0, err
        document = json.loads(out)
        assert document["board"] == "qemu-mps2-an385"
        counts.append(document["instructions"])
        reference = dict(np.load(str(case["outputs_npz"])))
        assert compare_outputs(dict(np.load(output)), reference) == []
    assert counts[0] is not None and counts[0] > 1_000_000
    assert counts[0] == counts[1]  # deterministic under -icount shift=0
    assert live_children() == []


def test_standalone_under_qemu(mlp_on_every_board: Dict[str, Any], tmp_path: Path) -> None:
    model = catalog()["mlp"]()
    inputs = model.sample_inputs()
    np.savez(tmp_path / "s.npz", **inputs, **model.reference(inputs))
    archive = model.write(tmp_path / "mlp.tar")
    project = Project.generate(
        archive,
        tmp_path / "p",
        board="qemu-mps2-an386",
        project_type="standalone",
        options={"sample_inputs": str(tmp_path / "s.npz"), "qemu_icount": True},
    )
    project.build()
    result = project.run_standalone(timeout=60)
    assert result.status == "pass" and result.exit_status == 0
    assert compare_outputs(result.outputs_of(0, 0), model.reference(inputs)) == []
    assert live_children() == []


def test_json_graph_under_qemu(tmp_path: Path) -> None:
    model = catalog()["cnn_int8"]()
    archive = model.write(tmp_path / "m.tar")
    project = Project.generate(
        archive, tmp_path / "p", board="qemu-mps2-an385", options={"graph_format": "json"}
    )
    project.build()
    inputs = model.sample_inputs()
    with project.session(timeout=30) as session:
        outputs = session.run(inputs)
    assert compare_outputs(outputs, model.reference(inputs)) == []


def test_operator_failure_and_crash_are_clear(tmp_path: Path) -> None:
    """An operator returning -1 is a DeviceError naming its node; a firmware that dies is a
    TransportClosedError saying how; QEMU is reaped."""
    from project_api.modelgen import failing_inputs

    model = catalog()["failing"]()
    archive = model.write(tmp_path / "f.tar")
    project = Project.generate(archive, tmp_path / "p", board="qemu-mps2-an385")
    project.build()
    with project.session(timeout=30) as session:
        with pytest.raises(DeviceError, match="operator") as caught:
            session.run(failing_inputs(fail=True))
        assert caught.value.node is not None
        outputs = session.run(failing_inputs(fail=False))
        assert compare_outputs(outputs, model.reference(failing_inputs(fail=False))) == []
        session.runner.stop()  # the machine goes away under the session
        with pytest.raises(TransportClosedError):
            session.run(failing_inputs(fail=False))
    assert live_children() == []
