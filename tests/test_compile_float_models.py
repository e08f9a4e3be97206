"""float32 twins of the shared int8 models (tests/float_models.py: weights dequantized, every
tensor float32) through ``compile``, built for the host once each and run against LiteRT's
reference kernels: every output bit-identical (the host's C has no fused multiply-add; the
kernels keep LiteRT's order of every sum)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Iterator, Tuple

import numpy as np
import pytest
from conftest import requires_arm
from float_models import float_twin
from litert_oracle import litert_outputs, random_inputs, runs_beside_litert
from test_compile_models import shared_model

from project_api.compile import compile_tflite
from project_api.driver import Project

SEEDS = (0, 1)
STEMS = ["kws_ref_model", "ad01_int8", "pretrainedResnet_quant", "vww_96_int8"]


@pytest.fixture(scope="module", params=STEMS)
def built(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tuple[bytes, Project]]:
    """One model's float32 twin, compiled (graph executor, the default forms) and built."""
    model = float_twin(shared_model(request.param))
    work = tmp_path_factory.mktemp(f"float_{request.param}")
    path = work / "model.tflite"
    path.write_bytes(model)
    archive = compile_tflite(path, work / "model.tar")
    project = Project.generate(archive, work / "project")
    project.build()
    yield model, project


def test_float_twin_is_float(built: Tuple[bytes, Project]) -> None:
    """The twin really is float32 at both ends (else the next test compares int8)."""
    model, _ = built
    inputs = random_inputs(model, 0)
    assert all(x.dtype == np.float32 for x in inputs.values())
    assert all(y.dtype == np.float32 for y in litert_outputs(model, inputs))


def test_float_twin_equals_litert(built: Tuple[bytes, Project]) -> None:
    model, project = built
    with project.session(timeout=120) as session:
        for _, got, want in runs_beside_litert(session, model, SEEDS):
            for i, expected in enumerate(want):
                value = got[f"output{i}"].reshape(expected.shape)
                assert len(np.unique(expected)) > 1, "degenerate outputs"
                np.testing.assert_array_equal(value, expected)


def test_float_twin_drops_the_ends(tmp_path: Path) -> None:
    """A QUANTIZE after the input and a DEQUANTIZE before the output go: the twin of such a
    model is one float32 operator."""
    from tflite_builders import TfliteWriter, fc_options

    from project_api.compile import read_tflite

    w = TfliteWriter()
    x = w.tensor((1, 4), "float32", name="x")
    q = w.tensor((1, 4), "int8", scale=0.1, zero_point=2)
    f = w.tensor((3, 4), "int8", data=np.arange(12).reshape(3, 4) - 6, scale=0.5)
    y = w.tensor((1, 3), "int8", scale=0.2, zero_point=-1)
    z = w.tensor((1, 3), "float32", name="z")
    w.op("QUANTIZE", [x], [q])
    w.op("FULLY_CONNECTED", [q, f, -1], [y], options=fc_options(), version=4)
    w.op("DEQUANTIZE", [y], [z])
    (tmp_path / "q.tflite").write_bytes(w.finish([x], [z]))
    (tmp_path / "f.tflite").write_bytes(float_twin(tmp_path / "q.tflite"))
    twin = read_tflite(tmp_path / "f.tflite")
    assert [op.name for op in twin.operators] == ["FULLY_CONNECTED"]
    assert {t.dtype for t in twin.tensors} == {"float32"}
    weights = twin.tensors[twin.operators[0].inputs[1]].array()
    np.testing.assert_array_equal(weights, (np.arange(12).reshape(3, 4) - 6) * 0.5)


FPU_CASES = ("conv_same_relu_pc", "conv_1x1_odd", "dw_m2_same_s2_relu", "fc_relu6",
             "conv_hybrid_in_float", "fc_hybrid_in_float", "dw_hybrid_valid_dil")  # fmt: skip


def float_cases(path: Path) -> bytes:
    """FPU_CASES of tests/compile_cases.py in float32, one model, written to ``path``."""
    from compile_cases import CASES
    from tflite_builders import TfliteWriter

    rng = np.random.default_rng(0)
    w = TfliteWriter()
    inputs, outputs = [], []
    for case in (c for c in CASES if c.name in FPU_CASES):
        x, y = case.add(w, rng, "float32")
        w.tensors[x].name = case.name
        inputs.append(x)
        outputs.append(y)
    model = w.finish(inputs, outputs)
    path.write_bytes(model)
    return model


def differing(project: Project, model: bytes) -> int:
    """Elements of the built ``project``'s outputs not bit-identical to LiteRT's."""
    count = 0
    with project.session(timeout=120) as session:
        for _, got, outputs in runs_beside_litert(session, model, SEEDS):
            for i, want in enumerate(outputs):
                count += int(np.sum(got[f"output{i}"].reshape(want.shape) != want))
    return count


@pytest.mark.qemu
@requires_arm
def test_float_kernels_on_an_fpu_equal_litert(tmp_path: Path) -> None:
    """On a Cortex-M4F (single-precision FPU with a fused multiply-add, which GCC uses
    unless told not to) the float kernels' outputs are LiteRT's to the bit: their C turns
    contraction off. The control, the same archive built with ``MLF_FP_CONTRACT`` (GCC
    fuses again), differs."""
    model = float_cases(tmp_path / "m.tflite")
    archive = compile_tflite(tmp_path / "m.tflite", tmp_path / "m.tar")
    found = {}
    for label, options in (("exact", {}), ("fused", {"compile_definitions": "MLF_FP_CONTRACT"})):
        project = Project.generate(
            archive, tmp_path / label, board="qemu-mps2-an386", options=options
        )
        project.build()
        found[label] = differing(project, model)
    assert found["exact"] == 0
    assert found["fused"] > 0, "the control: GCC's fused multiply-adds should show"


@pytest.mark.qemu
@requires_arm
def test_float_kernels_on_a_soft_float_core_equal_litert(tmp_path: Path) -> None:
    """On a Cortex-M3 (no FPU) the float kernels' taps are the integer multiply-add
    (modelgen/ops/tflite_soft_float.py): its code is in the firmware, and the outputs are
    LiteRT's to the bit. The control, built with ``MLF_SOFT_FMAC=0``, has none of it."""
    model = float_cases(tmp_path / "m.tflite")
    archive = compile_tflite(tmp_path / "m.tflite", tmp_path / "m.tar")
    symbols = {}
    for label, options in (("soft", {}), ("libgcc", {"compile_definitions": "MLF_SOFT_FMAC=0"})):
        project = Project.generate(
            archive, tmp_path / label, board="qemu-mps2-an385", options=options
        )
        project.build()
        listed = subprocess.run(["arm-none-eabi-nm", str(project.firmware)],
                                capture_output=True, text=True, check=True)  # fmt: skip
        symbols[label] = "mlf_fdot" in listed.stdout
        if label == "soft":
            assert differing(project, model) == 0
    assert symbols == {"soft": True, "libgcc": False}
