"""``compile --cmsis-nn``: the int8 operators CMSIS-NN v7.0.0 computes call it, against LiteRT's
reference kernels.

One ``.tflite`` holds every operator case of tests/compile_cases.py (int8); compiled with
``--cmsis-nn --form FULLY_CONNECTED=cmsis-nn`` (every CMSIS-NN kernel) it is built once per
machine: the host (CMSIS-NN's portable C), and under QEMU the Cortex-M4 (qemu-mps2-an386, DSP)
and the Cortex-M55 (qemu-mps3-an547, MVE). Every output equals LiteRT's (``BUILTIN_REF``)
except where docs/compile.md states a difference: a FULLY_CONNECTED on CMSIS-NN rounds twice
where LiteRT 2.3 rounds once, at most 1 apart (:data:`ALLOWED`), and only there (plain
``--cmsis-nn`` keeps FULLY_CONNECTED on our C for that). KWS with ``--cmsis-nn`` runs on both
Cortex-M machines, equal to LiteRT. The archive records each operator's form and CMSIS-NN's
own scratch answers.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import numpy as np
import pytest
from compile_cases import (
    CASES,
    CONTROL,
    Case,
    binary_case,
    cases_model,
    conv_case,
    fc_case,
    pool_case,
    tiny_model,
)
from conftest import CMSIS_NN_SKIP, REPO_ROOT, cmsis_nn_given, requires_arm
from litert_oracle import assert_runs_as_litert, random_inputs, runs_beside_litert
from tflite_builders import TfliteWriter
from workspace_marks import over_window, planned_windows

from project_api.cli.info import describe_model
from project_api.compile import CmsisNnSource, compile_tflite, parse_forced
from project_api.compile.forms import CMSIS_NN_DEPENDENCY
from project_api.driver import Project
from project_api.errors import CompileError
from project_api.read import open_archive

pytestmark = pytest.mark.skipif(not cmsis_nn_given(), reason=CMSIS_NN_SKIP)

TAG = CMSIS_NN_DEPENDENCY["version_spec"]
KWS = REPO_ROOT.parent / "shared" / "models" / "kws_ref_model.tflite"
# The largest difference from LiteRT a case may show, by the kind of its operator under
# CMSIS-NN (docs/compile.md): FULLY_CONNECTED's double rounding against LiteRT's single one.
ALLOWED = {"fc": 1, CONTROL: 1}
# Cases whose operator is FULLY_CONNECTED on CMSIS-NN and whose ties must show the difference.
MUST_DIFFER = ("fc_ties", CONTROL)
RUNS = 3
# Shapes that take the paths CMSIS-NN's wrappers choose between, beyond compile_cases's: 1x1
# fast and strided, 1xN, 3x3 and larger channel-for-channel depthwise (DSP's 3x3 code, the
# "opt" code), a one-input-channel depthwise (run as a convolution on MVE), pools and element-
# wise kernels over lengths that are no multiple of the vector width.
PATH_CASES = [
    Case("path_conv_1x1_fast", conv_case((1, 5, 4, 16), (8, 1, 1, 16), {"padding": "VALID"})),
    Case("path_conv_1x1_s2",
         conv_case((1, 6, 6, 8), (5, 1, 1, 8), {"padding": "VALID", "stride": (2, 2)})),
    Case("path_conv_1xn", conv_case((1, 1, 12, 4), (6, 1, 3, 4), {})),
    Case("path_dw_3x3_c16", conv_case((1, 6, 6, 16), (1, 3, 3, 16), {}, depthwise=True)),
    Case("path_dw_5x5_c12", conv_case((1, 7, 7, 12), (1, 5, 5, 12), {}, depthwise=True)),
    Case("path_dw_one_input_channel",
         conv_case((1, 12, 6, 1), (1, 4, 3, 16), {"stride": (2, 2), "multiplier": 16},
                   depthwise=True)),
    Case("path_avg_c16", pool_case("AVERAGE_POOL_2D", (1, 5, 4, 16),
                                   {"size": (5, 4), "stride": (1, 1)})),
    Case("fc_depth64", fc_case((1, 64), 12, "RELU")),
    Case("path_add_37", binary_case("ADD", (1, 37), (1, 37))),
    # one input channel: the direct form (--cmsis-nn's rule), every path of its C: taps in
    # whole quads / with a tail / past one 16-lane vector, channels not a multiple of 4,
    # clamps short of int8's range, dilation, batches, per-tensor quantization, ties
    Case("direct_kws_like", conv_case((1, 13, 6, 1), (8, 5, 4, 1), {"stride": (2, 2)})),
    Case("direct_tail_oc6_relu6", conv_case((1, 7, 5, 1), (6, 3, 3, 1), {"act": "RELU6"})),
    Case("direct_dilated_batches",
         conv_case((2, 9, 8, 1), (5, 2, 3, 1), {"padding": "VALID", "dilation": (2, 2)},
                   per_channel=False)),
    Case("direct_wide_s12", conv_case((1, 10, 11, 1), (3, 5, 7, 1), {"stride": (1, 2)})),
    Case("direct_ties", conv_case((1, 6, 6, 1), (4, 3, 4, 1), {"act": "RELU"}, ties=True)),
    # its padded input past 1 KiB: taken from the operator's workspace window, not the stack
    Case("direct_padded_in_workspace", conv_case((1, 36, 30, 1), (4, 3, 3, 1), {"stride": (2, 2)})),
    # 1x1: the simd form (ours on DSP and Helium, CMSIS-NN's call on the host): channels in
    # whole vectors or not, a tail past the quads, per-tensor, strides, channels out not a
    # multiple of 4 (with path_conv_1x1_* and compile_cases's 1x1)
    Case("simd_c20_oc6_relu6", conv_case((1, 5, 3, 20), (6, 1, 1, 20), {"act": "RELU6"})),
    Case("simd_c37_s2", conv_case((1, 4, 4, 37), (9, 1, 1, 37), {"stride": (2, 2)},
                                  per_channel=False)),
    Case("path_mul_37", binary_case("MUL", (1, 37), (1, 37), "RELU")),
]  # fmt: skip


def all_cases_model(seed: int = 0) -> Tuple[bytes, List[str]]:
    """compile_cases's int8 cases and :data:`PATH_CASES` in one ``.tflite``, as
    ``cases_model`` builds it; not the per-channel FULLY_CONNECTED cases (``fc_pc_``) nor
    those with a filter zero point (``fc_zp_``), which the cmsis-nn form refuses when
    FULLY_CONNECTED is forced onto it (its one multiplier, its filter offset 0:
    test_forms_chosen_and_forced)."""
    rng = np.random.default_rng(seed)
    w = TfliteWriter()
    inputs, outputs = [], []
    refused = ("fc_pc_", "fc_zp_")
    chosen = [case for case in [*CASES, *PATH_CASES] if not case.name.startswith(refused)]
    for case in chosen:
        x, y = case.add(w, rng, "int8")
        fed = x if isinstance(x, tuple) else (x,)
        for number, tensor in enumerate(fed):
            w.tensors[tensor].name = f"{case.name}_in" + (f"{number}" if number else "")
            inputs.append(tensor)
        outputs.append(y)
    return w.finish(inputs, outputs), [case.name for case in chosen]


@pytest.fixture(scope="module")
def cmsis_v7(cmsis_v7_checkout: Path) -> Path:
    """CMSIS-NN at the tag the archive names, checked out once."""
    assert TAG == "v7.0.0"
    return cmsis_v7_checkout


@pytest.fixture(scope="module")
def cases(
    tmp_path_factory: pytest.TempPathFactory, cmsis_v7: Path
) -> Tuple[bytes, List[str], Path]:
    work = tmp_path_factory.mktemp("cmsis_cases")
    model, names = all_cases_model()
    (work / "cases.tflite").write_bytes(model)
    archive = compile_tflite(
        work / "cases.tflite",
        work / "cases.tar",
        cmsis_nn=True,
        forms={"FULLY_CONNECTED": "cmsis-nn"},
        source=CmsisNnSource(cmsis_path=str(cmsis_v7)),
    )
    return model, names, archive


def kernel_forms(archive: Path) -> Dict[str, object]:
    with tarfile.open(archive) as tar:
        member = tar.extractfile("./src/default.kernels.json")
        assert member is not None
        return json.loads(member.read())


def check_cases(project: Project, model: bytes, names: List[str], runs: int) -> None:
    """Every case equal to LiteRT, or within :data:`ALLOWED` where stated; the stated
    differences must show up (else the allowance is not needed: a test that cannot fail)."""
    problems: List[str] = []
    largest: Dict[str, int] = {}
    with project.session(timeout=120) as session:
        for seed, got, want in runs_beside_litert(session, model, range(runs)):
            for i, name in enumerate(names):
                actual = got[f"output{i}"].reshape(want[i].shape)
                if want[i].dtype != np.int8:
                    continue
                diff = int(np.max(np.abs(actual.astype(np.int32) - want[i].astype(np.int32))))
                largest[name] = max(largest.get(name, 0), diff)
                allowed = next((v for k, v in ALLOWED.items() if name.startswith(k)), 0)
                if diff > allowed:
                    problems.append(f"{name} (seed {seed}): differs by {diff} > {allowed}")
    assert problems == []
    assert all(largest[name] == 1 for name in MUST_DIFFER), largest


def test_archive_records_forms_and_library_answers(cases: Tuple[bytes, List[str], Path]) -> None:
    _, _, archive = cases
    record = kernel_forms(archive)
    operators = record["operators"]
    assert isinstance(operators, list)
    forms = {(op["operator"], op["form"]) for op in operators}
    for kind in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "AVERAGE_POOL_2D",
                 "MAX_POOL_2D", "ADD", "MUL"):  # fmt: skip
        assert (kind, "cmsis-nn") in forms, kind
    # broadcasting ADD/MUL, softmax and the float-only steps stay on our C
    assert ("ADD", "ref") in forms and ("SOFTMAX", "ref") in forms
    # --cmsis-nn's rule (the rules table's default class): a one-input-channel CONV_2D takes the
    # direct form (the six direct_* cases, and compile_cases's), a 1x1 one the simd form
    direct = [op for op in operators if op["form"] == "direct"]
    assert len(direct) >= 6 and {op["operator"] for op in direct} == {"CONV_2D"}
    assert all(op["why"]["by"] == "rule" for op in direct), direct
    simd = [op for op in operators if op["form"] == "simd"]
    assert len(simd) >= 5 and {op["operator"] for op in simd} == {"CONV_2D"}
    assert all(op["call"] == "arm_convolve_wrapper_s8" for op in simd)
    assert all(op["scratch"]["dsp"] == op["scratch"]["mve"] == 0 for op in simd)
    assert ("SOFTMAX", "cmsis-nn") not in forms
    calls = {op["call"]: op["scratch"] for op in operators if op["form"] == "cmsis-nn"}
    assert calls["arm_fully_connected_s8"]["mve"] > 0 == calls["arm_fully_connected_s8"]["dsp"]
    with tarfile.open(archive) as tar:
        meta = json.loads(tar.extractfile("./metadata.json").read())  # type: ignore[union-attr]
    assert meta["modules"]["default"]["external_dependencies"] == [CMSIS_NN_DEPENDENCY]
    # info shows each operator's form and the library's answers
    with open_archive(archive) as opened:
        text = "\n".join(describe_model(opened.models[0]))
    assert "kernel forms (compile):" in text and "SOFTMAX: ref" in text
    assert "CONV_2D: cmsis-nn (arm_convolve_wrapper_s8; scratch B: portable" in text
    assert "CONV_2D: direct  [rule default/CONV_2D]" in text


def test_forms_chosen_and_forced(tmp_path: Path, cmsis_v7: Path) -> None:
    """Plain --cmsis-nn puts FULLY_CONNECTED on our exact dot products (never on CMSIS-NN's,
    which rounds twice); --form forces either way."""
    model, _ = cases_model("int8")
    path = tmp_path / "cases.tflite"
    path.write_bytes(model)
    source = CmsisNnSource(cmsis_path=str(cmsis_v7))
    archive = compile_tflite(path, tmp_path / "a.tar", cmsis_nn=True, source=source)
    forms = {(op["operator"], op["form"]) for op in kernel_forms(archive)["operators"]}
    assert ("FULLY_CONNECTED", "dot") in forms and ("CONV_2D", "cmsis-nn") in forms
    assert ("FULLY_CONNECTED", "cmsis-nn") not in forms
    archive = compile_tflite(path, tmp_path / "r.tar", cmsis_nn=True, source=source,
                             forms=parse_forced(["conv_2d=ref"]))  # fmt: skip
    forms = {(op["operator"], op["form"]) for op in kernel_forms(archive)["operators"]}
    assert ("CONV_2D", "ref") in forms and ("CONV_2D", "cmsis-nn") not in forms
    # a form forced where it cannot compute: one line, nothing written
    with pytest.raises(CompileError, match=r"operator \d+ \(SOFTMAX\): form cmsis-nn"):
        compile_tflite(path, tmp_path / "b.tar", forms={"SOFTMAX": "cmsis-nn"}, source=source)
    assert not (tmp_path / "b.tar").exists()
    # per-channel FULLY_CONNECTED (compile_cases's fc_pc_*): arm_fully_connected_s8 takes one
    # multiplier, so forcing the form on it is refused too
    with pytest.raises(CompileError, match="FULLY_CONNECTED.*per-tensor filter quantization"):
        compile_tflite(path, tmp_path / "b.tar", forms={"FULLY_CONNECTED": "cmsis-nn"},
                       source=source)  # fmt: skip
    assert not (tmp_path / "b.tar").exists()
    # the direct form takes one input channel only; forced elsewhere it is refused
    with pytest.raises(CompileError, match=r"\(CONV_2D\): form direct takes a single input"):
        compile_tflite(path, tmp_path / "c.tar", forms={"CONV_2D": "direct"}, source=source)
    # forced without --cmsis-nn where it can, it needs no CMSIS-NN; a forced cmsis-nn wins
    # over --cmsis-nn's rule
    rng, w = np.random.default_rng(0), TfliteWriter()
    x, y = conv_case((1, 7, 5, 1), (6, 3, 3, 1), {})(w, rng, "int8")
    path = tmp_path / "one.tflite"
    path.write_bytes(w.finish([x], [y]))
    archive = compile_tflite(path, tmp_path / "d.tar", forms={"CONV_2D": "direct"})
    assert [op["form"] for op in kernel_forms(archive)["operators"]] == ["direct"]
    with tarfile.open(archive) as tar:
        meta = json.loads(tar.extractfile("./metadata.json").read())  # type: ignore[union-attr]
    assert meta["modules"]["default"].get("external_dependencies", []) == []
    archive = compile_tflite(path, tmp_path / "e.tar", forms={"CONV_2D": "cmsis-nn"},
                             cmsis_nn=True, source=source)  # fmt: skip
    assert [op["form"] for op in kernel_forms(archive)["operators"]] == ["cmsis-nn"]
    for bad in ("CONV_2D=fast", "CONV_3D=ref", "CONV_2D"):
        with pytest.raises(CompileError, match="--form"):
            parse_forced([bad])


def test_cases_on_the_host(
    cases: Tuple[bytes, List[str], Path], cmsis_v7: Path, tmp_path: Path
) -> None:
    model, names, archive = cases
    project = Project.generate(archive, tmp_path / "p", options={"cmsis_path": str(cmsis_v7)})
    project.build()
    check_cases(project, model, names, RUNS)
    # CMSIS-NN's scratch, taken at run time as the linked library answers, lies within each
    # operator's planned window, which holds the answer recorded at compile time
    windows, funcs, _ = planned_windows(archive)
    with project.session(timeout=60) as session:
        session.run(random_inputs(model, 0))
        assert session.last_stats is not None
        marks = session.last_stats.workspace_marks
    assert marks is not None and over_window(marks, windows, funcs) == []
    asking = {op["function"] for op in kernel_forms(archive)["operators"]
              if op.get("scratch", {}).get("portable")}  # fmt: skip
    taken = [m for m, f in zip(marks, funcs) if f in asking]
    assert asking and taken and all(m > 0 for m in taken), (asking, taken)


@pytest.mark.parametrize("interface", ["c", "packed"])
def test_aot_archive_on_the_host(interface: str, tmp_path: Path, cmsis_v7: Path) -> None:
    """The small chain as an AOT archive (unpacked calls, one workspace; or TVM's packed
    interface) with --cmsis-nn: equal to LiteRT."""
    path = tmp_path / "tiny.tflite"
    path.write_bytes(tiny_model("int8"))
    archive = compile_tflite(path, tmp_path / "aot.tar", executor="aot", cmsis_nn=True,
                             interface=interface,
                             source=CmsisNnSource(cmsis_path=str(cmsis_v7)))  # fmt: skip
    forms = {op["form"] for op in kernel_forms(archive)["operators"]}
    assert forms == {"ref", "cmsis-nn", "dot"}
    project = Project.generate(archive, tmp_path / "p", options={"cmsis_path": str(cmsis_v7)})
    project.build()
    assert_runs_as_litert(project, path.read_bytes(), range(3))


@pytest.fixture(scope="module")
def kws(tmp_path_factory: pytest.TempPathFactory, cmsis_v7: Path) -> Iterator[Path]:
    if not KWS.is_file():
        pytest.skip(f"needs {KWS}")
    work = tmp_path_factory.mktemp("cmsis_kws")
    yield compile_tflite(KWS, work / "kws.tar", cmsis_nn=True,
                         source=CmsisNnSource(cmsis_path=str(cmsis_v7)))  # fmt: skip


@pytest.mark.qemu
@requires_arm
@pytest.mark.parametrize("board", ["qemu-mps2-an386", "qemu-mps3-an547"])
def test_on_cortex_m(
    board: str, cases: Tuple[bytes, List[str], Path], kws: Path, cmsis_v7: Path, tmp_path: Path
) -> None:
    """DSP (Cortex-M4) and MVE (Cortex-M55): the cases, then KWS, equal to LiteRT."""
    model, names, archive = cases
    options = {"cmsis_path": str(cmsis_v7)}
    project = Project.generate(archive, tmp_path / "cases", board=board, options=options)
    project.build()
    check_cases(project, model, names, 1)
    kws_project = Project.generate(kws, tmp_path / "kws", board=board, options=options)
    kws_project.build()
    assert_runs_as_litert(kws_project, KWS.read_bytes(), range(2), timeout=120)
