"""A graph archive built with ``Executor("graph", {"link-params": True})``, as TVM 0.14 writes
it: the constants are ``static const`` arrays in ``.rodata.tvm`` inside the operators' C,
graph.json has no parameter nodes and ``parameters/<mod>.params`` is an empty dict. It runs
like any graph archive, the constants staying in flash."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import requires_arm
from mlf_builders import Files, model_metadata, write_dir

from project_api.driver import Project
from project_api.read import open_archive
from project_api.read.params import save_params

ADD, RELU = "tvmgen_default_fused_add", "tvmgen_default_fused_nn_relu"
X = np.array([[1.0, 2.5, -3.0, 4.0]], dtype=np.float32)
CONSTANT = np.array([-2.0, 0.0, 1.0, 2.0], dtype=np.float32)

_OP = """TVM_DLL int32_t {name}(void* args, int32_t* arg_type_ids, int32_t num_args,
    void* out_ret_value, int32_t* out_ret_tcode, void* resource_handle) {{
  float* p0 = (float*)(((DLTensor*)(((TVMValue*)args)[0].v_handle))[0].data);
  float* T = (float*)(((DLTensor*)(((TVMValue*)args)[1].v_handle))[0].data);
  for (int i = 0; i < 4; ++i) T[i] = {expr};
  return 0;
}}
"""


def _op_node(func: str, source: int) -> dict:
    attrs = {"func_name": func, "num_inputs": "1", "num_outputs": "1", "flatten_data": "0"}
    return {"op": "tvm_op", "name": func, "inputs": [[source, 0, 0]], "attrs": attrs}


def linked_params_files() -> Files:
    graph = {
        "nodes": [{"op": "null", "name": "x", "inputs": []}, _op_node(ADD, 0), _op_node(RELU, 1)],
        "arg_nodes": [0],
        "heads": [[2, 0, 0]],
        "node_row_ptr": [0, 1, 2, 3],
        "attrs": {
            "shape": ["list_shape", [[1, 4]] * 3],
            "dltype": ["list_str", ["float32"] * 3],
            "storage_id": ["list_int", [0, 1, 2]],
        },
    }
    meta = model_metadata("default", 7)
    meta["memory"]["sids"] = [
        {"storage_id": 0, "size_bytes": 16, "input_binding": "x"},
        {"storage_id": 1, "size_bytes": 16},
        {"storage_id": 2, "size_bytes": 16},
    ]
    constant = ", ".join(f"{float(v).hex():16}" for v in CONSTANT)
    lib1 = (
        '// tvm target: c -keys=cpu \n#define TVM_EXPORTS\n#include "tvm/runtime/c_runtime_api.h"\n'
        '#include "tvm/runtime/c_backend_api.h"\n#include <math.h>\n'
        '#ifdef __cplusplus\nextern "C" {\n#endif\n'
        'static const float __attribute__((section(".rodata.tvm"), aligned(16))) '
        f"fused_constant[4] = {{\n    {constant}\n}};\n"
        '#ifdef __cplusplus\n}  // extern "C"\n#endif\n'
        + _OP.format(name=ADD, expr="p0[i] + fused_constant[i]")
        + _OP.format(name=RELU, expr="p0[i] > 0.0f ? p0[i] : 0.0f")
    )
    return {
        "metadata.json": json.dumps({"version": 7, "modules": {"default": meta}}).encode(),
        "executor-config/graph/default.graph": json.dumps(graph).encode(),
        "parameters/default.params": save_params({}),
        "src/default.relay": b"def @main(%x: Tensor[(1, 4), float32]) { %x }\n",
        "codegen/host/src/default_lib1.c": lib1.encode(),
    }


def reference() -> np.ndarray:
    return np.maximum(X + CONSTANT, 0.0)


def test_read_without_params(tmp_path: Path) -> None:
    with open_archive(write_dir(tmp_path / "lp.mlf", linked_params_files())) as archive:
        model = archive.model()
    assert model.params == {} and [s.name for s in model.inputs] == ["x"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "board", ["host", pytest.param("qemu-mps2-an385", marks=[requires_arm, pytest.mark.qemu])]
)
def test_runs_with_its_constants_in_the_code(board: str, tmp_path: Path) -> None:
    archive = write_dir(tmp_path / "lp.mlf", linked_params_files())
    project = Project.generate(archive, tmp_path / "p", board=board)
    project.build()
    with project.session(timeout=60) as session:
        got = session.run({"x": X})
    np.testing.assert_array_equal(got["output0"], reference())
