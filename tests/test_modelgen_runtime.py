"""Factory models run through the project's C runtime (crt/src) on the host.

A small driver parses the archive's graph.json with mlf_graph_parse_json(), binds the params
file and a workspace of the size the generator plans for a JSON graph, runs, and writes the
outputs; they must match the numpy references (and the failing model must fail at the right
node). The runtime measures each operator call's workspace (MLF_WORKSPACE_MARKS): no call may
hold more than the window the generator's liveness plan gives it (tests/workspace_marks.py).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import pytest
from mlf_builders import model_metadata, write_tar
from workspace_marks import over_window, planned_windows

from project_api.modelgen import GeneratedModel, catalog, compare_outputs, failing_inputs
from project_api.read.params import save_params

REPO = Path(__file__).resolve().parent.parent
CRT = REPO / "crt"

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None or not (CRT / "mlf_runtime.cmake").is_file(),
    reason="needs gcc and the C runtime (crt/mlf_runtime.cmake and crt/src)",
)


def runtime_sources() -> List[Path]:
    """The core runtime sources, as crt/mlf_runtime.cmake lists them (MLF_RUNTIME_SOURCES)."""
    cmake = (CRT / "mlf_runtime.cmake").read_text()
    block = re.search(r"set\(MLF_RUNTIME_SOURCES(.*?)\)", cmake, re.S)
    assert block is not None, "crt/mlf_runtime.cmake lists no MLF_RUNTIME_SOURCES"
    names = re.findall(r"\$\{MLF_RUNTIME_DIR\}/(\S+\.c)", block.group(1))
    return [CRT / name for name in names]


DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlf_runtime.h"

static void* slurp(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (!f) exit(20);
  fseek(f, 0, SEEK_END);
  *size = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  void* data = aligned_alloc(64, (*size + 64) & ~(size_t)63);
  if (fread(data, 1, *size, f) != *size) exit(21);
  fclose(f);
  return data;
}

static int fail(const char* what, mlf_status status, const mlf_error* err) {
  char text[256];
  mlf_error_format(err, text, sizeof text);
  fprintf(stderr, "%s: %s (%s)\n", what, mlf_status_name(status), text);
  return 30 + (int)status;
}

int main(int argc, char** argv) {
  /* argv: graph.json params inputs.bin outputs.bin workspace_bytes */
  size_t json_len, params_len, inputs_len, bytes;
  const char* json = slurp(argv[1], &json_len);
  const void* params = slurp(argv[2], &params_len);
  const uint8_t* inputs = slurp(argv[3], &inputs_len);
  mlf_error err;
  mlf_status st = mlf_graph_measure_json(json, json_len, &bytes, &err);
  if (st != MLF_OK) return fail("measure", st, &err);
  void* tables = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
  const mlf_graph* graph;
  st = mlf_graph_parse_json(json, json_len, tables, bytes, &graph, &err);
  if (st != MLF_OK) return fail("parse", st, &err);
  size_t state_bytes = mlf_executor_state_bytes(graph), arena_bytes;
  st = mlf_executor_arena_bytes(graph, params, params_len, 1, &arena_bytes);
  if (st != MLF_OK) return fail("arena", st, &err);
  void* state = aligned_alloc(64, (state_bytes + 64) & ~(size_t)63);
  void* arena = aligned_alloc(64, (arena_bytes + 64) & ~(size_t)63);
  mlf_executor ex;
  st = mlf_executor_init(&ex, graph, TVMSystemLibEntryPoint(), params, params_len, state,
                         state_bytes, arena, arena_bytes);
  if (st != MLF_OK) return fail("init", st, mlf_executor_error(&ex));
  size_t ws_bytes = (size_t)atol(argv[5]);
  void* ws_mem = aligned_alloc(64, ws_bytes + 64);
  mlf_workspace ws;
  mlf_workspace_init(&ws, ws_mem, ws_bytes);
  uint32_t* marks = calloc(graph->num_ops + 1u, sizeof(uint32_t));
  mlf_workspace_watch(&ws, marks, graph->num_ops);
  mlf_workspace_bind(&ws);
  size_t at = 0;
  for (uint32_t i = 0; i < mlf_executor_num_inputs(&ex); ++i) {
    mlf_tensor_info info;
    mlf_executor_input_info(&ex, i, &info);
    st = mlf_executor_set_input(&ex, i, inputs + at, info.nbytes);
    if (st != MLF_OK) return fail("set_input", st, mlf_executor_error(&ex));
    at += info.nbytes;
  }
  st = mlf_executor_run(&ex);
  if (st != MLF_OK) {
    printf("%u\n", (unsigned)mlf_executor_error(&ex)->node);
    return fail("run", st, mlf_executor_error(&ex));
  }
  FILE* out = fopen(argv[4], "wb");
  for (uint32_t i = 0; i < mlf_executor_num_outputs(&ex); ++i) {
    mlf_tensor_info info;
    mlf_executor_output_info(&ex, i, &info);
    void* data = malloc(info.nbytes + 1);
    mlf_executor_get_output(&ex, i, data, info.nbytes);
    fwrite(data, 1, info.nbytes, out);
    free(data);
  }
  fclose(out);
  printf("%zu\n", mlf_workspace_high_water(&ws));
  for (uint32_t i = 0; i < graph->num_ops; ++i) printf("%u ", (unsigned)marks[i]);
  printf("\n");
  return 0;
}
"""


@pytest.fixture(scope="module")
def runtime_objects(tmp_path_factory: pytest.TempPathFactory) -> List[Path]:
    """The runtime and the driver, compiled once for every model of this module."""
    work = tmp_path_factory.mktemp("runtime")
    (work / "driver.c").write_text(DRIVER)
    objects = []
    for source in [work / "driver.c", *runtime_sources()]:
        obj = work / (source.stem + ".o")
        command = [
            "gcc",
            "-c",
            "-O1",
            "-std=c11",
            "-DMLF_WORKSPACE_MARKS=1",
            f"-I{CRT / 'include'}",
            str(source),
            "-o",
            str(obj),
        ]
        result = subprocess.run(command, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-3000:]
        objects.append(obj)
    return objects


def build(model: GeneratedModel, work: Path, objects: List[Path]) -> Path:
    return build_files(model.members(), model.name, work, objects)


def build_files(members: Dict[str, bytes], name: str, work: Path, objects: List[Path]) -> Path:
    for member, data in members.items():
        target = work / "mlf" / member
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    sources = sorted((work / "mlf" / "codegen" / "host" / "src").glob(f"{name}_lib*.c"))
    exe = work / "driver"
    command = ["gcc", "-O0", "-ffp-contract=off", "-std=c11", f"-I{CRT / 'include'}"]
    command += [*map(str, sources), *map(str, objects), "-lm", "-o", str(exe)]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return exe


def run(
    model: GeneratedModel,
    exe: Path,
    inputs: Dict[str, np.ndarray],
    work: Path,
    workspace: Optional[int] = None,
) -> subprocess.CompletedProcess:
    blob = b"".join(np.ascontiguousarray(inputs[s.name]).tobytes() for s in model.inputs)
    (work / "inputs.bin").write_bytes(blob)
    graph = work / "mlf" / "executor-config" / "graph" / f"{model.name}.graph"
    params = work / "mlf" / "parameters" / f"{model.name}.params"
    command = [
        str(exe),
        str(graph),
        str(params),
        str(work / "inputs.bin"),
        str(work / "outputs.bin"),
    ]
    size = model.workspace_size_bytes if workspace is None else workspace
    return subprocess.run(command + [str(size)], capture_output=True, text=True)


def outputs(model: GeneratedModel, work: Path) -> Dict[str, np.ndarray]:
    blob, at, result = (work / "outputs.bin").read_bytes(), 0, {}
    for spec in model.outputs:
        result[spec.name] = np.frombuffer(blob[at : at + spec.nbytes], spec.dtype).reshape(
            spec.shape
        )
        at += spec.nbytes
    return result


@pytest.mark.parametrize(
    "name",
    [  # the edge cases TVM's own CRT mishandles, an int8 CNN with workspace, the demo model
        "cnn_int8",
        "ops_zoo",
        "long_names",
        "many_args",
        "multi_output",
        "scalar",
        "chain_add_100",
        "digits",
        "cnn_nchw",
    ],
)
def test_runtime_runs_factory_models(
    name: str, tmp_path: Path, runtime_objects: List[Path]
) -> None:
    model = catalog()[name]()
    exe = build(model, tmp_path, runtime_objects)
    windows, funcs, workspace = planned_windows(model.write(tmp_path / "m.tar"), model.name)
    inputs = model.sample_inputs(5)
    result = run(model, exe, inputs, tmp_path, workspace)
    assert result.returncode == 0, result.stderr
    high, marks = result.stdout.splitlines()
    assert int(high) <= workspace
    assert over_window([int(m) for m in marks.split()], windows, funcs) == []
    assert compare_outputs(outputs(model, tmp_path), model.reference(inputs)) == []


def test_runtime_reports_the_failing_node(tmp_path: Path, runtime_objects: List[Path]) -> None:
    model = catalog()["failing"]()
    exe = build(model, tmp_path, runtime_objects)
    assert run(model, exe, failing_inputs(1), tmp_path).returncode == 0
    failed = run(model, exe, failing_inputs(1, fail=True), tmp_path)
    assert failed.returncode != 0
    assert int(failed.stdout) == model.op_node(1)


NESTED = "tvmgen_nested_fused_nested"


def nested_c() -> str:
    """Twenty 16-byte blocks held at once, sized at run time (not literals), as TVM writes
    twenty nested allocations: only the metadata's 320 bytes and the twenty calls say what
    they take. out = in + 20."""
    lines = [
        "#include <stdint.h>",
        '#include "tvm/runtime/c_backend_api.h"',
        '#include "tvm/runtime/crt/module.h"',
        "static volatile uint64_t block_bytes = 16;",
        f"TVM_DLL int32_t {NESTED}(void* args, int32_t* arg_type_ids, int32_t num_args, "
        "void* out_ret_value, int32_t* out_ret_tcode, void* resource_handle) {",
        "  float* in = (float*)(((DLTensor*)(((TVMValue*)args)[0].v_handle))[0].data);",
        "  float* out = (float*)(((DLTensor*)(((TVMValue*)args)[1].v_handle))[0].data);",
        "  float before = 0.0f;",
    ]
    for i in range(20):
        lines += [
            f"  float* b{i} = (float*)TVMBackendAllocWorkspace(1, 0, block_bytes, 2, 32);",
            f"  if (b{i} == NULL) return -1;",
            f"  b{i}[0] = before + 1.0f;",
            f"  before = b{i}[0];",
        ]
    lines.append("  for (int k = 0; k < 4; ++k) out[k] = in[k] + b19[0];")
    for i in reversed(range(20)):
        lines.append(f"  if (TVMBackendFreeWorkspace(1, 0, b{i}) != 0) return -1;")
    lines += [
        "  return 0;",
        "}",
        f"static const TVMBackendPackedCFunc funcs[] = {{(TVMBackendPackedCFunc){NESTED}}};",
        f'static const TVMFuncRegistry registry = {{"\\001\\000{NESTED}\\000", funcs}};',
        "static const TVMModule module = {&registry};",
        "const TVMModule* TVMSystemLibEntryPoint(void) { return &module; }",
    ]
    return "\n".join(lines) + "\n"


def nested_files() -> Dict[str, bytes]:
    """A graph of one call to NESTED (x[1,4] float32 -> output), TVM's figure for it 320 B."""
    graph = {
        "nodes": [
            {"op": "null", "name": "x", "inputs": []},
            {
                "op": "tvm_op",
                "name": NESTED,
                "inputs": [[0, 0, 0]],
                "attrs": {
                    "func_name": NESTED,
                    "num_inputs": "1",
                    "num_outputs": "1",
                    "flatten_data": "0",
                },  # fmt: skip
            },
        ],
        "arg_nodes": [0],
        "heads": [[1, 0, 0]],
        "node_row_ptr": [0, 1, 2],
        "attrs": {
            "dltype": ["list_str", ["float32"] * 2],
            "shape": ["list_shape", [[1, 4], [1, 4]]],
            "storage_id": ["list_int", [0, 1]],
        },
    }
    meta = model_metadata("nested", 7, workspace=320)
    meta["memory"]["functions"]["operator_functions"] = [
        {"function_name": NESTED, "workspace": [{"device": 1, "workspace_size_bytes": 320}]}
    ]
    metadata = {"version": 7, "modules": {"nested": meta}}
    return {
        "metadata.json": json.dumps(metadata).encode(),
        "executor-config/graph/nested.graph": json.dumps(graph).encode(),
        "parameters/nested.params": save_params({}),
        "src/nested.relay": b"def @main(%x) { %x }\n",
        "codegen/host/src/nested_lib0.c": nested_c().encode(),
    }


def test_window_from_metadata_holds_what_the_calls_take(
    tmp_path: Path, runtime_objects: List[Path]
) -> None:
    """Sizes the C does not spell out: the window comes from TVM's figure (320 B for twenty
    16-byte blocks) and the twenty calls in the code, each block padded to 64 bytes and
    linked. The run measures 1,308 B; the window holds it. The control: the rule before
    (the figure aligned, plus four 64-byte blocks of slack) gave 576 B, which the same
    measure shows short."""
    files = nested_files()
    exe = build_files(files, "nested", tmp_path, runtime_objects)
    windows, funcs, workspace = planned_windows(write_tar(tmp_path / "nested.tar", files))
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    (tmp_path / "in.bin").write_bytes(x.tobytes())
    graph = tmp_path / "mlf" / "executor-config" / "graph" / "nested.graph"
    params = tmp_path / "mlf" / "parameters" / "nested.params"
    command = [str(exe), str(graph), str(params), str(tmp_path / "in.bin")]
    command += [str(tmp_path / "out.bin"), str(1 << 16)]  # unbounded: the call takes its need
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    out = np.frombuffer((tmp_path / "out.bin").read_bytes(), np.float32)
    np.testing.assert_array_equal(out, x.reshape(-1) + 20)
    marks = [int(m) for m in result.stdout.splitlines()[1].split()]
    assert marks == [19 * 64 + 16 + 19 * 4] == [1308]
    assert over_window(marks, windows, funcs) == [], windows
    assert workspace >= marks[0]  # a JSON graph's workspace of its own holds it too
    before = -(-320 // 64) * 64 + 64 * max(4, 320 // 1024)  # with_slack as it was
    assert over_window(marks, [before], funcs) == [
        f"call 0 ({NESTED}): 1308 B measured, window 576 B"
    ]
