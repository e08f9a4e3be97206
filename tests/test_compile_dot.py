"""The ``dot`` form of FULLY_CONNECTED (modelgen/ops/tflite_dot.py) against LiteRT's reference
kernels: every path of its C (the host's plain C, the Cortex-M3's too, the Cortex-M4's
``SMLAD``, the Cortex-M55's ``VMLADAVA``) on one ``.tflite`` of FULLY_CONNECTED cases (depths
not a multiple of 16 or 4, rows not a multiple of the groups, batches, per-channel, a filter
zero point, no bias), forced with ``--form FULLY_CONNECTED=dot``; one firmware a board. The
``fc_ties`` cases land on ties, where a double rounding differs from LiteRT (the control of
tests/test_compile_ops.py shows it), so the requantization is checked too."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import List, Tuple

import numpy as np
import pytest
from compile_cases import CASES, Case, cases_model, fc_case
from conftest import requires_arm
from litert_oracle import runs_beside_litert
from tflite_builders import TfliteWriter

from project_api.compile import compile_tflite
from project_api.driver import Project
from project_api.errors import CompileError
from project_api.modelgen import compare_outputs

DOT_CASES = [case for case in CASES if case.name.startswith("fc_") and "hybrid" not in case.name]
DOT_CASES += [
    Case("dot_d8_r12", fc_case((1, 8), 12, "NONE")),  # depth one tail vector
    Case("dot_d48_r9_relu", fc_case((1, 48), 9, "RELU", in_scale=0.01)),  # 16s, rows past 4s
    Case("dot_d131_b3_pc", fc_case((3, 131), 5, "NONE", per_channel=True, in_scale=0.01)),
    Case("dot_d70_r6_zp_nobias", fc_case((2, 70), 6, "RELU6", bias=False, filter_zp=-2)),
    Case("dot_d3_r1", fc_case((2, 3), 1, "NONE")),
]  # fmt: skip


def dot_model(seed: int = 3) -> Tuple[bytes, List[str]]:
    rng = np.random.default_rng(seed)
    w = TfliteWriter()
    inputs, outputs = [], []
    for case in DOT_CASES:
        x, y = case.add(w, rng, "int8")
        w.tensors[x].name = f"{case.name}_in"
        inputs.append(x)
        outputs.append(y)
    return w.finish(inputs, outputs), [case.name for case in DOT_CASES]


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Tuple[bytes, List[str], Path]:
    work = tmp_path_factory.mktemp("dot")
    model, names = dot_model()
    (work / "dot.tflite").write_bytes(model)
    path = compile_tflite(work / "dot.tflite", work / "dot.tar", forms={"FULLY_CONNECTED": "dot"})
    return model, names, path


def differences(project: Project, model: bytes, names: List[str], runs: int) -> List[str]:
    problems: List[str] = []
    with project.session(timeout=120) as session:
        for seed, got, want in runs_beside_litert(session, model, range(runs)):
            for i, name in enumerate(names):
                expected = {f"output{i}": want[i].reshape(got[f"output{i}"].shape)}
                found = compare_outputs(got, expected, rtol=0)
                problems.extend(f"{name} (seed {seed}): {p}" for p in found)
    return problems


def test_dot_form_recorded_and_exact_on_the_host(
    archive: Tuple[bytes, List[str], Path], tmp_path: Path
) -> None:
    model, names, path = archive
    with tarfile.open(path) as tar:
        member = tar.extractfile("./src/default.kernels.json")
        assert member is not None
        record = json.loads(member.read())["operators"]
    assert len(record) == len(names) and {op["form"] for op in record} == {"dot"}
    assert all(op["why"]["by"] == "forced" for op in record)
    project = Project.generate(path, tmp_path / "project")
    project.build()
    assert differences(project, model, names, 3) == []
    source = "".join(p.read_text() for p in (tmp_path / "project").rglob("*.c"))
    assert "vmladavaq_s8" in source and "__smlad" in source and "vmulhq_u32" in source


@pytest.mark.qemu
@requires_arm
@pytest.mark.parametrize("board", ["qemu-mps2-an385", "qemu-mps2-an386", "qemu-mps3-an547"])
def test_dot_form_exact_on_cortex_m(
    archive: Tuple[bytes, List[str], Path], board: str, tmp_path: Path
) -> None:
    model, names, path = archive
    project = Project.generate(path, tmp_path / "project", board=board)
    project.build()
    assert differences(project, model, names, 2) == []


AD01 = Path(__file__).resolve().parents[2] / "shared" / "models" / "ad01_int8.tflite"


ON_ARM = [pytest.mark.qemu, requires_arm]


@pytest.mark.parametrize("board", [
    "host",
    pytest.param("qemu-mps2-an386", marks=ON_ARM),
    pytest.param("qemu-mps3-an547", marks=ON_ARM),
])  # fmt: skip
def test_ad01_whole_on_dot_exact(board: str, tmp_path: Path) -> None:
    """MLPerf Tiny's AD01 (ten FULLY_CONNECTED layers), every layer on ``dot``."""
    if not AD01.is_file():
        pytest.skip(f"needs {AD01}")
    model = AD01.read_bytes()
    path = compile_tflite(AD01, tmp_path / "ad01.tar", forms={"FULLY_CONNECTED": "dot"})
    project = Project.generate(path, tmp_path / "project", board=board)
    project.build()
    assert differences(project, model, ["ad01"], 2) == []


@pytest.mark.parametrize("dtype, kind, said", [
    ("int8", "CONV_2D", r"\(CONV_2D\): form dot takes FULLY_CONNECTED only"),
    ("float32", "FULLY_CONNECTED", r"\(FULLY_CONNECTED\): form dot takes int8 only"),
])  # fmt: skip
def test_dot_forced_where_it_cannot_is_refused(
    dtype: str, kind: str, said: str, tmp_path: Path
) -> None:
    model, _ = cases_model(dtype)
    (tmp_path / "m.tflite").write_bytes(model)
    with pytest.raises(CompileError, match=said):
        compile_tflite(tmp_path / "m.tflite", tmp_path / "m.tar", forms={kind: "dot"})
    assert not (tmp_path / "m.tar").exists()


def test_tiling_budget_counts_dot_layers(tmp_path: Path) -> None:
    """The tiled stages' recompute budget (compile/tiling.py ``model_macs``) counts a
    FULLY_CONNECTED in the dot form as the same multiply-accumulates as in ``ref``: the
    control is the ref lowering of the same model."""
    from project_api.compile import read_tflite
    from project_api.compile.choose import choose_forms
    from project_api.compile.lower import lower_model
    from project_api.compile.tiling import model_macs

    model_bytes, _ = dot_model()
    (tmp_path / "dot.tflite").write_bytes(model_bytes)
    model = read_tflite(tmp_path / "dot.tflite")
    plain = lower_model(model, "dot", None, choose_forms(model))
    dotted = lower_model(model, "dot", None, choose_forms(model, forced={"FULLY_CONNECTED": "dot"}))
    assert type(dotted.ops[0].op).__name__ != type(plain.ops[0].op).__name__
    assert model_macs(plain) > 0
    assert model_macs(dotted) == model_macs(plain)
