"""Memory below the tensor liveness bound: operators whose output overwrites an input that
dies there (modelgen/plan.py, ``Op.inplace_input``), and their outputs still equal LiteRT's.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import List

import numpy as np
import pytest
from compile_cases import tiny_model
from conftest import REPO_ROOT
from litert_oracle import litert_outputs, random_inputs

from project_api.compile import read_tflite
from project_api.compile.lower import lower_model
from project_api.driver import Project
from project_api.modelgen.lower import Lowered
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
    content = path.read_bytes()
    with project.session(timeout=60) as session:
        for seed in range(3):
            inputs = random_inputs(content, seed)
            got = session.run(inputs)["output0"]
            want = litert_outputs(content, inputs)[0]
            np.testing.assert_array_equal(got, want.reshape(got.shape))
