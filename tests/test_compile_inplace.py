"""Memory below the tensor liveness bound: operators whose output overwrites an input that
dies there (modelgen/plan.py, ``Op.inplace_input``), and their outputs still equal LiteRT's.
"""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np
import pytest
from compile_cases import cmsis_in_place_model, conv_case, tiny_model
from conftest import REPO_ROOT, host_and_arm
from litert_oracle import assert_runs_as_litert
from tflite_builders import TfliteWriter

from project_api.compile import CmsisNnSource, compile_tflite, read_tflite
from project_api.compile.lower import lower_model
from project_api.driver import Project
from project_api.modelgen.lower import Lowered
from project_api.modelgen.ops.tflite_cmsis import CmsisConv
from project_api.modelgen.ops.tflite_cmsis_rows import CmsisDepthwiseRows
from project_api.modelgen.ops.tflite_fast import force_form
from project_api.modelgen.plan import PlanNode, plan_storage

KWS = REPO_ROOT.parent / "shared" / "models" / "kws_ref_model.tflite"


def test_plan_takes_a_dying_input_only() -> None:
    """Entry 0 is a model input (pinned), 1 and 2 intermediates, 3 the head."""
    sizes = [16, 16, 16, 16]

    def plan(inplace_at_1: bool, extra_reader: bool) -> List[int]:
        nodes = [
            PlanNode("null", (), (0,)),
            PlanNode("op", (0,), (1,), 0),  # may overwrite the model input: never
            PlanNode("op", (1,), (2,), 0 if inplace_at_1 else None),
            PlanNode("op", (2, 1) if extra_reader else (2,), (3,), 0),
        ]
        return plan_storage(nodes, sizes, heads=[3])

    ids = plan(True, False)
    assert ids[1] != ids[0]  # a pinned input keeps its storage
    assert ids[2] == ids[1]  # 1 dies at node 2: its storage taken
    assert ids[3] == ids[2]  # 2 dies at node 3: taken again (the head may take it)
    assert plan(False, False)[2] != plan(False, False)[1]  # the control: not in place
    alive = plan(True, True)  # entry 1 is read again by node 3: node 2 may not take it
    assert alive[2] != alive[1]
    assert alive[3] == alive[2]  # node 3 is 2's last reader: it may take 2's storage


def _sharing(lowered: Lowered) -> List[str]:
    """The operators (function names) whose first output shares its first input's storage."""
    shared = []
    for nid, name in zip(lowered.op_nodes, lowered.op_functions):
        node = lowered.nodes[nid]
        if not node["inputs"] or name == "__nop":
            continue
        src, index, _ = node["inputs"][0]
        entry_in = lowered.node_row_ptr[src] + index
        entry_out = lowered.node_row_ptr[nid]
        if lowered.storage_ids[entry_in] == lowered.storage_ids[entry_out]:
            shared.append(name)
    return shared


def test_kws_runs_in_one_tensor_buffer() -> None:
    if not KWS.exists():
        pytest.skip(f"{KWS} is absent (the shared models live in ../shared/models)")
    network = lower_model(read_tflite(KWS))
    lowered = network.build().lowered
    shared = _sharing(lowered)
    # four depthwise and four 1×1 convolutions overwrite their inputs
    assert len([n for n in shared if "depthwise" in n]) == 4
    assert len([n for n in shared if "depthwise" not in n and "conv_2d" in n]) == 4
    # and the four of each shape share one helper's code (one static function each)
    helpers = {
        name
        for function in lowered.functions.values()
        for name in re.findall(r"static void (mlf_tfl_\w+)\(", function.text.text)
    }
    assert len(helpers) == 2, helpers
    reference = lower_model(read_tflite(KWS))
    force_form(reference, "reference")
    assert _sharing(reference.build().lowered) == []


def test_in_place_chain_equals_litert(tmp_path: Path) -> None:
    """CONV → DEPTHWISE (in place) → … → FULLY_CONNECTED → ADD (in place) → SOFTMAX on the
    host: the same outputs as LiteRT's reference kernels."""
    path = tmp_path / "tiny.tflite"
    path.write_bytes(tiny_model("int8"))
    model = lower_model(read_tflite(path)).build()
    shared = _sharing(model.lowered)
    # one operator of each shape: no helper (its constants stay in its own C)
    assert not any("static void" in f.text.text for f in model.lowered.functions.values())
    assert any("depthwise" in n for n in shared) and any("add" in n for n in shared), shared
    archive = model.write(tmp_path / "tiny.tar")
    project = Project.generate(archive, tmp_path / "project")
    project.build()
    assert_runs_as_litert(project, path.read_bytes(), range(3))


def _archive_sharing(archive: Path) -> List[str]:
    """The operators (node names) of an archive's graph whose first output shares its first
    input's storage."""
    with tarfile.open(archive) as tar:
        member = tar.extractfile("./executor-config/graph/default.graph")
        assert member is not None
        graph = json.load(member)
    sids, rows = graph["attrs"]["storage_id"][1], graph["node_row_ptr"]
    shared = []
    for nid, node in enumerate(graph["nodes"]):
        if node["op"] == "null" or "nop" in node["name"]:
            continue
        src, index, _ = node["inputs"][0]
        if sids[rows[src] + index] == sids[rows[nid]]:
            shared.append(node["name"])
    return shared


def pointwise_chain() -> bytes:
    """CONV_2D 3x3 → 1x1 (8 → 16 channels: it widens) → 1x1 (16 → 12) over 7x9 pixels: the
    1x1s overwrite their inputs (63 pixels: CMSIS-NN's call on four groups, the last one
    short; our DSP code blocks of 4 and Helium code blocks of 2, each with a tail; the fast
    form's pairs, the last one a single pixel), the widening one from its last pixel."""
    rng = np.random.default_rng(3)
    w = TfliteWriter()
    x, y = conv_case((1, 7, 9, 4), (8, 3, 3, 4), {"act": "RELU"})(w, rng, "int8")
    w.tensors[x].name = "input"
    _, z = conv_case((1, 7, 9, 8), (16, 1, 1, 8), {"padding": "VALID"})(w, rng, "int8")
    w.ops[-1].inputs[0] = y
    _, out = conv_case((1, 7, 9, 16), (12, 1, 1, 16), {"padding": "VALID", "act": "RELU6"})(
        w, rng, "int8"
    )
    w.ops[-1].inputs[0] = z
    return w.finish([x], [out])


def test_widening_pointwise_in_place_equals_litert(tmp_path: Path) -> None:
    """The ref form's 1x1s in place, the one that widens (8 → 16) from its last pixel into
    its input's grown storage: the same outputs as LiteRT's reference kernels."""
    path = tmp_path / "chain.tflite"
    path.write_bytes(pointwise_chain())
    model = lower_model(read_tflite(path)).build()
    shared = _sharing(model.lowered)
    assert len([n for n in shared if "conv_2d" in n]) == 2, shared
    sizes = model.lowered.storage_bytes
    assert 7 * 9 * 16 in sizes and 7 * 9 * 8 not in sizes, sizes  # the input's storage grew
    control = lower_model(read_tflite(path))
    force_form(control, "reference")
    assert _sharing(control.build().lowered) == []
    project = Project.generate(model.write(tmp_path / "chain.tar"), tmp_path / "project")
    project.build()
    assert_runs_as_litert(project, path.read_bytes(), range(2))


@pytest.fixture(scope="module")
def simd_chain(
    tmp_path_factory: pytest.TempPathFactory, cmsis_v7_checkout: Path
) -> Tuple[bytes, Path]:
    work = tmp_path_factory.mktemp("simd_in_place")
    model = pointwise_chain()
    (work / "chain.tflite").write_bytes(model)
    source = CmsisNnSource(cmsis_path=str(cmsis_v7_checkout))
    archive = compile_tflite(  # untiled: a stage would take the chain (test_compile_tiling)
        work / "chain.tflite", work / "chain.tar", cmsis_nn=True, source=source, tiling="off"
    )
    shared = _archive_sharing(archive)
    assert len([n for n in shared if "conv_2d_simd" in n]) == 2, shared
    # the group buffer (16 pixels' output) is asked on cores without DSP or Helium only
    with tarfile.open(archive) as tar:
        member = tar.extractfile("./src/default.kernels.json")
        assert member is not None
        scratch = [o["scratch"] for o in json.load(member)["operators"] if o["form"] == "simd"]
    assert scratch == [{"dsp": 0, "mve": 0, "portable": 16 * oc} for oc in (16, 12)], scratch
    # the control: CMSIS-NN's own call of the 1x1s writes beside its input
    control = compile_tflite(
        work / "chain.tflite", work / "control.tar", cmsis_nn=True, source=source,
        forms={"CONV_2D": "cmsis-nn"}, tiling="off",
    )  # fmt: skip
    assert _archive_sharing(control) == []
    return model, archive


@pytest.mark.parametrize(
    "board",
    host_and_arm("qemu-mps2-an386", "qemu-mps3-an547"),
)
def test_simd_pointwise_in_place_equals_litert(
    board: Optional[str], simd_chain: Tuple[bytes, Path], cmsis_v7_checkout: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    """The simd form's 1x1s in place: CMSIS-NN's call by groups on the host, our SMLAD code
    on the Cortex-M4 and VMLADAV code on the Cortex-M55; the same outputs as LiteRT's
    reference kernels."""
    model, archive = simd_chain
    options = {"cmsis_path": str(cmsis_v7_checkout)}
    project = Project.generate(
        archive, tmp_path / "project", board=board or "host", options=options
    )
    project.build()
    assert_runs_as_litert(project, model, range(2))


def test_kws_on_the_an386_forms_runs_in_one_tensor_buffer(
    tmp_path: Path, cmsis_v7_checkout: Path
) -> None:
    """``--cmsis-nn`` with the Cortex-M4's rules (``ref`` depthwise, ``simd`` 1x1) and the
    Cortex-M55's (CMSIS-NN's depthwise, band by band): all eight layers overwrite their
    inputs (issue 43's RAM target); CMSIS-NN's one call of the depthwise would not (the
    control)."""
    if not KWS.exists():
        pytest.skip(f"{KWS} is absent (the shared models live in ../shared/models)")
    source = CmsisNnSource(cmsis_path=str(cmsis_v7_checkout))

    def shared(cpu: str) -> List[str]:
        out = tmp_path / f"kws_{cpu}.tar"
        return _archive_sharing(compile_tflite(KWS, out, cmsis_nn=True, source=source, cpu=cpu))

    dsp = shared("cortex-m-dsp")
    assert len([n for n in dsp if "depthwise_conv_2d" in n]) == 4, dsp
    assert len([n for n in dsp if "conv_2d_simd" in n]) == 4, dsp
    mve = shared("cortex-m-mve")
    assert len([n for n in mve if "depthwise_conv_2d_cmsis_nn" in n]) == 4, mve
    assert len([n for n in mve if "conv_2d_simd" in n]) == 4, mve
    net = lower_model(read_tflite(KWS))
    depthwise = next(n for n in net.ops if getattr(n.op, "depthwise", False))
    types = [v.type for v in depthwise.inputs]
    assert CmsisDepthwiseRows(depthwise.op).inplace_input(types) == 0
    assert CmsisConv(depthwise.op).inplace_input(types) is None


@pytest.fixture(scope="module")
def cmsis_in_place(
    tmp_path_factory: pytest.TempPathFactory, cmsis_v7_checkout: Path
) -> Tuple[bytes, Path]:
    """The synthetic model in ``--cmsis-nn``'s forms, untiled: the three depthwise layers
    (bands of 1 and 2 rows; stride 2) and the ADD overwrite their inputs."""
    work = tmp_path_factory.mktemp("cmsis_in_place")
    model = cmsis_in_place_model()
    (work / "m.tflite").write_bytes(model)
    source = CmsisNnSource(cmsis_path=str(cmsis_v7_checkout))
    archive = compile_tflite(work / "m.tflite", work / "m.tar", cmsis_nn=True, source=source,
                             tiling="off")  # fmt: skip
    shared = _archive_sharing(archive)
    assert len([n for n in shared if "depthwise_conv_2d_cmsis_nn" in n]) == 3, shared
    assert len([n for n in shared if "add_cmsis_nn" in n]) == 1, shared
    return model, archive


@pytest.mark.parametrize(
    "board",
    host_and_arm("qemu-mps2-an386", "qemu-mps3-an547"),
)
def test_cmsis_nn_in_place_equals_litert(
    board: Optional[str], cmsis_in_place: Tuple[bytes, Path], cmsis_v7_checkout: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    """CMSIS-NN's depthwise band by band and its ADD, in place: LiteRT's outputs with the
    portable C on the host, the DSP code on the Cortex-M4, the Helium code on the M55."""
    model, archive = cmsis_in_place
    options = {"cmsis_path": str(cmsis_v7_checkout)}
    project = Project.generate(
        archive, tmp_path / "project", board=board or "host", options=options
    )
    project.build()
    assert_runs_as_litert(project, model, range(2))
